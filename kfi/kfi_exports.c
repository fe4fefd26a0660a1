// SPDX-License-Identifier: GPL-2.0
/*
 * The kfi_* symbols kfabric.ko exports. They are defined in Rust
 * (#[no_mangle] extern "C" functions of the kfi_core crate); exporting them
 * from C keeps the exported set in one reviewable place and lets modpost
 * check them against the declarations in include/kfabric/.
 */
#include <linux/export.h>
#include <kfabric/kfabric.h>
#include <kfabric/kfi_provider.h>

EXPORT_SYMBOL_GPL(kfi_provider_register);
EXPORT_SYMBOL_GPL(kfi_provider_deregister);
EXPORT_SYMBOL_GPL(kfi_fabric);
EXPORT_SYMBOL_GPL(kfi_close);
EXPORT_SYMBOL_GPL(kfi_strerror);
