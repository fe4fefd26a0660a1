// SPDX-License-Identifier: GPL-2.0
/*
 * Socket options of the benchmark's raw baseline (raw.rs) that the Rust
 * bindings do not reach (net/tcp.h, net/sock.h helpers).
 */
#include <net/sock.h>
#include <linux/tcp.h>

void kfi_bench_tune(struct socket *sock, int timeout_s);

/*
 * TCP_NODELAY, so that a small message leaves at once (as a latency
 * benchmark's sockets are set up), and a bound on every blocking send and
 * receive, so that a side whose peer died returns instead of waiting
 * forever.
 */
void kfi_bench_tune(struct socket *sock, int timeout_s)
{
	struct sock *sk = sock->sk;

	tcp_sock_set_nodelay(sk);
	sock_set_sndtimeo(sk, timeout_s);
	WRITE_ONCE(sk->sk_rcvtimeo, (long)timeout_s * HZ);
}
