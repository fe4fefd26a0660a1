// SPDX-License-Identifier: GPL-2.0
/*
 * Memory helpers for kfi_sockets that are inline C the Rust bindings do
 * not reach: the persistence step of commit completion (mr.rs), and the
 * no-I/O allocation scope of the connections' work (wq.rs). Walking
 * the ULP's buffer lists is kfabric.ko's (kfi_sg_entry(),
 * kfi_page_address()).
 */
#include <asm/barrier.h>
#include <linux/libnvdimm.h>
#include <linux/sched/mm.h>

#include "kfi_sockets_glue.h"

/*
 * Writes the CPU cache lines of a persistent-memory range back to the
 * persistence domain (a no-op where the architecture has no pmem API) and
 * orders the write-back before what follows (the acknowledgement).
 */
void kfi_sockets_persist(void *addr, size_t len)
{
	arch_wb_cache_pmem(addr, len);
	wmb();
}

/* Commit of plain RAM: all placed data is visible before the ack is sent. */
void kfi_sockets_barrier(void)
{
	mb();
}

unsigned int kfi_sockets_noio_begin(void)
{
	return memalloc_noio_save();
}

void kfi_sockets_noio_end(unsigned int flags)
{
	memalloc_noio_restore(flags);
}
