// SPDX-License-Identifier: GPL-2.0
/*
 * Socket options for kfi_sockets that the Rust bindings do not reach
 * (net/sock.h helpers): SO_REUSEADDR for listeners (pep.rs), the
 * callbacks that drive a connection's progress (progress.rs) and a
 * listener's accepting (accept.rs), whether a
 * caller may send inline (progress.rs) and the provider's workqueue
 * (wq.rs; alloc_workqueue is a macro).
 */
#include <linux/jiffies.h>
#include <linux/preempt.h>
#include <linux/rcupdate.h>
#include <linux/sched/task_stack.h>
#include <linux/siphash.h>
#include <linux/slab.h>
#include <linux/tcp.h>
#include <linux/timer.h>
#include <linux/workqueue.h>
#include <net/sock.h>
#include <net/tcp.h>

#include "kfi_sockets_glue.h"

/*
 * A listener may bind its port again while connections of an earlier
 * listener on it linger in TIME_WAIT, as servers do.
 */
void kfi_sockets_reuseaddr(struct socket *sock)
{
	sock_set_reuseaddr(sock->sk);
}

/*
 * Socket callbacks (progress.rs, accept.rs): the original callback runs
 * first (it wakes a worker sleeping in the socket), then the connection's
 * rx or tx work, or the listener's accept work, is queued. sk_user_data
 * holds the saved callbacks and the owner, a reference on the connection
 * or listener that lives until kfi_sockets_unhook(). It is stored with
 * SK_USER_DATA_NOCOPY: a connection accepted from a hooked listener starts
 * as a clone of it and must not inherit the pointer.
 */
struct kfi_sockets_cb {
	void (*data_ready)(struct sock *sk);
	void (*write_space)(struct sock *sk);
	void (*state_change)(struct sock *sk);
	/*
	 * The deadline (kfi_sockets_arm_timer()): queues a connection's rx
	 * work, or a listener's accept work.
	 */
	struct timer_list timer;
	void (*kick)(void *owner);
	void *owner;
};

/* The hook of sk, or NULL; under sk_callback_lock. */
static struct kfi_sockets_cb *kfi_sockets_cb_of(const struct sock *sk)
{
	return (void *)((uintptr_t)sk->sk_user_data & SK_USER_DATA_PTRMASK);
}

static void kfi_sockets_data_ready(struct sock *sk)
{
	struct kfi_sockets_cb *cb;

	read_lock_bh(&sk->sk_callback_lock);
	cb = kfi_sockets_cb_of(sk);
	if (cb) {
		cb->data_ready(sk);
		kfi_sockets_rx_data(cb->owner, sk);
	}
	read_unlock_bh(&sk->sk_callback_lock);
}

static void kfi_sockets_write_space(struct sock *sk)
{
	struct kfi_sockets_cb *cb;

	read_lock_bh(&sk->sk_callback_lock);
	cb = kfi_sockets_cb_of(sk);
	if (cb) {
		cb->write_space(sk);
		kfi_sockets_tx_ready(cb->owner);
	}
	read_unlock_bh(&sk->sk_callback_lock);
}

static void kfi_sockets_state_change(struct sock *sk)
{
	struct kfi_sockets_cb *cb;

	read_lock_bh(&sk->sk_callback_lock);
	cb = kfi_sockets_cb_of(sk);
	if (cb) {
		cb->state_change(sk);
		/* A peer that closed is seen by the receiver. */
		kfi_sockets_rx_ready(cb->owner);
	}
	read_unlock_bh(&sk->sk_callback_lock);
}

static int kfi_sockets_read_actor(read_descriptor_t *desc, struct sk_buff *skb,
				  unsigned int offset, size_t len)
{
	return kfi_sockets_rx_skb(desc->arg.data, skb, offset, len);
}

/*
 * Receiving in the data callback (rx/soft.rs): the socket's bytes go
 * through the parser, which takes whole frames and returns 0 to stop. The
 * caller holds the socket's lock (the data callback does).
 */
int kfi_sockets_read_sock(struct sock *sk, void *parser)
{
	read_descriptor_t desc = { .arg.data = parser, .count = 1 };

	return tcp_read_sock(sk, &desc, kfi_sockets_read_actor);
}

bool kfi_sockets_urg_pending(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	return unlikely(READ_ONCE(tp->urg_data)) &&
	       !before(READ_ONCE(tp->urg_seq), READ_ONCE(tp->copied_seq));
}

bool kfi_sockets_urg_hint(struct socket *sock)
{
	return kfi_sockets_urg_pending(sock->sk);
}

