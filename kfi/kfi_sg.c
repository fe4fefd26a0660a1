// SPDX-License-Identifier: GPL-2.0
/*
 * Buffer-list walking for kfabric.ko's checks and for providers (the
 * toolkit's segment iterator, kfi/api/toolkit/segments.rs): the
 * scatterlist and page-address helpers are inline C that Rust cannot call.
 */
#include <linux/export.h>
#include <linux/mm.h>
#include <linux/scatterlist.h>
#include <kfabric/kfi_provider.h>

struct scatterlist *kfi_sg_entry(struct scatterlist *sg, struct page **page,
				 unsigned int *offset, unsigned int *len)
{
	*page = sg_page(sg);
	*offset = sg->offset;
	*len = sg->length;
	return sg_next(sg);
}
EXPORT_SYMBOL_GPL(kfi_sg_entry);

void *kfi_page_address(struct page *page)
{
	return page_address(page);
}
EXPORT_SYMBOL_GPL(kfi_page_address);
