// SPDX-License-Identifier: GPL-2.0
/*
 * The exports of the test-only paths of frame.rs, flush.rs, data/rx.rs and
 * kfi_ibverbs_main.rs
 * (defined in Rust):
 * kfi_test_ibverbs plays a hostile peer with them. Each returns -EPERM and
 * does nothing unless the module was loaded with test_hooks=1. Apart from the shim so
 * that other modules can build the shim in (the bench's raw verbs
 * baseline) without exporting it a second time.
 */
#include <linux/export.h>
#include <linux/types.h>

int kfi_ibverbs_test_tamper(u32 set, u32 clear, u32 magic, u32 frames);
EXPORT_SYMBOL_GPL(kfi_ibverbs_test_tamper);

/* frame.rs: the next data frame a send with invalidate naming key (arm). */
int kfi_ibverbs_test_send_invalidate(u32 key, u32 arm);
EXPORT_SYMBOL_GPL(kfi_ibverbs_test_send_invalidate);

/* flush.rs: the key of the next flush-region trailer, some bits flipped. */
int kfi_ibverbs_test_flush_key(u32 xor);
EXPORT_SYMBOL_GPL(kfi_ibverbs_test_flush_key);

/* data/rx.rs: the next receive slots not reposted, their credits returned. */
int kfi_ibverbs_test_skip_reposts(u32 n);
EXPORT_SYMBOL_GPL(kfi_ibverbs_test_skip_reposts);

/* kfi_ibverbs_main.rs: the connect timeout of connections that start next. */
int kfi_ibverbs_test_connect_timeout(u32 ms);
EXPORT_SYMBOL_GPL(kfi_ibverbs_test_connect_timeout);
