# SPDX-License-Identifier: GPL-2.0
#
# kfabric: everything runs through the scripts in scripts/, which set up the
# toolchain and a Rust-enabled kernel on first use (cached, see README.md).
#
#   make run            boot the VM and run the demo
#   make bench          boot the VM and run the benchmark (kfi_sockets against
#                       raw kernel TCP; BENCH_ARGS='reps=3' sets kfi_bench params)
#   make bench HOSTS=2  the same across two guests joined by a virtual NIC
#                       (server in one, client in the other)
#   make check          build, then run every test suite in the VM, on the
#                       normal and the debug kernel
#   make check VARIANTS=normal   only the normal kernel (quicker)
#   make modules        build the modules (CLIPPY=1 runs clippy too)
#   make clippy         build with clippy, warnings are errors, and fail on
#                       kfi/api code that no module uses
#   make rustfmtcheck   check the Rust formatting; 'make rustfmt' fixes it
#   make kernel         only set up the toolchain and build the kernel
#   make rust-analyzer  write rust-project.json for an editor
#   KDIR=/path          use a Rust-enabled kernel build of your own instead

VARIANT ?= $(if $(DEBUG),debug,normal)
VARIANTS ?= $(if $(DEBUG),debug,normal debug)
CLIPPY ?=
export KDIR

.PHONY: all modules clippy kernel check run bench rustfmt rustfmtcheck clean help rust-analyzer

all: modules

help:
	@sed -n '3,21p' Makefile

kernel:
	@scripts/kernel.sh build $(VARIANT) >/dev/null

modules:
	@scripts/modules.sh $(VARIANT) $(if $(CLIPPY),CLIPPY=1) >/dev/null

clippy:
	@scripts/modules.sh $(VARIANT) CLIPPY=1 KRUSTFLAGS=-Dwarnings >/dev/null
	@scripts/api-dead-code.sh $(VARIANT)

check:
	@scripts/check.sh $(VARIANTS)

run:
	@scripts/run-demo.sh $(VARIANT)

bench:
	@KFABRIC_BENCH_ARGS="$(BENCH_ARGS)" KFABRIC_HOSTS="$(HOSTS)" scripts/run-demo.sh $(VARIANT) bench

rust-analyzer:
	@scripts/rust-analyzer.sh

rustfmt:
	@scripts/rustfmt.sh

rustfmtcheck:
	@scripts/rustfmt.sh --check

clean:
	@kdir=$$(cat .kfabric-kdir 2>/dev/null); \
	if [ -n "$$kdir" ] && [ -d "$$kdir" ]; then \
		$(MAKE) -s -C "$$kdir" M=$(CURDIR) clean; fi
	@rm -f .kfabric-kdir kfi/api/bindings_generated.rs kfi/api/bindings_generated.rs.kdir \
		prov/ibverbs/ib_bindings_generated.rs prov/ibverbs/ib_bindings_generated.rs.kdir \
		prov/sockets/sock_bindings_generated.rs prov/sockets/sock_bindings_generated.rs.kdir \
		rust-project.json
