// SPDX-License-Identifier: GPL-2.0
/*
 * Parameters of kfi_test_e2e: the provider the suite runs over and the
 * numeric addresses its two sides use. The defaults are loopback over
 * kfi_sockets; the veth topology passes the addresses of a veth pair and
 * the pid of a task in the server's network namespace.
 */
#include <kunit/test.h>
#include <kunit/test-bug.h>
#include <linux/err.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <net/net_namespace.h>

static char provider[32] = "sockets";
module_param_string(provider, provider, sizeof(provider), 0444);
MODULE_PARM_DESC(provider, "provider the suite runs over (default sockets)");

static char server_node[64] = "127.0.0.1";
module_param_string(server_node, server_node, sizeof(server_node), 0444);
MODULE_PARM_DESC(server_node, "numeric address the server side listens on");

static char client_node[64] = "127.0.0.1";
module_param_string(client_node, client_node, sizeof(client_node), 0444);
MODULE_PARM_DESC(client_node,
		 "numeric address the client side listens on (RDM endpoints)");

static int server_netns_pid;
module_param(server_netns_pid, int, 0444);
MODULE_PARM_DESC(server_netns_pid,
		 "a task in the server side's network namespace (0: initial)");

static int port_base = 7500;
module_param(port_base, int, 0444);
MODULE_PARM_DESC(port_base, "first of the ports the cases listen on");

/* The server side's namespace, held from module init to exit. */
static struct net *server_net;

const char *kfi_test_e2e_provider(void);
const char *kfi_test_e2e_server_node(void);
const char *kfi_test_e2e_client_node(void);
int kfi_test_e2e_port_base(void);
int kfi_test_e2e_netns_get(void);
struct net *kfi_test_e2e_server_net(void);
void kfi_test_e2e_netns_put(void);
void kfi_test_e2e_skip(const char *reason);

const char *kfi_test_e2e_provider(void)
{
	return provider;
}

const char *kfi_test_e2e_server_node(void)
{
	return server_node;
}

const char *kfi_test_e2e_client_node(void)
{
	return client_node;
}

/* Takes a reference on the namespace of server_netns_pid, if one is set. */
int kfi_test_e2e_netns_get(void)
{
	struct net *net;

	if (!server_netns_pid)
		return 0;
	net = get_net_ns_by_pid(server_netns_pid);
	if (IS_ERR(net))
		return PTR_ERR(net);
	server_net = net;
	return 0;
}

/* The server side's namespace; NULL for the initial one. */
struct net *kfi_test_e2e_server_net(void)
{
	return server_net;
}

void kfi_test_e2e_netns_put(void)
{
	if (server_net)
		put_net(server_net);
	server_net = NULL;
}

int kfi_test_e2e_port_base(void)
{
	return port_base;
}

/*
 * Marks the running case skipped with REASON (what the provider under test
 * does not offer). The Rust KUnit macros have no skip of their own.
 */
void kfi_test_e2e_skip(const char *reason)
{
	struct kunit *test = kunit_get_current_test();

	if (test)
		kunit_mark_skipped(test, "%s", reason);
}
