// SPDX-License-Identifier: GPL-2.0
/*
 * Sends by page reference (splice.rs): a large payload of an operation
 * that completes only on the peer's response goes into the socket as
 * references to the ULP's pages (MSG_SPLICE_PAGES) instead of a copy,
 * as nvme-tcp sends its data. The skbs hold their own page references,
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

bool kfi_sockets_can_splice(const void *addr, size_t len)
{
	uintptr_t start = (uintptr_t)addr, end, p;

	if (check_add_overflow(start, len, &end))
		return false;
	for (p = round_down(start, PAGE_SIZE); p < end; p += PAGE_SIZE)
		if (!kfi_sockets_splice_page((const void *)p))
			return false;
	return true;
}

int kfi_sockets_send_pages(struct socket *sock, const void *addr, size_t len,
			   unsigned int flags)
{
	struct bio_vec bv[KFI_SOCKETS_SPLICE_BATCH];
	const char *at = addr;
	size_t done = 0;

	len = min_t(size_t, len, INT_MAX);
	while (done < len) {
		struct msghdr msg = {};
		size_t bytes = 0;
		unsigned int n = 0;
		int ret;

		while (n < ARRAY_SIZE(bv) && done + bytes < len) {
			const char *p = at + done + bytes;
			size_t off = offset_in_page(p);
			size_t part = min_t(size_t, PAGE_SIZE - off, len - done - bytes);
			struct page *page = kfi_sockets_splice_page(p);

			/* The buffer changed kind since it was checked. */
			if (!page)
				return done ? done : -EFAULT;
			bvec_set_page(&bv[n++], page, part, off);
			bytes += part;
		}
		msg.msg_flags = flags | MSG_SPLICE_PAGES;
		if (done + bytes < len)
			msg.msg_flags |= MSG_MORE;
		iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, bv, n, bytes);
		ret = sock_sendmsg(sock, &msg);
		if (ret <= 0)
			return done ? done : ret;
		done += ret;
		/*
		 * A call that may wait takes one batch: each sendmsg waits up to
		 * the socket's whole timeout, which the caller sets from what is
		 * left of the frame's deadline before every call.
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
