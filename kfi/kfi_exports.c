// SPDX-License-Identifier: GPL-2.0
/*
 * The kfi_* symbols kfabric.ko exports. They are defined in Rust
 * (#[no_mangle] extern "C" functions of the kfi_core crate); exporting them
 * from C keeps the exported set in one reviewable place and lets the
 * compiler check the definitions' names against include/kfabric/.
 */
#include <linux/export.h>
#include <kfabric/kfabric.h>
#include <kfabric/kfi_provider.h>

/* Providers. */
EXPORT_SYMBOL_GPL(kfi_provider_register);
EXPORT_SYMBOL_GPL(kfi_provider_deregister);

/* Discovery and objects. */
EXPORT_SYMBOL_GPL(kfi_getinfo);
EXPORT_SYMBOL_GPL(kfi_allocinfo);
EXPORT_SYMBOL_GPL(kfi_dupinfo);
EXPORT_SYMBOL_GPL(kfi_freeinfo);
EXPORT_SYMBOL_GPL(kfi_info_set);
EXPORT_SYMBOL_GPL(kfi_fabric);
EXPORT_SYMBOL_GPL(kfi_domain);
EXPORT_SYMBOL_GPL(kfi_passive_ep);
EXPORT_SYMBOL_GPL(kfi_endpoint);
EXPORT_SYMBOL_GPL(kfi_eq_open);
EXPORT_SYMBOL_GPL(kfi_cq_open);
EXPORT_SYMBOL_GPL(kfi_cntr_open);
EXPORT_SYMBOL_GPL(kfi_av_open);
EXPORT_SYMBOL_GPL(kfi_mr_reg);
EXPORT_SYMBOL_GPL(kfi_mr_regv);
EXPORT_SYMBOL_GPL(kfi_mr_regbv);
EXPORT_SYMBOL_GPL(kfi_mr_regsgl);
EXPORT_SYMBOL_GPL(kfi_mr_regattr);
EXPORT_SYMBOL_GPL(kfi_mr_alloc);
EXPORT_SYMBOL_GPL(kfi_mr_map);
EXPORT_SYMBOL_GPL(kfi_mr_mapv);
EXPORT_SYMBOL_GPL(kfi_mr_mapbv);
EXPORT_SYMBOL_GPL(kfi_mr_mapsgl);
EXPORT_SYMBOL_GPL(kfi_mr_unmap);
EXPORT_SYMBOL_GPL(kfi_close);
EXPORT_SYMBOL_GPL(kfi_control);
EXPORT_SYMBOL_GPL(kfi_strerror);

/* Endpoints and connection management. */
EXPORT_SYMBOL_GPL(kfi_bind);
EXPORT_SYMBOL_GPL(kfi_ep_bind);
EXPORT_SYMBOL_GPL(kfi_pep_bind);
EXPORT_SYMBOL_GPL(kfi_enable);
EXPORT_SYMBOL_GPL(kfi_cancel);
EXPORT_SYMBOL_GPL(kfi_getopt);
EXPORT_SYMBOL_GPL(kfi_setopt);
EXPORT_SYMBOL_GPL(kfi_getname);
EXPORT_SYMBOL_GPL(kfi_getpeer);
EXPORT_SYMBOL_GPL(kfi_listen);
EXPORT_SYMBOL_GPL(kfi_connect);
EXPORT_SYMBOL_GPL(kfi_accept);
EXPORT_SYMBOL_GPL(kfi_reject);
EXPORT_SYMBOL_GPL(kfi_shutdown);
EXPORT_SYMBOL_GPL(kfi_av_insert);
EXPORT_SYMBOL_GPL(kfi_av_insertsvc);
EXPORT_SYMBOL_GPL(kfi_av_remove);
EXPORT_SYMBOL_GPL(kfi_av_lookup);

/* Data transfer. */
EXPORT_SYMBOL_GPL(kfi_sendmsg);
EXPORT_SYMBOL_GPL(kfi_recvmsg);
EXPORT_SYMBOL_GPL(kfi_readmsg);
EXPORT_SYMBOL_GPL(kfi_writemsg);
EXPORT_SYMBOL_GPL(kfi_tsendmsg);
EXPORT_SYMBOL_GPL(kfi_trecvmsg);
EXPORT_SYMBOL_GPL(kfi_atomicmsg);
EXPORT_SYMBOL_GPL(kfi_fetch_atomicmsg);
EXPORT_SYMBOL_GPL(kfi_compare_atomicmsg);
EXPORT_SYMBOL_GPL(kfi_atomicvalid);
EXPORT_SYMBOL_GPL(kfi_fetch_atomicvalid);
EXPORT_SYMBOL_GPL(kfi_compare_atomicvalid);

/* Completion queues, event queues, counters. */
EXPORT_SYMBOL_GPL(kfi_cq_read);
EXPORT_SYMBOL_GPL(kfi_cq_readerr);
EXPORT_SYMBOL_GPL(kfi_cq_sread);
EXPORT_SYMBOL_GPL(kfi_cq_signal);
EXPORT_SYMBOL_GPL(kfi_eq_read);
EXPORT_SYMBOL_GPL(kfi_eq_readerr);
EXPORT_SYMBOL_GPL(kfi_eq_write);
EXPORT_SYMBOL_GPL(kfi_eq_sread);
EXPORT_SYMBOL_GPL(kfi_cntr_read);
EXPORT_SYMBOL_GPL(kfi_cntr_readerr);
EXPORT_SYMBOL_GPL(kfi_cntr_add);
EXPORT_SYMBOL_GPL(kfi_cntr_set);
EXPORT_SYMBOL_GPL(kfi_cntr_adderr);
EXPORT_SYMBOL_GPL(kfi_cntr_seterr);
EXPORT_SYMBOL_GPL(kfi_cntr_wait);

/* Util queues for providers. */
EXPORT_SYMBOL_GPL(kfi_util_cq_open);
EXPORT_SYMBOL_GPL(kfi_util_cq_write);
EXPORT_SYMBOL_GPL(kfi_util_cq_write_err);
EXPORT_SYMBOL_GPL(kfi_util_cq_expect);
EXPORT_SYMBOL_GPL(kfi_util_cq_hold);
EXPORT_SYMBOL_GPL(kfi_util_cq_release);
EXPORT_SYMBOL_GPL(kfi_util_eq_open);
EXPORT_SYMBOL_GPL(kfi_util_eq_write_err);
EXPORT_SYMBOL_GPL(kfi_util_eq_write_cm);
EXPORT_SYMBOL_GPL(kfi_util_cntr_open);
EXPORT_SYMBOL_GPL(kfi_util_av_open);
