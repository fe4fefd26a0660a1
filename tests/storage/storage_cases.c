// SPDX-License-Identifier: GPL-2.0
/*
 * kfi_test_storage.ko: KUnit suite kfi_storage. An NVMe-oF-shaped
 * initiator and target pair, written in C against include/kfabric/ only,
 * over kfi_sockets on loopback: 8 queues (one MSG connection each), 32
 * requests in flight per queue.
 *
 * Per request the initiator, in softirq context (a BH work item), maps
 * 1..256 bio_vec segments into a region of kfi_mr_alloc() (a fresh key per
 * I/O), posts a tagged receive for the response and sends a command
 * (op, length, remote address, key). The target (a thread per queue) moves
 * the data with RMA read (host to target, like an NVMe write) or RMA write
 * (target to host, like an NVMe read), in two accesses that cross many
 * segments, and answers with a tagged response. The initiator, in softirq
 * again, invalidates the mapping (kfi_mr_unmap()), checks every byte and
 * submits the slot's next request. A timed-out request is cancelled from
 * a timer, and its dead key is refused to the target.
 */
#include "storage.h"

static int suite_init(struct kunit_suite *suite)
{
	stor_run = vzalloc(sizeof(*stor_run));
	return stor_run ? 0 : -ENOMEM;
}

static void suite_exit(struct kunit_suite *suite)
{
	vfree(stor_run);
	stor_run = NULL;
}

#define COST_RUNS 64

/*
 * What one per-I/O registration of 256 segments costs, beside what any
 * registration must at least do in the same boot: read the clock, walk the
 * bio_vec list; and beside a full kfi_mr_regbv() + kfi_close() of the same
 * list. Printed, never asserted (TCG timings vary by run).
 */
static void registration_cost(struct kunit *test, struct ireq *r)
{
	u64 t0, map = 0, map1 = 0, unmap = 0, clock = 0, walk = 0, reg = 0, sum = 0;
	struct kfid_mr *mr;
	int i, j, ret = 0;

	r->nsegs = MAX_SEGS;
	stor_layout(r);
	/* Run 0 warms up (TCG translates each path on its first run). */
	for (i = 0; i <= COST_RUNS && !ret; i++) {
		if (i == 1)
			map = map1 = unmap = clock = walk = reg = 0;
		local_bh_disable();
		t0 = ktime_get_ns();
		clock += ktime_get_ns() - t0;
		t0 = ktime_get_ns();
		for (j = 0; j < MAX_SEGS; j++)
			sum += (unsigned long)stor_seg_addr(&r->bvec[j]) + r->bvec[j].bv_len;
		walk += ktime_get_ns() - t0;
		t0 = ktime_get_ns();
		ret = kfi_mr_mapbv(r->mr, r->bvec, MAX_SEGS, r->addr);
		map += ktime_get_ns() - t0;
		t0 = ktime_get_ns();
		ret = ret ?: kfi_mr_unmap(r->mr);
		unmap += ktime_get_ns() - t0;
		t0 = ktime_get_ns();
		ret = ret ?: kfi_mr_mapbv(r->mr, r->bvec, 1, r->addr);
		map1 += ktime_get_ns() - t0;
		ret = ret ?: kfi_mr_unmap(r->mr);
		local_bh_enable();
		t0 = ktime_get_ns();
		ret = ret ?: kfi_mr_regbv(stor_run->domain, r->bvec, MAX_SEGS, KFI_REMOTE_READ, r->addr,
					  0, 0, &mr, NULL);
		ret = ret ?: kfi_close(&mr->fid);
		reg += ktime_get_ns() - t0;
	}
	KUNIT_EXPECT_EQ(test, ret, 0);
	kunit_info(test, "256 segments, mean of %d: map %llu ns (1 segment: %llu ns), unmap %llu ns; clock read %llu ns, list walk %llu ns (sum %llx); kfi_mr_regbv + kfi_close %llu ns\n",
		   COST_RUNS, map / COST_RUNS, map1 / COST_RUNS, unmap / COST_RUNS, clock / COST_RUNS,
		   walk / COST_RUNS, sum & 0xf, reg / COST_RUNS);
}