/* Bytes the socket holds for reading; its lock held. */
int kfi_sockets_inq(struct sock *sk)
{
	/*
	 * The protocol has no urgent data, and tcp_read_sock() would stop at
	 * it for good.
	 */
	if (kfi_sockets_urg_pending(sk))
		return -EPROTO;
	return tcp_inq(sk);
}

/*
 * The first bytes the socket holds for reading, left there: only from the
 * first buffer (where tcp_read_sock() would start), else -EAGAIN. Its lock
 * held.
 */
int kfi_sockets_peek(struct sock *sk, void *to, unsigned int len)
{
	struct sk_buff *skb = skb_peek(&sk->sk_receive_queue);
	u32 off;

	if (!skb || TCP_SKB_CB(skb)->tcp_flags & TCPHDR_SYN)
		return -EAGAIN;
	off = tcp_sk(sk)->copied_seq - TCP_SKB_CB(skb)->seq;
	if (off >= skb->len || skb->len - off < len)
		return -EAGAIN;
	return skb_copy_bits(skb, off, to, len);
}

/*
 * About the bytes a read can take now, without the socket's lock (so it may
 * be stale): tcp_inq()'s count, which leaves out the FIN's sequence number
 * and stops at an urgent byte that a read does not return. For a moment
 * around a FIN's arrival it may still count the FIN.
 */
int kfi_sockets_inq_hint(struct socket *sock)
{
	struct sock *sk = sock->sk;
	const struct tcp_sock *tp = tcp_sk(sk);
	u32 copied = READ_ONCE(tp->copied_seq);
	u32 nxt = READ_ONCE(tp->rcv_nxt);
	u32 urg = READ_ONCE(tp->urg_seq);
	int n = nxt - copied;

	if (n <= 0)
		return 0;
	if (!sock_flag(sk, SOCK_URGINLINE) && READ_ONCE(tp->urg_data) &&
	    !before(urg, copied) && before(urg, nxt))
		n = urg - copied;
	else if (sock_flag(sk, SOCK_DONE))
		n--;
	return max(n, 0);
}

int kfi_sockets_rx_ended(struct socket *sock)
{
	struct sock *sk = sock->sk;
	int err = READ_ONCE(sk->sk_err);

	if (err)
		return -err;
	if ((READ_ONCE(sk->sk_shutdown) & RCV_SHUTDOWN) ||
	    READ_ONCE(sk->sk_state) == TCP_CLOSE)
		return -ECONNRESET;
	return 0;
}

/* Copies bytes out of a socket buffer (any context). */
int kfi_sockets_skb_copy(const struct sk_buff *skb, unsigned int offset, void *to,
			 unsigned int len)
{
	if (offset > INT_MAX || len > INT_MAX)
		return -EINVAL;
	return skb_copy_bits(skb, offset, to, len);
}

/*
 * The response deadline passed (softirq): the receive work looks at the
 * operations that wait for a response (rx/resp.rs, response_timeout_ms).
 */
static void kfi_sockets_timer_fn(struct timer_list *t)
{
	struct kfi_sockets_cb *cb = timer_container_of(cb, t, timer);

	cb->kick(cb->owner);
}

/*
 * A listener's data callback: a connection is ready to be accepted. A
 * connection accepted from the listener runs this too until
 * kfi_sockets_accepted() gives it the original back: its sk_user_data is
 * NULL (not copied), and nobody waits on it before it is accepted.
 */
static void kfi_sockets_listen_ready(struct sock *sk)
{
	struct kfi_sockets_cb *cb;

	read_lock_bh(&sk->sk_callback_lock);
	cb = kfi_sockets_cb_of(sk);
	if (cb && sk->sk_state == TCP_LISTEN) {
		cb->data_ready(sk);
		kfi_sockets_accept_ready(cb->owner);
	}
	read_unlock_bh(&sk->sk_callback_lock);
}

/* A hook for owner, its timer set up; NULL without memory. */
static struct kfi_sockets_cb *kfi_sockets_cb_new(void *owner, void (*kick)(void *owner))
{
	struct kfi_sockets_cb *cb = kmalloc(sizeof(*cb), GFP_KERNEL);

	if (!cb)
		return NULL;
	cb->owner = owner;
	cb->kick = kick;
	timer_setup(&cb->timer, kfi_sockets_timer_fn, 0);
	return cb;
}

/*
 * Saves sk's callbacks in cb and makes it sk's hook; -EBUSY if sk has
 * one. The caller then replaces the callbacks it needs, still under the
 * lock (held for writing on return; released on error).
 */
