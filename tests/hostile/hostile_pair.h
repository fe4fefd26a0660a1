/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kfi_test_hostile.ko's connected pair: two kfi_sockets endpoints over
 * loopback that each case opens, abuses and then checks still carry a
 * message (hostile_pair.c).
 */
#ifndef KFI_TEST_HOSTILE_PAIR_H
#define KFI_TEST_HOSTILE_PAIR_H

#include <kunit/test.h>
#include <kfabric/kfabric.h>

#define PORT "7520"
#define WAIT_MS 20000

/* A connected pair of kfi_sockets endpoints over loopback. */
struct pair {
	struct kfi_info *src, *dst;
	struct kfid_fabric *fabric;
	struct kfid_domain *domain;
	struct kfid_eq *eq;
	struct kfid_cq *ccq, *scq;
	struct kfid_pep *pep;
	struct kfid_ep *cep, *sep;
};

int pair_open(struct kunit *test, struct pair *p);
void pair_close(struct kunit *test, struct pair *p);
void pair_still_works(struct kunit *test, struct pair *p);

#endif /* KFI_TEST_HOSTILE_PAIR_H */
