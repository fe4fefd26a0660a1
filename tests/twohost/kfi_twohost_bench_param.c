// SPDX-License-Identifier: GPL-2.0
/*
 * The C part of kfi_twohost_bench: the parameters the two-host modules
 * share (role, provider, server address, ports, peer wait) and the socket
 * options of the raw baseline, both by source inclusion.
 */
#include "kfi_twohost_param.c"
#include "../bench/kfi_bench_sock.c"
