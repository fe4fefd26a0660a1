/* SPDX-License-Identifier: GPL-2.0 */
/* Every kfabric header: what the Rust declarations are generated from. */
#include <kfabric/kfabric.h>
#include <kfabric/kfi_provider.h>