/* Every request of 8 queues x 32 slots x 3 rounds, each byte checked. */
static void per_io_registration_8_queues_32_deep(struct kunit *test)
{
	u64 maps;
	int i;

	memset(stor_run, 0, sizeof(*stor_run));
	KUNIT_ASSERT_EQ(test, stor_run_open(), 0);
	for (i = 0; i < NQ; i++) {
		struct iq *q = &stor_run->q[i];

		q->ithread = kthread_run(stor_ithread, q, "kfi_stor_i%d", i);
		q->tthread = kthread_run(stor_tthread, q, "kfi_stor_t%d", i);
		if (IS_ERR(q->ithread) || IS_ERR(q->tthread)) {
			q->ithread = IS_ERR(q->ithread) ? NULL : q->ithread;
			q->tthread = IS_ERR(q->tthread) ? NULL : q->tthread;
			KUNIT_FAIL(test, "thread start");
			stor_run_close(test);
			return;
		}
		queue_work(system_bh_wq, &q->start);
	}
	KUNIT_EXPECT_NE(test, wait_for_completion_timeout(&stor_run->all_done, 180 * HZ), 0);
	for (i = 0; i < NQ; i++)
		stor_threads_stop(&stor_run->q[i]);
	KUNIT_EXPECT_EQ_MSG(test, atomic_read(&stor_run->errors), 0, "first: %s", stor_run->first_error);
	KUNIT_EXPECT_EQ(test, atomic_read(&stor_run->ios), NQ * QD * ROUNDS);
	KUNIT_EXPECT_EQ(test, atomic_read(&stor_run->not_softirq), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&stor_run->stale_keys), 0);
	maps = atomic64_read(&stor_run->maps);
	if (maps)
		kunit_info(test, "%d I/Os, %lld MiB, %d unmaps tried again; per I/O: map %llu ns (%llu segments on average), unmap %llu ns\n",
			   atomic_read(&stor_run->ios), atomic64_read(&stor_run->bytes) >> 20,
			   atomic_read(&stor_run->unmap_busy),
			   atomic64_read(&stor_run->map_ns) / maps, atomic64_read(&stor_run->map_segs) / maps,
			   atomic64_read(&stor_run->unmap_ns) / maps);
	registration_cost(test, &stor_run->q[0].req[0]);
	stor_run_close(test);
}

/* The timed-out request of the cancel case. */
struct timeout {
	struct timer_list timer;
	struct ireq *r;
	int cancel, unmap;
	bool in_softirq;
	struct completion fired;
};

static void timeout_fired(struct timer_list *t)
{
	struct timeout *to = timer_container_of(to, t, timer);

	to->in_softirq = in_serving_softirq();
	to->cancel = kfi_cancel(&to->r->q->iep->fid, &to->r->resp_ctx);
	to->unmap = kfi_mr_unmap(to->r->mr);
	complete(&to->fired);
}

/*
 * A request the target never answers times out: its timer (softirq)
 * cancels the response receive, which completes once with ECANCELED, and
 * invalidates the mapping, whose key the target then gets refused.
 */
