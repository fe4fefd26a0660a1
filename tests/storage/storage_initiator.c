// SPDX-License-Identifier: GPL-2.0
/*
 * kfi_test_storage.ko: the initiator. Each request maps its bio_vec
 * segments into a per-I/O region, sends a command and waits for a tagged
 * response, all in softirq (BH work items); a thread per queue reads
 * completions and hands finished requests back.
 */
#include "storage.h"

/* The byte at @off of the data of the request with @seed. */
u8 stor_pat(u64 seed, u32 off)
{
	return (u8)(seed * 131 + off * 7 + (off >> 8) * 13 + (off >> 16));
}

void *stor_seg_addr(const struct bio_vec *bv)
{
	return page_address(bv->bv_page) + bv->bv_offset;
}

/* Lays out the request's segments: segment j in page j % npages, so that
 * neighbours in the list are not neighbours in memory. */
void stor_layout(struct ireq *r)
{
	unsigned int j;

	for (j = 0; j < r->nsegs; j++) {
		r->bvec[j].bv_page = r->pages[j % r->npages];
		r->bvec[j].bv_offset = (j / r->npages) * r->seg_len;
		r->bvec[j].bv_len = r->seg_len;
	}
	r->len = r->nsegs * r->seg_len;
}

static void fill(struct ireq *r, bool pattern)
{
	unsigned int j, k, off = 0;

	for (j = 0; j < r->nsegs; j++) {
		u8 *p = stor_seg_addr(&r->bvec[j]);

		for (k = 0; k < r->bvec[j].bv_len; k++, off++)
			p[k] = pattern ? stor_pat(r->seed, off) : 0xee;
	}
}

/* Whether every byte of the request's segments is its pattern. */
static bool check(struct ireq *r)
{
	unsigned int j, k, off = 0;

	for (j = 0; j < r->nsegs; j++) {
		const u8 *p = stor_seg_addr(&r->bvec[j]);

		for (k = 0; k < r->bvec[j].bv_len; k++, off++)
			if (p[k] != stor_pat(r->seed, off))
				return false;
	}
	return true;
}

/* Maps the request's pages and posts its response receive and command.
 * Called in softirq context. */
int stor_submit(struct ireq *r, u16 op)
{
	struct iq *q = r->q;
	u64 t0;
	int ret;

	if (!in_serving_softirq())
		atomic_inc(&stor_run->not_softirq);
	r->op = op;
	r->seed = ((u64)q->id << 40) | ((u64)r->slot << 20) | (r->round + 1);
	r->nsegs = r->slot == 0 ? MAX_SEGS : 1 + (r->slot * 37 + r->round * 91) % MAX_SEGS;
	stor_layout(r);
	fill(r, op == OP_WRITE);
	r->addr = ((u64)q->id << 40) | ((u64)r->slot << 24) | 0x10000;
	t0 = ktime_get_ns();
	ret = kfi_mr_mapbv(r->mr, r->bvec, r->nsegs, r->addr);
	atomic64_add(ktime_get_ns() - t0, &stor_run->map_ns);
	atomic64_inc(&stor_run->maps);
	atomic64_add(r->nsegs, &stor_run->map_segs);
	if (ret)
		return ret;
	r->key = kfi_mr_key(r->mr);
	if (!r->key || r->key == r->last_key)
		atomic_inc(&stor_run->stale_keys);
	r->last_key = r->key;
	r->pending = 2;
	ret = kfi_trecv(q->iep, &r->resp, sizeof(r->resp), NULL, 0, r->slot, 0, &r->resp_ctx);
	if (ret)
		return ret;
	r->cmd = (struct cmd){
		.magic = CMD_MAGIC, .slot = r->slot, .op = op, .len = r->len,
		.addr = r->addr, .key = r->key, .seed = r->seed,
	};
	return kfi_send(q->iep, &r->cmd, sizeof(r->cmd), NULL, 0, &r->cmd_ctx);
}

