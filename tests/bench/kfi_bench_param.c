// SPDX-License-Identifier: GPL-2.0
/*
 * The string parameters of kfi_bench (Rust module parameters are numbers).
 * ib_node: the numeric address of a soft RDMA device. Empty (the default),
 * the bench measures kfi_sockets against kernel TCP over loopback; set, it
 * measures kfi_ibverbs against raw ib_core verbs over the device that has
 * the address (tests/guest/bench.sh runs it once on siw, once on rxe).
 * rows: the names of the rows to run, comma-separated (empty: all), for a
 * quicker run of a few rows side by side.
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

static char rows[256];
module_param_string(rows, rows, sizeof(rows), 0444);
MODULE_PARM_DESC(rows, "rows to run, comma-separated names (default: all)");

const char *kfi_bench_rows(void);
const char *kfi_bench_rows(void)
{
	return rows;
}