static int kfi_sockets_cb_install(struct sock *sk, struct kfi_sockets_cb *cb)
{
	write_lock_bh(&sk->sk_callback_lock);
	if (sk->sk_user_data) {
		write_unlock_bh(&sk->sk_callback_lock);
		return -EBUSY;
	}
	cb->data_ready = sk->sk_data_ready;
	cb->write_space = sk->sk_write_space;
	cb->state_change = sk->sk_state_change;
	__rcu_assign_sk_user_data_with_flags(sk, cb, SK_USER_DATA_NOCOPY);
	return 0;
}

/*
 * TCP keepalive on every connection: an idle one whose peer vanished
 * without a FIN or RST (power loss, a reboot) ends within about a minute
 * (30 s idle, then 4 probes 5 s apart), instead of holding its room, or
 * an RDM peer's address, for good.
 */
#define KFI_SOCKETS_KEEPIDLE_S 30
#define KFI_SOCKETS_KEEPINTVL_S 5
#define KFI_SOCKETS_KEEPCNT 4

/*
 * Installs the callbacks on a connected socket; -EBUSY if taken. Frames are
 * whole messages the peer waits for: Nagle would hold a small one back for
 * the ACK of the last, so the connection sends without delay (as nvme-tcp
 * and siw do). Process context.
 */
int kfi_sockets_hook(struct socket *sock, void *owner)
{
	struct sock *sk = sock->sk;
	struct kfi_sockets_cb *cb = kfi_sockets_cb_new(owner, kfi_sockets_rx_ready);
	int ret;

	if (!cb)
		return -ENOMEM;
	tcp_sock_set_nodelay(sk);
	sock_set_keepalive(sk);
	tcp_sock_set_keepidle(sk, KFI_SOCKETS_KEEPIDLE_S);
	tcp_sock_set_keepintvl(sk, KFI_SOCKETS_KEEPINTVL_S);
	tcp_sock_set_keepcnt(sk, KFI_SOCKETS_KEEPCNT);
	/*
	 * Inline senders are any thread that posts (progress.rs): the page
	 * fragment of the current task may be in use by a send of its own
	 * further up its stack (a file system writing back over a socket).
	 */
	sk->sk_use_task_frag = false;
	/*
	 * The socket's own allocations start no I/O: a storage ULP's
	 * writeback may wait for this connection (wq.rs, NoIo).
	 */
	sk->sk_allocation = GFP_NOIO;
	/*
	 * A peer's urgent byte stays in the stream (a read takes it as any
	 * byte, never skips it); the data callback, and the receive work
	 * between frames, end the connection on it (kfi_sockets_urg_pending(),
	 * kfi_sockets_urg_hint()).
	 */
	lock_sock(sk);
	sock_set_flag(sk, SOCK_URGINLINE);
	release_sock(sk);
	ret = kfi_sockets_cb_install(sk, cb);
	if (ret) {
		kfree(cb);
		return ret;
	}
	sk->sk_data_ready = kfi_sockets_data_ready;
	sk->sk_write_space = kfi_sockets_write_space;
	sk->sk_state_change = kfi_sockets_state_change;
	write_unlock_bh(&sk->sk_callback_lock);
	return 0;
}

/*
 * Installs the data callback on a listening socket: each connection ready
 * to be accepted queues the accept work (accept.rs); -EBUSY if taken.
 * Process context.
 */
int kfi_sockets_hook_listener(struct socket *sock, void *owner)
{
	struct sock *sk = sock->sk;
	struct kfi_sockets_cb *cb = kfi_sockets_cb_new(owner, kfi_sockets_accept_ready);
	int ret;

	if (!cb)
		return -ENOMEM;
	ret = kfi_sockets_cb_install(sk, cb);
	if (ret) {
		kfree(cb);
		return ret;
	}
	sk->sk_data_ready = kfi_sockets_listen_ready;
	write_unlock_bh(&sk->sk_callback_lock);
	return 0;
}

/*
 * Gives sock, just accepted from the hooked listener, the data callback
 * the listener had before its hook (sock inherited the hook's); nothing if
 * the listener is no longer hooked (then sock was cloned before the hook,
 * or the hook's callback was never copied). Process context.
 */
void kfi_sockets_accepted(struct socket *listener, struct socket *sock)
{
	struct sock *lsk = listener->sk, *sk = sock->sk;
	void (*orig)(struct sock *sk) = NULL;
	struct kfi_sockets_cb *cb;

	read_lock_bh(&lsk->sk_callback_lock);
	cb = kfi_sockets_cb_of(lsk);
	if (cb)
		orig = cb->data_ready;
	read_unlock_bh(&lsk->sk_callback_lock);
	write_lock_bh(&sk->sk_callback_lock);
	if (orig && sk->sk_data_ready == kfi_sockets_listen_ready)
		sk->sk_data_ready = orig;
	write_unlock_bh(&sk->sk_callback_lock);
}

