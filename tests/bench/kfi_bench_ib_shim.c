// SPDX-License-Identifier: GPL-2.0
/*
 * kfi_ibverbs' C shim over ib_core and rdma_cm, built into the bench for
 * its raw verbs baseline (raw_ib.rs), which drives ib_core through the
 * provider's own safe wrappers (prov/ibverbs/ib/, included by path).
 * Shared by inclusion, not copied; its functions are not exported, so
 * they do not clash with kfi_ibverbs.ko's.
 */
#include "../../prov/ibverbs/kfi_ib_shim.c"
