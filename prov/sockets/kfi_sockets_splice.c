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
 * references); else NULL.
 */
static struct page *kfi_sockets_splice_page(const void *p)
{
	struct page *page;

	if (is_vmalloc_addr(p))
		page = vmalloc_to_page(p);
	else if (virt_addr_valid(p))
		page = virt_to_page(p);
	else
		return NULL;
	if (!page || !sendpage_ok(page) || is_zone_device_page(page))
		return NULL;
	return page;
}

bool kfi_sockets_can_splice(const void *addr, size_t len)
{
	uintptr_t start = (uintptr_t)addr, end, p;

	if (!len || check_add_overflow(start, len, &end))
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
		if (ret < bytes)
			break;
	}
	return done;
}

u32 kfi_sockets_write_seq(struct socket *sock)
{
	return READ_ONCE(tcp_sk(sock->sk)->write_seq);
}

bool kfi_sockets_acked(struct socket *sock, u32 seq)
{
	return !before(READ_ONCE(tcp_sk(sock->sk)->snd_una), seq);
}

void kfi_sockets_abort(struct socket *sock)
{
	tcp_abort(sock->sk, ECONNABORTED);
}
