// SPDX-License-Identifier: GPL-2.0
/*
 * Scatterlist walking for kfabric.ko's checks and for providers: the
 * scatterlist helpers are inline C that Rust cannot call.
 */
#include <linux/export.h>
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
