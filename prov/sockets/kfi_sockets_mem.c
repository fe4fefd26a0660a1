// SPDX-License-Identifier: GPL-2.0
/*
 * Memory helpers for kfi_sockets that are inline C the Rust bindings do
 * not reach: kernel addresses of bio_vec and scatterlist buffers (bufs.rs)
 * and the persistence step of commit completion (mr.rs).
 * Lowmem pages only: kfi_sockets builds on 64-bit, which has no highmem.
 */
#include <linux/bvec.h>
#include <linux/libnvdimm.h>
#include <linux/mm.h>
#include <linux/scatterlist.h>

void *kfi_sockets_bvec_addr(const struct bio_vec *bv);
struct scatterlist *kfi_sockets_sg_buf(struct scatterlist *sg, void **addr,
				       unsigned int *len);
void kfi_sockets_persist(void *addr, size_t len);
void kfi_sockets_barrier(void);

/* The kernel address of a bio_vec's bytes. */
void *kfi_sockets_bvec_addr(const struct bio_vec *bv)
{
	return page_address(bv->bv_page) + bv->bv_offset;
}

/* The kernel address and length of @sg's bytes; returns the next entry. */
struct scatterlist *kfi_sockets_sg_buf(struct scatterlist *sg, void **addr,
				       unsigned int *len)
{
	*addr = sg_virt(sg);
	*len = sg->length;
	return sg_next(sg);
}

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
