/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kfi_sockets' C glue (kfi_sockets_sock.c, kfi_sockets_mem.c,
 * kfi_sockets_splice.c): what the Rust side calls in C, and what the C
 * side calls back in Rust. The Rust declarations are generated from this header (scripts/bindgen.sh sock,
 * into sock_bindings_generated.rs, read through sock_sys.rs), the C files
 * include it, and the Rust callbacks are checked against it where they are
 * defined, so both compilers check both sides against one declaration.
 */
#ifndef KFI_SOCKETS_GLUE_H
#define KFI_SOCKETS_GLUE_H

#include <linux/types.h>
#include <linux/workqueue.h>
#include <net/sock.h>

/*
 * <net/sock.h> also declares sock_setsockopt(), exported but not in the
 * kernel crate's bindings: ksock.rs calls it by the declaration generated
 * from here.
 */

/* Socket options and callbacks (kfi_sockets_sock.c). */

/* SO_REUSEADDR on a listener (pep.rs); process context. */
void kfi_sockets_reuseaddr(struct socket *sock);

/*
 * Hooks a connected socket's callbacks to the connection @owner (progress.rs);
 * 0, -ENOMEM or -EBUSY. Process context.
 */
int kfi_sockets_hook(struct socket *sock, void *owner);

/* Hooks a listener's data callback to @owner (accept.rs); process context. */
int kfi_sockets_hook_listener(struct socket *sock, void *owner);

/*
 * Gives @sock, just accepted from the hooked @listener, back the listener's
 * original data callback (accept.rs); process context.
 */
void kfi_sockets_accepted(struct socket *listener, struct socket *sock);

/* Removes the hook; returns its owner, or NULL. Process context. */
void *kfi_sockets_unhook(struct socket *sock);

/* Kicks the hook's owner within @ms milliseconds; not in hard interrupt. */
void kfi_sockets_arm_timer(struct socket *sock, unsigned int ms);

/*
 * kfi_sockets_arm_timer() from @sk's data callback, which holds the
 * socket's callback lock already (rx/soft.rs): softirq or process context.
 */
void kfi_sockets_arm_timer_in_callback(struct sock *sk, unsigned int ms);

/*
 * Gives back the page fragment @sock's sends copy into (held for the
 * socket's life otherwise: up to 32 KiB) while its connection is idle
 * (conn.rs). Process context; takes the socket's lock.
 */
void kfi_sockets_release_frag(struct socket *sock);

/* Whether the calling thread may send or receive on a socket now (progress.rs). */
bool kfi_sockets_may_send_inline(void);

/*
 * Runs @sk's received bytes through @parser (kfi_sockets_rx_skb()) with
 * @sk locked (rx/soft.rs); returns what tcp_read_sock() does.
 */
int kfi_sockets_read_sock(struct sock *sk, void *parser);

/*
 * Bytes @sk holds for reading, or -EPROTO if the peer sent urgent data;
 * its lock held (rx/soft.rs).
 */
int kfi_sockets_inq(struct sock *sk);
/*
 * Whether @sk holds TCP urgent data not read yet (the protocol has none);
 * its lock held (rx/soft.rs).
 */
bool kfi_sockets_urg_pending(struct sock *sk);

/*
 * Copies the first @len bytes @sk holds for reading to @to without taking
 * them, if they lie in its first buffer: 0, else -EAGAIN. Its lock held
 * (rx/soft.rs).
 */
int kfi_sockets_peek(struct sock *sk, void *to, unsigned int len);

/*
 * About the bytes a read can take from @sock, without its lock (a FIN and
 * an urgent byte left out): a hint that may be stale by the time it is
 * used (rx.rs). Any context.
 */
int kfi_sockets_inq_hint(struct socket *sock);

/*
 * kfi_sockets_urg_pending() without the socket's lock, by its only reader
 * (the receive work, between frames): an urgent byte that arrived before
 * the call is seen; one that arrives during it is the data callback's
 * (rx.rs).
 */
bool kfi_sockets_urg_hint(struct socket *sock);

/*
 * Whether the peer has ended @sock's connection, read without taking a
 * byte (a receive parked on a message, rx/recv.rs): the socket's pending
 * error (negative, left pending), -ECONNRESET once the peer's FIN came or
 * the socket closed, else 0. Any context.
 */
int kfi_sockets_rx_ended(struct socket *sock);

