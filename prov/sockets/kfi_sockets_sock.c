// SPDX-License-Identifier: GPL-2.0
/*
 * Socket options for kfi_sockets that the Rust bindings do not reach
 * (net/sock.h helpers): SO_REUSEADDR for listeners (pep.rs), the
 * callbacks that drive a connection's progress (progress.rs) and the
 * provider's workqueue (wq.rs; alloc_workqueue is a macro).
 */
#include <linux/jiffies.h>
#include <linux/slab.h>
#include <linux/tcp.h>
#include <linux/timer.h>
#include <linux/workqueue.h>
#include <net/sock.h>

void kfi_sockets_reuseaddr(struct socket *sock);

/*
 * A listener may bind its port again while connections of an earlier
 * listener on it linger in TIME_WAIT, as servers do.
 */
void kfi_sockets_reuseaddr(struct socket *sock)
{
	sock_set_reuseaddr(sock->sk);
}

/*
 * Socket callbacks (progress.rs): the original callback runs first (it
 * wakes a worker sleeping in the socket), then the connection's rx or tx
 * work is queued. sk_user_data holds the saved callbacks and the owner, a
 * reference on the connection that lives until kfi_sockets_unhook().
 */
struct kfi_sockets_cb {
	void (*data_ready)(struct sock *sk);
	void (*write_space)(struct sock *sk);
	void (*state_change)(struct sock *sk);
	/* The response deadline (kfi_sockets_arm_timer()); queues rx work. */
	struct timer_list timer;
	void *owner;
};

void kfi_sockets_rx_ready(void *owner);
void kfi_sockets_tx_ready(void *owner);
int kfi_sockets_hook(struct socket *sock, void *owner);
void *kfi_sockets_unhook(struct socket *sock);
void kfi_sockets_arm_timer(struct socket *sock, unsigned int ms);

static void kfi_sockets_data_ready(struct sock *sk)
{
	struct kfi_sockets_cb *cb;

	read_lock_bh(&sk->sk_callback_lock);
	cb = sk->sk_user_data;
	if (cb) {
		cb->data_ready(sk);
		kfi_sockets_rx_ready(cb->owner);
	}
	read_unlock_bh(&sk->sk_callback_lock);
}

static void kfi_sockets_write_space(struct sock *sk)
{
	struct kfi_sockets_cb *cb;

	read_lock_bh(&sk->sk_callback_lock);
	cb = sk->sk_user_data;
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
	cb = sk->sk_user_data;
	if (cb) {
		cb->state_change(sk);
		/* A peer that closed is seen by the receiver. */
		kfi_sockets_rx_ready(cb->owner);
	}
	read_unlock_bh(&sk->sk_callback_lock);
}

/*
 * The response deadline passed (softirq): the receive work looks at the
 * operations that wait for a response (rx/resp.rs, response_timeout_ms).
 */
static void kfi_sockets_timer_fn(struct timer_list *t)
{
	struct kfi_sockets_cb *cb = timer_container_of(cb, t, timer);

	kfi_sockets_rx_ready(cb->owner);
}

/*
 * Installs the callbacks on a connected socket; -EBUSY if taken. Frames are
 * whole messages the peer waits for: Nagle would hold a small one back for
 * the ACK of the last, so the connection sends without delay (as nvme-tcp
 * and siw do). Process context.
 */
int kfi_sockets_hook(struct socket *sock, void *owner)
{
	struct sock *sk = sock->sk;
	struct kfi_sockets_cb *cb = kmalloc(sizeof(*cb), GFP_KERNEL);

	if (!cb)
		return -ENOMEM;
	tcp_sock_set_nodelay(sk);
	cb->owner = owner;
	timer_setup(&cb->timer, kfi_sockets_timer_fn, 0);
	write_lock_bh(&sk->sk_callback_lock);
	if (sk->sk_user_data) {
		write_unlock_bh(&sk->sk_callback_lock);
		kfree(cb);
		return -EBUSY;
	}
	cb->data_ready = sk->sk_data_ready;
	cb->write_space = sk->sk_write_space;
	cb->state_change = sk->sk_state_change;
	sk->sk_user_data = cb;
	sk->sk_data_ready = kfi_sockets_data_ready;
	sk->sk_write_space = kfi_sockets_write_space;
	sk->sk_state_change = kfi_sockets_state_change;
	write_unlock_bh(&sk->sk_callback_lock);
	return 0;
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
	cb = sk->sk_user_data;
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

/*
 * Queues the receive work of a hooked socket within ms milliseconds, or
 * earlier if it was due earlier already (timer_reduce: the earliest
 * deadline wins). Nothing once unhooked. Any context but hard interrupt.
 */
void kfi_sockets_arm_timer(struct socket *sock, unsigned int ms)
{
	struct sock *sk = sock->sk;
	struct kfi_sockets_cb *cb;

	read_lock_bh(&sk->sk_callback_lock);
	cb = sk->sk_user_data;
	if (cb)
		timer_reduce(&cb->timer, jiffies + msecs_to_jiffies(ms) + 1);
	read_unlock_bh(&sk->sk_callback_lock);
}

struct workqueue_struct *kfi_sockets_alloc_wq(int unbound);

/*
 * The provider's own workqueue for its connections' work (progress.rs):
 * high priority (a frame waits on it), with a rescuer (storage
 * ULPs run over it under memory pressure), unbound or per-CPU as the
 * module parameter says. Its workers are the provider's own, so peers that
 * hold them cannot starve other users of the system's queues.
 */
struct workqueue_struct *kfi_sockets_alloc_wq(int unbound)
{
	return alloc_workqueue("kfi_sockets",
			       WQ_HIGHPRI | WQ_MEM_RECLAIM | (unbound ? WQ_UNBOUND : 0), 0);
}