static void timed_out_request_is_cancelled(struct kunit *test)
{
	struct timeout to = {};
	struct kfi_cq_tagged_entry e;
	struct kfi_cq_err_entry err = {};
	struct iq *q;
	struct ireq *r;
	ssize_t n;
	int got_cmd = 0, cancelled = 0;

	memset(stor_run, 0, sizeof(*stor_run));
	KUNIT_ASSERT_EQ(test, stor_run_open(), 0);
	q = &stor_run->q[0];
	r = &q->req[5];
	init_completion(&to.fired);
	to.r = r;
	timer_setup_on_stack(&to.timer, timeout_fired, 0);

	local_bh_disable();	/* an atomic submission path */
	KUNIT_EXPECT_EQ(test, stor_submit(r, OP_HANG), 0);
	local_bh_enable();
	/* The target sees the command and, a hung controller, sits on it. */
	n = stor_next_entry(q->tcq, &e, &err, WAIT_MS);
	KUNIT_EXPECT_EQ(test, n, 1);
	if (n == 1)
		KUNIT_EXPECT_PTR_EQ(test, e.op_context, (void *)&q->tcmd[0]);
	mod_timer(&to.timer, jiffies + msecs_to_jiffies(200));
	KUNIT_EXPECT_NE(test, wait_for_completion_timeout(&to.fired, 10 * HZ), 0);
	timer_delete_sync(&to.timer);
	timer_destroy_on_stack(&to.timer);
	KUNIT_EXPECT_TRUE(test, to.in_softirq);
	KUNIT_EXPECT_EQ(test, to.cancel, 0);
	KUNIT_EXPECT_EQ(test, to.unmap, 0);

	/* The initiator: the command's send, then the cancelled receive,
	 * once; nothing more. */
	while ((n = stor_next_entry(q->icq, &e, &err, 500)) != -EAGAIN && n != -ETIMEDOUT) {
		if (n == 1 && e.op_context == &r->cmd_ctx) {
			got_cmd++;
		} else if (n == -KFI_EAVAIL && err.op_context == &r->resp_ctx &&
			   err.err == ECANCELED) {
			cancelled++;
		} else {
			KUNIT_FAIL(test, "unexpected initiator entry %zd", n);
			break;
		}
	}
	KUNIT_EXPECT_EQ(test, got_cmd, 1);
	KUNIT_EXPECT_EQ(test, cancelled, 1);
	KUNIT_EXPECT_EQ(test, kfi_cancel(&q->iep->fid, &r->resp_ctx), -ENOENT);

	/* The target's late access with the dead key is refused. */
	KUNIT_EXPECT_EQ(test, kfi_write(q->tep, q->tbuf, 64, NULL, 0, r->addr, r->key, q), 0);
	n = stor_next_entry(q->tcq, &e, &err, WAIT_MS);
	KUNIT_EXPECT_EQ(test, n, -KFI_EAVAIL);
	if (n == -KFI_EAVAIL) {
		KUNIT_EXPECT_PTR_EQ(test, err.op_context, (void *)q);
		KUNIT_EXPECT_EQ(test, err.err, ENOKEY);
	}
	/* The slot maps again, with a new key. */
	local_bh_disable();
	r->round++;
	KUNIT_EXPECT_EQ(test, kfi_mr_mapbv(r->mr, r->bvec, 1, r->addr), 0);
	KUNIT_EXPECT_NE(test, kfi_mr_key(r->mr), r->key);
	KUNIT_EXPECT_EQ(test, kfi_mr_unmap(r->mr), 0);
	local_bh_enable();
	stor_run_close(test);
}