/* Copies @len bytes from @offset of @skb to @to; 0 or -errno. Any context. */
int kfi_sockets_skb_copy(const struct sk_buff *skb, unsigned int offset, void *to,
			 unsigned int len);

/* Sends by page reference (kfi_sockets_splice.c; splice.rs). */

/*
 * Sends @len bytes at @addr with @flags (MSG_NOSIGNAL, MSG_DONTWAIT,
 * MSG_MORE; MSG_MORE between its own calls): the pages that count
 * references (linear map or vmalloc with a struct page; not slab, frozen,
 * reserved or device memory) as page references (MSG_SPLICE_PAGES, up to
 * 16 per sendmsg), the others copied. With MSG_DONTWAIT as many sendmsg
 * calls as the socket takes, else one (each may wait the socket's whole
 * timeout, which the caller arms before every call). Returns the bytes
 * the socket took (at most INT_MAX) or -errno, as kernel_sendmsg().
 * Process context; sleeps unless MSG_DONTWAIT.
 */
int kfi_sockets_send_pages(struct socket *sock, const void *addr, size_t len,
			   unsigned int flags);

/* Where a frame of @sock sent by page reference ends (kfi_sockets_mark_frame()). */
struct kfi_sockets_mark {
	/* The sequence number after its last byte. */
	u32 end;
	/* The low 32 bits of the bytes acknowledged when it began. */
	u32 acked;
};

/*
 * Marks where a frame of @len bytes, sent next on @sock, will end (@m);
 * false if it is too far ahead of what the peer acknowledged for the
 * sequence numbers to tell (then it is copied). Called by the socket's
 * only sender, before the frame's first byte. Any context.
 */
bool kfi_sockets_mark_frame(struct socket *sock, size_t len, struct kfi_sockets_mark *m);

/*
 * Whether the peer has acknowledged every byte of the frame @m marks (a
 * response parsed after 4 GiB more were acknowledged may read as not).
 * Any context.
 */
bool kfi_sockets_acked(struct socket *sock, const struct kfi_sockets_mark *m);

/*
 * Ends @sock's connection at once (tcp_abort(): a reset; the bytes not
 * acknowledged yet are dropped, and their page references with them).
 * Process context.
 */
void kfi_sockets_abort(struct socket *sock);

/* Memory (kfi_sockets_mem.c; mr.rs), any context. */

/* Writes [@addr, @addr + @len) back to the persistence domain, ordered. */
void kfi_sockets_persist(void *addr, size_t len);

/* A full memory barrier. */
void kfi_sockets_barrier(void);

/*
 * Begins a scope in which the calling task's allocations start no I/O
 * (memalloc_noio_save()); returns what kfi_sockets_noio_end() restores.
 * Task context (wq.rs).
 */
unsigned int kfi_sockets_noio_begin(void);
void kfi_sockets_noio_end(unsigned int flags);

/*
 * The key of the host whose address is the 16 bytes at @ip (IPv6, or
 * IPv4-mapped) on link @scope: a keyed hash whose key is drawn once per
 * module load, so that a peer cannot pick addresses whose keys collide
 * with another host's (host_key.rs). Any context.
 */
u64 kfi_sockets_host_key(const u8 *ip, u32 scope);

/*
 * Defined in Rust (#[no_mangle]), called by kfi_sockets_sock.c from the
 * socket callbacks (softirq, or the thread that releases the socket's
 * lock) and the hook's timer (softirq). @owner is the pointer given to
 * kfi_sockets_hook() or kfi_sockets_hook_listener().
 */

/* The connection has something to receive (progress.rs). */
void kfi_sockets_rx_ready(void *owner);

/* Bytes arrived on @sk, locked (progress.rs). */
void kfi_sockets_rx_data(void *owner, struct sock *sk);

/* The socket has room to send again (progress.rs). */
void kfi_sockets_tx_ready(void *owner);

/* A connection is ready to be accepted (accept.rs). */
void kfi_sockets_accept_ready(void *owner);

/*
 * @len bytes from @offset of @skb for the parser of kfi_sockets_read_sock()
 * (rx/soft.rs); returns the bytes taken, 0 to stop.
 */
int kfi_sockets_rx_skb(void *parser, const struct sk_buff *skb, unsigned int offset,
		       size_t len);

#endif /* KFI_SOCKETS_GLUE_H */
