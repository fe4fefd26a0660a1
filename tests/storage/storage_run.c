// SPDX-License-Identifier: GPL-2.0
/*
 * kfi_test_storage.ko: the run's fabric objects, its queues' connections
 * and their teardown. Process context.
 */
#include "storage.h"

struct run *stor_run;

void stor_fail(const char *what, long v)
{
	if (atomic_inc_return(&stor_run->errors) == 1) {
		spin_lock_bh(&stor_run->err_lock);
		snprintf(stor_run->first_error, sizeof(stor_run->first_error), "%s: %ld", what, v);
		spin_unlock_bh(&stor_run->err_lock);
	}
}

static int next_event(struct kfid_eq *eq, struct kfi_eq_cm_entry *e, size_t len)
{
	u32 ev;
	ssize_t n = kfi_eq_sread(eq, &ev, e, len, WAIT_MS, 0);

	return n < 0 ? (int)n : (int)ev;
}

/* Connects queue @q: the initiator end, then the target end accepting. */
static int iq_connect(struct iq *q)
{
	struct kfi_cq_attr cq_attr = { .size = 4 * QD, .format = KFI_CQ_FORMAT_TAGGED };
	struct {
		struct kfi_eq_cm_entry e;
		u8 data[64];
	} ev;
	int ret, i;

	ret = kfi_cq_open(stor_run->domain, &cq_attr, &q->icq, NULL);
	if (!ret)
		ret = kfi_cq_open(stor_run->domain, &cq_attr, &q->tcq, NULL);
	if (!ret)
		ret = kfi_endpoint(stor_run->domain, stor_run->dst, &q->iep, NULL);
	if (!ret)
		ret = kfi_ep_bind(q->iep, &q->icq->fid, KFI_TRANSMIT | KFI_RECV);
	if (!ret)
		ret = kfi_ep_bind(q->iep, &stor_run->eq->fid, 0);
	if (!ret)
		ret = kfi_enable(q->iep);
	if (!ret)
		ret = kfi_connect(q->iep, NULL, NULL, 0);
	if (ret)
		return ret;
	ret = next_event(stor_run->eq, &ev.e, sizeof(ev));
	if (ret != KFI_CONNREQ)
		return ret < 0 ? ret : -EPROTO;
	ret = kfi_endpoint(stor_run->domain, ev.e.info, &q->tep, NULL);
	kfi_freeinfo(ev.e.info);
	if (!ret)
		ret = kfi_ep_bind(q->tep, &q->tcq->fid, KFI_TRANSMIT | KFI_RECV);
	if (!ret)
		ret = kfi_ep_bind(q->tep, &stor_run->eq->fid, 0);
	if (!ret)
		ret = kfi_enable(q->tep);
	for (i = 0; !ret && i < TQ; i++)
		ret = kfi_recv(q->tep, &q->tcmd[i], sizeof(q->tcmd[i]), NULL, 0, &q->tcmd[i]);
	if (!ret)
		ret = kfi_accept(q->tep, NULL, 0);
	if (ret)
		return ret;
	if (next_event(stor_run->eq, &ev.e, sizeof(ev)) != KFI_CONNECTED ||
	    next_event(stor_run->eq, &ev.e, sizeof(ev)) != KFI_CONNECTED)
		return -EPROTO;
	return 0;
}

static int req_init(struct iq *q, struct ireq *r, u16 slot)
{
	unsigned int i;
	int ret;

	r->q = q;
	r->slot = slot;
	r->cmd_ctx = (struct ctx){ .r = r, .kind = CTX_CMD };
	r->resp_ctx = (struct ctx){ .r = r, .kind = CTX_RESP };
	r->npages = slot == 0 ? MAX_SEGS : SMALL_PAGES;
	r->seg_len = slot == 0 ? PAGE_SIZE : SMALL_SEG;
	r->pages = kcalloc(r->npages, sizeof(*r->pages), GFP_KERNEL);
	if (!r->pages)
		return -ENOMEM;
	for (i = 0; i < r->npages; i++) {
		r->pages[i] = alloc_page(GFP_KERNEL);
		if (!r->pages[i])
			return -ENOMEM;
	}
	ret = kfi_mr_alloc(stor_run->domain, MAX_SEGS, KFI_REMOTE_READ | KFI_REMOTE_WRITE, 0,
			   &r->mr, r);
	if (!ret && kfi_mr_key(r->mr) != 0)
		ret = -EPROTO;	/* an unmapped region has no key */
	return ret;
}