/* A finished request: invalidate, check, submit the next. Softirq. */
static void complete_req(struct ireq *r)
{
	u64 t0 = ktime_get_ns();
	int ret = kfi_mr_unmap(r->mr);

	atomic64_add(ktime_get_ns() - t0, &stor_run->unmap_ns);
	if (ret == -EBUSY && ++r->busy_tries < 100) {
		/* The provider still finishes an access (it answered a read
		 * and has not let go of the region yet): the completion
		 * thread hands the request back shortly. */
		atomic_inc(&stor_run->unmap_busy);
		spin_lock_bh(&r->q->lock);
		list_add_tail(&r->node, &r->q->retry);
		spin_unlock_bh(&r->q->lock);
		return;
	}
	r->busy_tries = 0;
	if (ret)
		stor_fail("unmap after the response", ret);
	if (r->resp.status || r->resp.slot != r->slot || r->resp.seed != r->seed)
		stor_fail("response (status)", r->resp.status);
	else if (r->op == OP_READ && !check(r))
		stor_fail("data read from the target, slot", r->slot);
	atomic_inc(&stor_run->ios);
	atomic64_add(r->len, &stor_run->bytes);
	if (++r->round < ROUNDS) {
		ret = stor_submit(r, (r->round + r->slot) & 1 ? OP_READ : OP_WRITE);
		if (ret)
			stor_fail("submit", ret);
		if (!ret)
			return;
	}
	if (atomic_inc_return(&stor_run->finished) == NQ * QD)
		complete(&stor_run->all_done);
}

void stor_iq_bh(struct work_struct *w)
{
	struct iq *q = container_of(w, struct iq, bh);
	struct ireq *r;

	for (;;) {
		spin_lock_bh(&q->lock);
		r = list_first_entry_or_null(&q->done, struct ireq, node);
		if (r)
			list_del(&r->node);
		spin_unlock_bh(&q->lock);
		if (!r)
			return;
		complete_req(r);
	}
}

/* The first submissions of a queue, from softirq too. */
void stor_iq_start_bh(struct work_struct *w)
{
	struct iq *q = container_of(w, struct iq, start);
	int i, ret;

	for (i = 0; i < QD; i++) {
		ret = stor_submit(&q->req[i], (i & 1) ? OP_READ : OP_WRITE);
		if (ret) {
			stor_fail("first submit", ret);
			if (atomic_inc_return(&stor_run->finished) == NQ * QD)
				complete(&stor_run->all_done);
		}
	}
}

/* The initiator's completion thread of a queue: hands finished requests
 * to the BH work. */
int stor_ithread(void *arg)
{
	struct iq *q = arg;
	struct kfi_cq_tagged_entry e[8];
	struct kfi_cq_err_entry err;
	ssize_t n, i;

	while (!kthread_should_stop()) {
		spin_lock_bh(&q->lock);
		if (!list_empty(&q->retry)) {
			list_splice_tail_init(&q->retry, &q->done);
			queue_work(system_bh_wq, &q->bh);
		}
		spin_unlock_bh(&q->lock);
		n = kfi_cq_sread(q->icq, e, ARRAY_SIZE(e), NULL, 10);
		if (n == -EAGAIN || n == -ETIMEDOUT || n == -EINTR)
			continue;
		if (n == -KFI_EAVAIL) {
			if (kfi_cq_readerr(q->icq, &err, 0) == 1)
				stor_fail("initiator completion error", -err.err);
			continue;
		}
		if (n < 0) {
			stor_fail("initiator sread", n);
			msleep(10);
			continue;
		}
		for (i = 0; i < n; i++) {
			struct ctx *c = e[i].op_context;
			struct ireq *r = c->r;

			if (c->kind == CTX_RESP &&
			    (e[i].tag != r->slot || e[i].len != sizeof(r->resp)))
				stor_fail("response entry, slot", r->slot);
			if (--r->pending)
				continue;
			spin_lock_bh(&q->lock);
			list_add_tail(&r->node, &q->done);
			spin_unlock_bh(&q->lock);
			queue_work(system_bh_wq, &q->bh);
		}
	}
	return 0;
}
