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

/* A read-only string parameter @name of @size bytes, and kfi_bench_@name()
 * that returns it to the Rust side. */
#define KFI_BENCH_STRING(name, size, desc)				\
	static char name[size];						\
	const char *kfi_bench_##name(void);				\
	const char *kfi_bench_##name(void)				\
	{								\
		return name;						\
	}								\
	module_param_string(name, name, sizeof(name), 0444);		\
	MODULE_PARM_DESC(name, desc)

KFI_BENCH_STRING(ib_node, 64,
		 "address of an RDMA device: bench kfi_ibverbs on it (default: kfi_sockets)");
KFI_BENCH_STRING(rows, 256, "rows to run, comma-separated names (default: all)");