/*
 * Restores the original callbacks; returns the owner given to
 * kfi_sockets_hook() (no callback runs with it any more), or NULL.
 */
void *kfi_sockets_unhook(struct socket *sock)
{
	struct sock *sk = sock->sk;
	struct kfi_sockets_cb *cb;
	void *owner = NULL;

	write_lock_bh(&sk->sk_callback_lock);
	cb = kfi_sockets_cb_of(sk);
	if (cb) {
		sk->sk_data_ready = cb->data_ready;
		sk->sk_write_space = cb->write_space;
		sk->sk_state_change = cb->state_change;
		sk->sk_user_data = NULL;
	}
	write_unlock_bh(&sk->sk_callback_lock);
	if (cb) {
		/* No callback or timer runs with the owner once this returns. */
		timer_shutdown_sync(&cb->timer);
		owner = cb->owner;
		kfree(cb);
	}
	return owner;
}

/* kfi_sockets_arm_timer() with sk_callback_lock held. */
static void kfi_sockets_arm_timer_locked(struct sock *sk, unsigned int ms)
{
	struct kfi_sockets_cb *cb = kfi_sockets_cb_of(sk);

	if (cb)
		timer_reduce(&cb->timer, jiffies + msecs_to_jiffies(ms) + 1);
}

/*
 * Queues the receive work of a hooked socket (the accept work of a hooked
 * listener) within ms milliseconds, or
 * earlier if it was due earlier already (timer_reduce: the earliest
 * deadline wins). Nothing once unhooked. Any context but hard interrupt.
 */
void kfi_sockets_arm_timer(struct socket *sock, unsigned int ms)
{
	struct sock *sk = sock->sk;

	read_lock_bh(&sk->sk_callback_lock);
	kfi_sockets_arm_timer_locked(sk, ms);
	read_unlock_bh(&sk->sk_callback_lock);
}

/*
 * The data callback holds sk_callback_lock for reading: taking it again
 * could wait behind a writer (kfi_sockets_unhook()) that waits for us.
 */
void kfi_sockets_arm_timer_in_callback(struct sock *sk, unsigned int ms)
{
	lockdep_assert_held_read(&sk->sk_callback_lock);
	kfi_sockets_arm_timer_locked(sk, ms);
}

/*
 * Stack an inline send needs left: the socket layer's send path (TCP, IP,
 * the device's transmit) runs on the caller's stack; a loopback peer's
 * receive runs later, on the softirq stack. What arrived for this socket
 * while the send held it is received in release_sock(), on the caller's
 * stack too: TCP's receive and the data callback (rx/soft.rs keeps its
 * frames to about 2 KiB) come on top of the send path's.
 */
#define KFI_SOCKETS_INLINE_STACK (THREAD_SIZE / 2)

/*
 * A connection's sends copy into the socket's own page fragment
 * (sk_use_task_frag is off), which TCP keeps until the socket is freed:
 * an idle connection gives it back; the next send takes a fresh one. The
 * socket's lock keeps a send from using it meanwhile; the skbs that hold
 * parts of it have references of their own.
 */
void kfi_sockets_release_frag(struct socket *sock)
{
	struct sock *sk = sock->sk;

	lock_sock(sk);
	if (sk->sk_frag.page) {
		put_page(sk->sk_frag.page);
		sk->sk_frag.page = NULL;
		sk->sk_frag.offset = 0;
	}
	release_sock(sk);
}

/*
 * Whether the calling thread may send or receive on a socket now
 * (progress.rs): in task context, preemptible (no spinlock held,
 * interrupts on), outside an RCU read-side section and outside a section
 * with bottom halves off, with half of its stack left. The last is for
 * PREEMPT_RT, where such a section (a socket callback called from
 * release_sock(), under read_lock_bh(sk_callback_lock)) stays preemptible:
 * a CQ handler called there that posts must not lock another socket while
 * this thread owns one. A kernel without a preemption count cannot tell
 * whether a spinlock is held: never then.
 */
bool kfi_sockets_may_send_inline(void)
{
#ifdef CONFIG_PREEMPT_COUNT
	unsigned long left;

	if (!in_task() || !preemptible() || rcu_preempt_depth() || softirq_count())
		return false;
	left = (unsigned long)&left - (unsigned long)task_stack_page(current);
	return left >= KFI_SOCKETS_INLINE_STACK;
#else
	return false;
#endif
}

u64 kfi_sockets_host_key(const u8 *ip, u32 scope)
{
	static siphash_aligned_key_t key;
	u64 words[3] = { 0 };

	net_get_random_once(&key, sizeof(key));
	memcpy(words, ip, 16);
	words[2] = scope;
	return siphash(words, sizeof(words), &key);
}
