// SPDX-License-Identifier: GPL-2.0
/*
 * The string parameter of kfi_bench (Rust module parameters are numbers):
 * the numeric address of a soft RDMA device. Empty (the default), the
 * bench measures kfi_sockets against kernel TCP over loopback; set, it
 * measures kfi_ibverbs against raw ib_core verbs over the device that has
 * the address (tests/guest/bench.sh runs it once on siw, once on rxe).
 */
#include <linux/module.h>
#include <linux/moduleparam.h>

static char ib_node[64];
module_param_string(ib_node, ib_node, sizeof(ib_node), 0444);
MODULE_PARM_DESC(ib_node, "address of an RDMA device: bench kfi_ibverbs on it (default: kfi_sockets)");

const char *kfi_bench_ib_node(void);
const char *kfi_bench_ib_node(void)
{
	return ib_node;
}
