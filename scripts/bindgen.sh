#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# bindgen.sh KDIR OUT HEADER [ib|sock]: Rust declarations of kfabric's C ABI,
# or (with 'ib') of kfi_ibverbs' C shim and the ib_core/rdma_cm parts it uses,
# or (with 'sock') of kfi_sockets' C glue.
#
# Uses the C flags the kernel build itself gave bindgen (saved in
# rust/bindings/.bindings_generated.rs.cmd), so the layout matches the
# kernel's. Only items from include/kfabric/ are emitted; the kernel types
# they use (struct module, kvec, ...) come from kernel::bindings, imported by
# the file that includes the output; the integer typedefs (u64, ...) they
# need are generated as aliases of the same primitive types.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kdir=$1 out=$2 header=$3 kind=${4:-kfi}
cmdfile=$kdir/rust/bindings/.bindings_generated.rs.cmd
[ -f "$cmdfile" ] || die "$cmdfile missing: is $kdir a built Rust-enabled kernel?"

# The clang arguments are what follows ' -- ' in the saved command; the
# dependency-file option and the post-processing after ";" are dropped.
clang_args=$(sed -n 's/^savedcmd_[^ ]* := .* -- //p' "$cmdfile" | sed -e 's/;.*$//' -e 's/-Wp,-MMD,[^ ]*//')
[ -n "$clang_args" ] || die "no clang arguments found in $cmdfile"
bindgen=$(sed -n 's/^savedcmd_[^ ]* := \([^ ]*\) .*/\1/p' "$cmdfile")

tmp=$out.tmp
common=(--use-core --ctypes-prefix ffi --with-derive-default --no-layout-tests
	--no-debug '.*' --no-doc-comments --rust-target 1.85
	--default-enum-style consts --no-prepend-enum-name)
cd "$kdir"
if [ "$kind" = ib ]; then
	# The shim's functions, the exported ib_core and rdma_cm calls, and the
	# small structures that cross (work requests, completions, attributes,
	# CM events). The big objects (device, QP, CQ, PD, MR, cm id) stay
	# opaque: the shim's accessors read them. Other kernel types come from
	# kernel::bindings, imported by the including file.
	# shellcheck disable=SC2086
	"$bindgen" "$header" "${common[@]}" --no-recursive-allowlist \
		--allowlist-function 'kfi_ib_.*|kfi_rdma_.*|inet_pton_with_scope|ib_device_put' \
		--allowlist-function 'ib_(un)?register_client|ib_(set|get)_client_data' \
		--allowlist-function 'ib_free_cq|ib_alloc_mr|ib_dereg_mr|ib_map_mr_sg|ib_drain_qp' \
		--allowlist-function 'rdma_(lock_handler|unlock_handler|destroy_id|bind_addr|resolve_addr|resolve_route|listen|connect|connect_locked|accept|reject|disconnect|create_qp|destroy_qp|set_reuseaddr|consumer_reject_data|reject_msg)' \
		--allowlist-type 'ib_device|ib_qp|ib_cq|ib_pd|ib_mr|rdma_cm_id|ib_srq|ib_xrcd|ib_rwq_ind_table|ib_ah|ib_event|ib_client_nl_info|ib_gid|rdma_ud_param' \
		--allowlist-type 'kfi_ib_link|kfi_ib_frmr|ib_client|ib_wc|ib_wc__.*|ib_send_wr|ib_send_wr__.*|ib_recv_wr|ib_recv_wr__.*' \
		--allowlist-type 'ib_rdma_wr|ib_atomic_wr|ib_reg_wr|ib_sge|ib_cqe|ib_qp_init_attr|ib_qp_cap|ib_device_attr|ib_odp_caps|ib_odp_caps__.*|ib_rss_caps|ib_tm_caps|ib_cq_caps' \
		--allowlist-type 'rdma_conn_param|rdma_cm_event|rdma_cm_event__.*|rdma_ud_param|rdma_cm_event_handler|rdma_ucm_ece|ib_gid' \
		--allowlist-type 'ib_wc_status|ib_wc_opcode|ib_wr_opcode|ib_send_flags|ib_qp_type|ib_sig_type|ib_atomic_cap|rdma_cm_event_type' \
		--allowlist-type 'ib_mr_type|ib_access_flags|ib_wc_flags|ib_qp_create_flags|ib_poll_context|ib_event_handler_t|ib_cm_rej_reason' \
		--allowlist-var 'IB_.*|RDMA_CM_.*|KFI_IB_.*' \
		--opaque-type 'kfi_ib_frmr|ib_device|ib_qp|ib_cq|ib_pd|ib_mr|rdma_cm_id|ib_srq|ib_xrcd|ib_rwq_ind_table|ib_ah|ib_event|ib_client_nl_info|ib_gid|rdma_ud_param' \
		--blocklist-type '(ib_device|ib_qp|ib_cq|ib_pd|ib_mr|rdma_cm_id|ib_srq|ib_event)__bindgen_ty_.*' \
		-o "$tmp" -- $clang_args -I"$KFABRIC_TOP/include" -DMODULE '-DKBUILD_MODNAME="kfi_ibverbs"'
	mv "$tmp" "$out"
	exit 0
fi
if [ "$kind" = sock ]; then
	# The glue's functions (those kfi_sockets' C defines and the callbacks
	# its Rust defines) and types, and sock_setsockopt, exported but not in
	# the kernel's bindings. The kernel types they use (socket, sock,
	# sk_buff, workqueue_struct, sockptr_t) come from kernel::bindings,
	# imported by the including file.
	# shellcheck disable=SC2086
	"$bindgen" "$header" "${common[@]}" --no-recursive-allowlist \
		--allowlist-function 'kfi_sockets_.*|sock_setsockopt' \
		--allowlist-type 'kfi_sockets_.*' \
		-o "$tmp" -- $clang_args -DMODULE
	mv "$tmp" "$out"
	exit 0
fi
# shellcheck disable=SC2086
"$bindgen" "$header" "${common[@]}" \
	--allowlist-file '.*/include/kfabric/.*' \
	--blocklist-type 'module|kvec|bio_vec|scatterlist|net|page' \
	-o "$tmp" -- $clang_args -I"$KFABRIC_TOP/include" -DMODULE
# Capability and flag bits are 64-bit in C (1ULL << n); bindgen types a
# macro by its value, so give the ones marked so in the headers u64.
# (~0ULL, "all ones", comes out as the i32 -1.)
for name in $(grep -hE '^#define KFI_[A-Z0-9_]+[[:space:]]+.*(1ULL|~0ULL|/\* u64 \*/)' \
		"$KFABRIC_TOP"/include/kfabric/*.h | awk '{ print $2 }'); do
	sed -i -e "s/^pub const $name: u32 = /pub const $name: u64 = /" \
	       -e "s/^pub const $name: i32 = -1;/pub const $name: u64 = u64::MAX;/" "$tmp"
done
mv "$tmp" "$out"
