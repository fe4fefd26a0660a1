// SPDX-License-Identifier: GPL-2.0
/*
 * Sends by page reference (splice.rs): a large payload of an operation
 * that completes only on the peer's response goes into the socket as
 * references to the ULP's pages (MSG_SPLICE_PAGES) instead of a copy,
 * as nvme-tcp sends its data; the pages that count no references (slab,
 * a large kmalloc's) are copied in their place. The skbs hold their own page references,
 * so the pages outlive a buffer the ULP frees after the completion; TCP's
 * acknowledgement (kfi_sockets_acked()) tells when no retransmission can
 * read them again.
 */
#include <linux/bvec.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/net.h>
#include <linux/overflow.h>
#include <linux/sizes.h>
#include <linux/socket.h>
#include <linux/tcp.h>
#include <linux/uio.h>
#include <linux/vmalloc.h>
#include <net/tcp.h>

#include "kfi_sockets_glue.h"

/* Pages described on the stack per sendmsg (16 bytes each). */
#define KFI_SOCKETS_SPLICE_BATCH 16

/*
 * The page behind kernel address @p if a send may take a reference to it:
 * the linear map or vmalloc, not slab memory (its objects are not
 * refcounted), not device memory (ZONE_DEVICE pages count references
 * their own way), not a frozen page (a large kmalloc's, which counts no
 * references), not a reserved one; else NULL. ioremap() and memremap()
 * share the vmalloc range, and their pfns may have no struct page: the
 * pfn is checked before the page is looked at.
 */
static struct page *kfi_sockets_splice_page(const void *p)
{
	struct page *page;

	if (is_vmalloc_addr(p)) {
		page = vmalloc_to_page(p);
		if (!page || !pfn_valid(page_to_pfn(page)))
			return NULL;
	} else if (virt_addr_valid(p)) {
		page = virt_to_page(p);
	} else {
		return NULL;
	}
	if (PageReserved(page) || is_zone_device_page(page) || !sendpage_ok(page))
		return NULL;
	return page;
}

/* Bytes of a page the socket may not reference copied in one sendmsg at most. */
#define KFI_SOCKETS_COPY_RUN SZ_256K

/*
 * The next run of @buf: up to a batch of pages the socket may reference
 * (described in @bv, their count returned), else the bytes of pages it
 * may not, up to the next one it may (@bv unused, 0 returned); @bytes
 * gets the run's length.
 */
static unsigned int kfi_sockets_next_run(const char *buf, size_t len,
					 struct bio_vec *bv, size_t *bytes)
{
	bool ref = kfi_sockets_splice_page(buf);
	unsigned int n = 0;
	size_t got = 0;

	while (got < len) {
		const char *p = buf + got;
		size_t off = offset_in_page(p);
		size_t part = min_t(size_t, PAGE_SIZE - off, len - got);
		struct page *page = kfi_sockets_splice_page(p);

		if (!!page != ref)
			break;
		if (page) {
			if (n == KFI_SOCKETS_SPLICE_BATCH)
				break;
			bvec_set_page(&bv[n++], page, part, off);
		} else if (got >= KFI_SOCKETS_COPY_RUN) {
			break;
		}
		got += part;
	}
	*bytes = got;
	return n;
}

int kfi_sockets_send_pages(struct socket *sock, const void *addr, size_t len,
			   unsigned int flags)
{
	struct bio_vec bv[KFI_SOCKETS_SPLICE_BATCH];
	const char *at = addr;
	size_t done = 0;

	len = min_t(size_t, len, INT_MAX);
	while (done < len) {
		struct msghdr msg = { .msg_flags = flags };
		size_t bytes;
		unsigned int n = kfi_sockets_next_run(at + done, len - done, bv, &bytes);
		int ret;

		if (done + bytes < len)
			msg.msg_flags |= MSG_MORE;
		if (n) {
			msg.msg_flags |= MSG_SPLICE_PAGES;
			iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, bv, n, bytes);
			ret = sock_sendmsg(sock, &msg);
		} else {
			struct kvec iov = { .iov_base = (void *)(at + done), .iov_len = bytes };

			ret = kernel_sendmsg(sock, &msg, &iov, 1, bytes);
		}
		if (ret <= 0)
			return done ? done : ret;
		done += ret;
		/*
		 * A call that may wait makes one sendmsg: each waits up to the
		 * socket's whole timeout, which the caller sets from what is left
		 * of the frame's deadline before every call.
		 */
		if (ret < bytes || !(flags & MSG_DONTWAIT))
			break;
	}
	return done;
}

/*
 * A frame's mark holds where it ends in the sequence space and the low bits
 * of the count of bytes acknowledged when it began. It is only made while
 * less than KFI_SOCKETS_MARK_SPAN lies between the first unacknowledged
 * byte and the frame's end, so sequence numbers (compared within half
 * their space) cannot wrap before the frame is acknowledged; once twice
 * that span has been acknowledged since, so has the frame, whatever the
 * sequence numbers say.
 */
#define KFI_SOCKETS_MARK_SPAN SZ_512M

bool kfi_sockets_mark_frame(struct socket *sock, size_t len, struct kfi_sockets_mark *m)
{
	const struct tcp_sock *tp = tcp_sk(sock->sk);
	u32 seq = READ_ONCE(tp->write_seq);
	u32 unacked = seq - READ_ONCE(tp->snd_una);

	if (len >= KFI_SOCKETS_MARK_SPAN || unacked >= KFI_SOCKETS_MARK_SPAN - len)
		return false;
	m->end = seq + (u32)len;
	m->acked = (u32)READ_ONCE(tp->bytes_acked);
	return true;
}

bool kfi_sockets_acked(struct socket *sock, const struct kfi_sockets_mark *m)
{
	const struct tcp_sock *tp = tcp_sk(sock->sk);

	if (!before(READ_ONCE(tp->snd_una), m->end))
		return true;
	return (u32)READ_ONCE(tp->bytes_acked) - m->acked >= 2 * KFI_SOCKETS_MARK_SPAN;
}

void kfi_sockets_abort(struct socket *sock)
{
	tcp_abort(sock->sk, ECONNABORTED);
}