/* The mapping calls refuse what they must, and leave the region usable. */
static void mapping_refuses_bad_calls(struct kunit *test)
{
	static u8 buf[4096];
	struct kvec kv[2] = { { .iov_base = buf, .iov_len = 16 }, { .iov_base = NULL, .iov_len = 8 } };
	static struct kvec many[MAX_SEGS + 1];
	struct kfid_mr *mr = NULL, *plain = NULL, *two = NULL;
	struct kfi_mr_map m = { .iov_type = KFI_KVEC, .iov_count = 1 };
	int i;

	memset(stor_run, 0, sizeof(*stor_run));
	KUNIT_ASSERT_EQ(test, stor_run_open(), 0);
	for (i = 0; i < ARRAY_SIZE(many); i++)
		many[i] = (struct kvec){ .iov_base = buf + i, .iov_len = 1 };
	KUNIT_EXPECT_EQ(test, kfi_mr_alloc(NULL, 4, KFI_REMOTE_WRITE, 0, &mr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_alloc(stor_run->domain, 0, KFI_REMOTE_WRITE, 0, &mr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_alloc(stor_run->domain, MAX_SEGS + 1, KFI_REMOTE_WRITE, 0, &mr,
					   NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_alloc(stor_run->domain, 4, 1ULL << 62, 0, &mr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_alloc(stor_run->domain, 4, KFI_REMOTE_WRITE, 1, &mr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_alloc(stor_run->domain, 4, KFI_REMOTE_WRITE, 0, NULL, NULL), -EINVAL);
	KUNIT_ASSERT_EQ(test, kfi_mr_alloc(stor_run->domain, 4, KFI_REMOTE_WRITE, 0, &mr, NULL), 0);
	KUNIT_ASSERT_EQ(test, kfi_mr_alloc(stor_run->domain, MAX_SEGS, KFI_REMOTE_WRITE, 0, &two, NULL), 0);
	KUNIT_ASSERT_EQ(test, kfi_mr_reg(stor_run->domain, buf, 64, KFI_REMOTE_WRITE, 0, 0, 0, &plain,
					 NULL), 0);

	local_bh_disable();
	KUNIT_EXPECT_EQ(test, kfi_mr_map(NULL, &m), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_map(mr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_mapv(mr, NULL, 1, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_mapv(mr, kv, 0, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_mapv(mr, kv, 2, 0), -EINVAL);	/* NULL buffer */
	KUNIT_EXPECT_EQ(test, kfi_mr_mapv(mr, kv, 1, U64_MAX - 8), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_mapv(mr, many, 5, 0), -EINVAL);	/* above max_segs */
	KUNIT_EXPECT_EQ(test, kfi_mr_mapv(two, many, MAX_SEGS + 1, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_mapv(plain, kv, 1, 0), -EINVAL);	/* not per-I/O */
	KUNIT_EXPECT_EQ(test, kfi_mr_unmap(plain), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_unmap(mr), -EINVAL);		/* not mapped */
	KUNIT_EXPECT_EQ(test, kfi_mr_unmap((struct kfid_mr *)stor_run->domain), -EINVAL);
	m.mr_iov = kv;
	m.iov_type = 7;
	KUNIT_EXPECT_EQ(test, kfi_mr_map(mr, &m), -EINVAL);
	m.iov_type = KFI_KVEC;
	KUNIT_EXPECT_EQ(test, kfi_mr_map(mr, &m), 0);
	KUNIT_EXPECT_NE(test, kfi_mr_key(mr), 0);
	KUNIT_EXPECT_EQ(test, kfi_mr_map(mr, &m), -EBUSY);		/* mapped */
	KUNIT_EXPECT_EQ(test, kfi_mr_mapv(two, many, MAX_SEGS, 0), 0);
	KUNIT_EXPECT_NE(test, kfi_mr_key(two), kfi_mr_key(mr));
	KUNIT_EXPECT_EQ(test, kfi_mr_unmap(mr), 0);
	KUNIT_EXPECT_EQ(test, kfi_mr_key(mr), 0);
	KUNIT_EXPECT_EQ(test, kfi_mr_unmap(mr), -EINVAL);
	local_bh_enable();
	/* A mapped region closes too. */
	KUNIT_EXPECT_EQ(test, kfi_close(&two->fid), 0);
	KUNIT_EXPECT_EQ(test, kfi_close(&mr->fid), 0);
	KUNIT_EXPECT_EQ(test, kfi_close(&plain->fid), 0);
	stor_run_close(test);
}

static struct kunit_case storage_cases[] = {
	KUNIT_CASE(mapping_refuses_bad_calls),
	KUNIT_CASE_SLOW(per_io_registration_8_queues_32_deep),
	KUNIT_CASE_SLOW(timed_out_request_is_cancelled),
	{}
};

static struct kunit_suite storage_suite = {
	.name = "kfi_storage",
	.suite_init = suite_init,
	.suite_exit = suite_exit,
	.test_cases = storage_cases,
};
kunit_test_suite(storage_suite);

MODULE_DESCRIPTION("kfabric: NVMe-oF-shaped initiator/target test over per-I/O registration");
MODULE_LICENSE("GPL");
