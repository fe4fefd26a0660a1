// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel addresses of bio_vec and scatterlist buffers for kfi_sockets.
 * page_address() and the scatterlist walk are inline C the Rust bindings
 * do not reach; these two calls are all the Rust side needs (ep.rs).
 * Lowmem pages only: kfi_sockets builds on 64-bit, which has no highmem.
 */
#include <linux/bvec.h>
#include <linux/mm.h>
#include <linux/scatterlist.h>

void *kfi_sockets_bvec_addr(const struct bio_vec *bv);
struct scatterlist *kfi_sockets_sg_buf(struct scatterlist *sg, void **addr,
				       unsigned int *len);

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
