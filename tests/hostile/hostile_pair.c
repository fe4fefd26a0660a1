// SPDX-License-Identifier: GPL-2.0
/*
 * The connected pair of kfi_test_hostile.ko's cases (hostile_pair.h): a
 * kfi_sockets listener, an active endpoint and the accepted one, with
 * their CQs and one EQ, opened through the exported kfi_* API only.
 */
#include <kunit/test.h>
#include <kfabric/kfabric.h>
#include "hostile_pair.h"

/* The next event on @eq: its type, or a negative errno. */
static int next_event(struct kfid_eq *eq, struct kfi_eq_cm_entry *e, size_t len)
{
	u32 ev;
	ssize_t n = kfi_eq_sread(eq, &ev, e, len, WAIT_MS, 0);

	return n < 0 ? (int)n : (int)ev;
}

int pair_open(struct kunit *test, struct pair *p)
{
	struct kfi_cq_attr cq_attr = { .size = 16, .format = KFI_CQ_FORMAT_DATA };
	struct kfi_eq_attr eq_attr = { .size = 8 };
	struct {
		struct kfi_eq_cm_entry e;
		u8 data[64];
	} ev;
	struct kfi_info *hints;
	int ret;

	memset(p, 0, sizeof(*p));
	hints = kfi_allocinfo();
	if (!hints)
		return -ENOMEM;
	hints->fabric_attr->prov_name = "sockets";
	ret = kfi_getinfo(KFI_API_VERSION, "127.0.0.1", PORT, KFI_SOURCE, hints, &p->src);
	if (!ret)
		ret = kfi_getinfo(KFI_API_VERSION, "127.0.0.1", PORT, 0, hints, &p->dst);
	kfi_freeinfo(hints);
	if (!ret)
		ret = kfi_fabric(p->src->fabric_attr, &p->fabric, NULL);
	if (!ret)
		ret = kfi_domain(p->fabric, p->src, &p->domain, NULL);
	if (!ret)
		ret = kfi_eq_open(p->fabric, &eq_attr, &p->eq, NULL);
	if (!ret)
		ret = kfi_cq_open(p->domain, &cq_attr, &p->ccq, NULL);
	if (!ret)
		ret = kfi_cq_open(p->domain, &cq_attr, &p->scq, NULL);
	if (!ret)
		ret = kfi_passive_ep(p->fabric, p->src, &p->pep, NULL);
	if (!ret)
		ret = kfi_pep_bind(p->pep, &p->eq->fid, 0);
	if (!ret)
		ret = kfi_listen(p->pep);
	if (!ret)
		ret = kfi_endpoint(p->domain, p->dst, &p->cep, NULL);
	if (!ret)
		ret = kfi_ep_bind(p->cep, &p->ccq->fid, KFI_TRANSMIT | KFI_RECV);
	if (!ret)
		ret = kfi_ep_bind(p->cep, &p->eq->fid, 0);
	if (!ret)
		ret = kfi_enable(p->cep);
	if (!ret)
		ret = kfi_connect(p->cep, NULL, NULL, 0);
	if (ret)
		return ret;
	ret = next_event(p->eq, &ev.e, sizeof(ev));
	if (ret != KFI_CONNREQ)
		return ret < 0 ? ret : -EPROTO;
	ret = kfi_endpoint(p->domain, ev.e.info, &p->sep, NULL);
	kfi_freeinfo(ev.e.info);
	if (!ret)
		ret = kfi_ep_bind(p->sep, &p->scq->fid, KFI_TRANSMIT | KFI_RECV);
	if (!ret)
		ret = kfi_ep_bind(p->sep, &p->eq->fid, 0);
	if (!ret)
		ret = kfi_enable(p->sep);
	if (!ret)
		ret = kfi_accept(p->sep, NULL, 0);
	if (ret)
		return ret;
	if (next_event(p->eq, &ev.e, sizeof(ev)) != KFI_CONNECTED ||
	    next_event(p->eq, &ev.e, sizeof(ev)) != KFI_CONNECTED)
		return -EPROTO;
	return 0;
}

void pair_close(struct kunit *test, struct pair *p)
{
	struct kfid *objs[] = {
		p->cep ? &p->cep->fid : NULL, p->sep ? &p->sep->fid : NULL,
		p->pep ? &p->pep->fid : NULL, p->ccq ? &p->ccq->fid : NULL,
		p->scq ? &p->scq->fid : NULL, p->eq ? &p->eq->fid : NULL,
		p->domain ? &p->domain->fid : NULL,
		p->fabric ? &p->fabric->fid : NULL,
	};
	int i;

	for (i = 0; i < ARRAY_SIZE(objs); i++)
		if (objs[i])
			KUNIT_EXPECT_EQ(test, kfi_close(objs[i]), 0);
	kfi_freeinfo(p->src);
	kfi_freeinfo(p->dst);
}

/* A message still crosses @p, every byte as sent. */
void pair_still_works(struct kunit *test, struct pair *p)
{
	struct kfi_cq_data_entry ce;
	char out[16] = {};

	KUNIT_EXPECT_EQ(test, kfi_recv(p->sep, out, sizeof(out), NULL, 0, out), 0);
	KUNIT_EXPECT_EQ(test, kfi_send(p->cep, "still alive", 11, NULL, 0, p), 0);
	KUNIT_EXPECT_EQ(test, kfi_cq_sread(p->scq, &ce, 1, NULL, WAIT_MS), 1);
	KUNIT_EXPECT_PTR_EQ(test, ce.op_context, (void *)out);
	KUNIT_EXPECT_EQ(test, ce.len, 11);
	KUNIT_EXPECT_MEMEQ(test, out, "still alive", 11);
	KUNIT_EXPECT_EQ(test, kfi_cq_sread(p->ccq, &ce, 1, NULL, WAIT_MS), 1);
	KUNIT_EXPECT_PTR_EQ(test, ce.op_context, (void *)p);
}
