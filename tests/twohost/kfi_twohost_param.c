// SPDX-License-Identifier: GPL-2.0
/*
 * Parameters of kfi_twohost: which side of the two-host suite this kernel
 * runs, the provider, the server's numeric address and the ports, and how
 * long either side waits for the other guest to come up.
 */
#include <linux/module.h>
#include <linux/moduleparam.h>

static char role[16] = "";
module_param_string(role, role, sizeof(role), 0444);
MODULE_PARM_DESC(role, "side this kernel runs: server or client (required)");

static char provider[32] = "sockets";
module_param_string(provider, provider, sizeof(provider), 0444);
MODULE_PARM_DESC(provider, "provider the suite runs over (default sockets)");

static char server_node[64] = "10.98.0.1";
module_param_string(server_node, server_node, sizeof(server_node), 0444);
MODULE_PARM_DESC(server_node, "numeric address the server listens on");

static int port_base = 7600;
module_param(port_base, int, 0444);
MODULE_PARM_DESC(port_base, "first of the ports the cases listen on");

static int wait_s = 150;
module_param(wait_s, int, 0444);
MODULE_PARM_DESC(wait_s, "seconds a side waits for its peer to connect");

const char *kfi_twohost_role(void);
const char *kfi_twohost_provider(void);
const char *kfi_twohost_server_node(void);
int kfi_twohost_port_base(void);
int kfi_twohost_wait_s(void);

const char *kfi_twohost_role(void)
{
	return role;
}

const char *kfi_twohost_provider(void)
{
	return provider;
}

const char *kfi_twohost_server_node(void)
{
	return server_node;
}

int kfi_twohost_port_base(void)
{
	return port_base;
}

int kfi_twohost_wait_s(void)
{
	return wait_s;
}