static void req_free(struct kunit *test, struct ireq *r)
{
	unsigned int i;

	if (r->mr)
		KUNIT_EXPECT_EQ(test, kfi_close(&r->mr->fid), 0);
	for (i = 0; r->pages && i < r->npages; i++)
		if (r->pages[i])
			__free_page(r->pages[i]);
	kfree(r->pages);
}

int stor_run_open(void)
{
	struct kfi_eq_attr eq_attr = { .size = 4 * NQ };
	struct kfi_info *hints;
	int ret, i, j;

	spin_lock_init(&stor_run->err_lock);
	init_completion(&stor_run->all_done);
	hints = kfi_allocinfo();
	if (!hints)
		return -ENOMEM;
	hints->fabric_attr->prov_name = "sockets";
	hints->caps = KFI_MSG | KFI_RMA | KFI_TAGGED;
	ret = kfi_getinfo(KFI_API_VERSION, "127.0.0.1", PORT, KFI_SOURCE, hints, &stor_run->src);
	if (!ret)
		ret = kfi_getinfo(KFI_API_VERSION, "127.0.0.1", PORT, 0, hints, &stor_run->dst);
	kfi_freeinfo(hints);
	if (!ret)
		ret = kfi_fabric(stor_run->src->fabric_attr, &stor_run->fabric, NULL);
	if (!ret)
		ret = kfi_domain(stor_run->fabric, stor_run->src, &stor_run->domain, NULL);
	if (!ret)
		ret = kfi_eq_open(stor_run->fabric, &eq_attr, &stor_run->eq, NULL);
	if (!ret)
		ret = kfi_passive_ep(stor_run->fabric, stor_run->src, &stor_run->pep, NULL);
	if (!ret)
		ret = kfi_pep_bind(stor_run->pep, &stor_run->eq->fid, 0);
	if (!ret)
		ret = kfi_listen(stor_run->pep);
	for (i = 0; !ret && i < NQ; i++) {
		struct iq *q = &stor_run->q[i];

		q->id = i;
		spin_lock_init(&q->lock);
		INIT_LIST_HEAD(&q->done);
		INIT_LIST_HEAD(&q->retry);
		INIT_WORK(&q->start, stor_iq_start_bh);
		INIT_WORK(&q->bh, stor_iq_bh);
		q->tbuf = vzalloc(BIG_LEN);
		if (!q->tbuf)
			ret = -ENOMEM;
		for (j = 0; !ret && j < QD; j++)
			ret = req_init(q, &q->req[j], j);
		if (!ret)
			ret = iq_connect(q);
	}
	return ret;
}

void stor_threads_stop(struct iq *q)
{
	if (q->ithread)
		kthread_stop(q->ithread);
	if (q->tthread)
		kthread_stop(q->tthread);
	q->ithread = q->tthread = NULL;
	flush_work(&q->start);
	flush_work(&q->bh);
}

void stor_run_close(struct kunit *test)
{
	int i, j;

	for (i = 0; i < NQ; i++) {
		struct iq *q = &stor_run->q[i];

		stor_threads_stop(q);
		if (q->iep)
			KUNIT_EXPECT_EQ(test, kfi_close(&q->iep->fid), 0);
		if (q->tep)
			KUNIT_EXPECT_EQ(test, kfi_close(&q->tep->fid), 0);
		if (q->icq)
			KUNIT_EXPECT_EQ(test, kfi_close(&q->icq->fid), 0);
		if (q->tcq)
			KUNIT_EXPECT_EQ(test, kfi_close(&q->tcq->fid), 0);
		for (j = 0; j < QD; j++)
			req_free(test, &q->req[j]);
		vfree(q->tbuf);
	}
	if (stor_run->pep)
		KUNIT_EXPECT_EQ(test, kfi_close(&stor_run->pep->fid), 0);
	if (stor_run->eq)
		KUNIT_EXPECT_EQ(test, kfi_close(&stor_run->eq->fid), 0);
	if (stor_run->domain)
		KUNIT_EXPECT_EQ(test, kfi_close(&stor_run->domain->fid), 0);
	if (stor_run->fabric)
		KUNIT_EXPECT_EQ(test, kfi_close(&stor_run->fabric->fid), 0);
	kfi_freeinfo(stor_run->src);
	kfi_freeinfo(stor_run->dst);
}
