// SPDX-License-Identifier: GPL-2.0
/*
 * Socket options for kfi_sockets that the Rust bindings do not reach
 * (net/sock.h helpers): used by the passive endpoint (pep.rs).
 */
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
