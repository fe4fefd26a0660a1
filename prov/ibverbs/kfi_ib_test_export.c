// SPDX-License-Identifier: GPL-2.0
/*
 * The exports of frame.rs' and flush.rs' test-only paths (defined in Rust):
 * kfi_test_ibverbs plays a hostile peer with it. Apart from the shim so
 * that other modules can build the shim in (the bench's raw verbs
 * baseline) without exporting it a second time.
 */
#include <linux/export.h>
#include <linux/types.h>

void kfi_ibverbs_test_tamper(u32 set, u32 clear, u32 magic, u32 frames);
EXPORT_SYMBOL_GPL(kfi_ibverbs_test_tamper);

/* flush.rs: the key of the next flush-region trailer, some bits flipped. */
void kfi_ibverbs_test_flush_key(u32 xor);
EXPORT_SYMBOL_GPL(kfi_ibverbs_test_flush_key);
