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
#include <kunit/test.h>
#include <linux/bvec.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/timer.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <kfabric/kfabric.h>

#define PORT "7540"
#define WAIT_MS 20000
#define NQ 8			/* queues (connections) */
#define QD 32			/* requests in flight per queue */
#define TQ (2 * QD)		/* command buffers the target posts */
#define ROUNDS 3		/* requests per slot */
#define MAX_SEGS KFI_MR_MAP_SEGS_MAX
#define SMALL_PAGES 16		/* pages of a slot; slot 0 has MAX_SEGS */
#define SMALL_SEG 256		/* segment bytes of a slot but 0 */
#define BIG_LEN (MAX_SEGS * PAGE_SIZE)

enum { OP_WRITE = 1, OP_READ, OP_HANG };
#define CMD_MAGIC 0x6b666e76	/* "kfnv" */

/* What the initiator sends; the target copies it before reposting. */
struct cmd {
	u32 magic;
	u16 slot;
	u16 op;
	u32 len;
	u32 pad;
	u64 addr, key, seed;
};

struct resp {
	u16 slot;
	u16 pad;
	s32 status;		/* 0, or the target's negative errno */
	u64 seed;
};

/* A completion context names its request and what completed. */
enum { CTX_CMD, CTX_RESP };
struct ctx {
	struct ireq *r;
	int kind;
};

struct iq;

/* One request slot of the initiator. */
struct ireq {
	struct iq *q;
	u16 slot;
	struct kfid_mr *mr;
	struct page **pages;
	unsigned int npages, seg_len;
	struct bio_vec bvec[MAX_SEGS];
	unsigned int nsegs, len;
	u16 op;
	u64 seed, addr, key, last_key;
	int round;
	int pending;		/* completions before the slot is done */
	int busy_tries;		/* kfi_mr_unmap() calls that got -EBUSY */
	struct cmd cmd;
	struct resp resp;
	struct ctx cmd_ctx, resp_ctx;
	struct list_head node;	/* on iq->done */
};

/* One queue: an initiator endpoint and its target endpoint. */
struct iq {
	int id;
	struct kfid_ep *iep, *tep;
	struct kfid_cq *icq, *tcq;
	struct ireq req[QD];
	spinlock_t lock;	/* protects done and retry */
	struct list_head done;
	struct list_head retry;	/* unmapped -EBUSY: tried again later */
	struct work_struct start, bh;	/* on system_bh_wq: first submissions;
					 * completions and the next ones */
	struct task_struct *ithread, *tthread;
	/* target: commands waiting for the RMA engine, in arrival order */
	struct cmd tcmd[TQ];
	struct resp tresp[TQ];
	u8 fifo[TQ];
	unsigned int fifo_head, fifo_len;
	int cur, rma_left, rma_status;	/* the command whose RMA runs */
	void *tbuf;
};

/* The whole run; its counters are written from softirq and threads. */
struct run {
	struct kfi_info *src, *dst;
	struct kfid_fabric *fabric;
	struct kfid_domain *domain;
	struct kfid_eq *eq;
	struct kfid_pep *pep;
	struct iq q[NQ];
	atomic_t errors, ios, finished, not_softirq, stale_keys, unmap_busy;
	atomic64_t bytes, map_ns, unmap_ns, maps, map_segs;
	struct completion all_done;
	char first_error[128];
	spinlock_t err_lock;	/* protects first_error */
};

static struct run *run;

static void fail(const char *what, long v)
{
	if (atomic_inc_return(&run->errors) == 1) {
		spin_lock_bh(&run->err_lock);
		snprintf(run->first_error, sizeof(run->first_error), "%s: %ld", what, v);
		spin_unlock_bh(&run->err_lock);
	}
}

/* The byte at @off of the data of the request with @seed. */
static u8 pat(u64 seed, u32 off)
{
	return (u8)(seed * 131 + off * 7 + (off >> 8) * 13 + (off >> 16));
}

static void *seg_addr(const struct bio_vec *bv)
{
	return page_address(bv->bv_page) + bv->bv_offset;
}

/* Lays out the request's segments: segment j in page j % npages, so that
 * neighbours in the list are not neighbours in memory. */
static void layout(struct ireq *r)
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
		u8 *p = seg_addr(&r->bvec[j]);

		for (k = 0; k < r->bvec[j].bv_len; k++, off++)
			p[k] = pattern ? pat(r->seed, off) : 0xee;
	}
}

/* Whether every byte of the request's segments is its pattern. */
static bool check(struct ireq *r)
{
	unsigned int j, k, off = 0;

	for (j = 0; j < r->nsegs; j++) {
		const u8 *p = seg_addr(&r->bvec[j]);

		for (k = 0; k < r->bvec[j].bv_len; k++, off++)
			if (p[k] != pat(r->seed, off))
				return false;
	}
	return true;
}

/* Maps the request's pages and posts its response receive and command.
 * Called in softirq context. */
static int submit(struct ireq *r, u16 op)
{
	struct iq *q = r->q;
	u64 t0;
	int ret;

	if (!in_serving_softirq())
		atomic_inc(&run->not_softirq);
	r->op = op;
	r->seed = ((u64)q->id << 40) | ((u64)r->slot << 20) | (r->round + 1);
	r->nsegs = r->slot == 0 ? MAX_SEGS : 1 + (r->slot * 37 + r->round * 91) % MAX_SEGS;
	layout(r);
	fill(r, op == OP_WRITE);
	r->addr = ((u64)q->id << 40) | ((u64)r->slot << 24) | 0x10000;
	t0 = ktime_get_ns();
	ret = kfi_mr_mapbv(r->mr, r->bvec, r->nsegs, r->addr);
	atomic64_add(ktime_get_ns() - t0, &run->map_ns);
	atomic64_inc(&run->maps);
	atomic64_add(r->nsegs, &run->map_segs);
	if (ret)
		return ret;
	r->key = kfi_mr_key(r->mr);
	if (!r->key || r->key == r->last_key)
		atomic_inc(&run->stale_keys);
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

	atomic64_add(ktime_get_ns() - t0, &run->unmap_ns);
	if (ret == -EBUSY && ++r->busy_tries < 100) {
		/* The provider still finishes an access (it answered a read
		 * and has not let go of the region yet): the completion
		 * thread hands the request back shortly. */
		atomic_inc(&run->unmap_busy);
		spin_lock_bh(&r->q->lock);
		list_add_tail(&r->node, &r->q->retry);
		spin_unlock_bh(&r->q->lock);
		return;
	}
	r->busy_tries = 0;
	if (ret)
		fail("unmap after the response", ret);
	if (r->resp.status || r->resp.slot != r->slot || r->resp.seed != r->seed)
		fail("response (status)", r->resp.status);
	else if (r->op == OP_READ && !check(r))
		fail("data read from the target, slot", r->slot);
	atomic_inc(&run->ios);
	atomic64_add(r->len, &run->bytes);
	if (++r->round < ROUNDS) {
		ret = submit(r, (r->round + r->slot) & 1 ? OP_READ : OP_WRITE);
		if (ret)
			fail("submit", ret);
		if (!ret)
			return;
	}
	if (atomic_inc_return(&run->finished) == NQ * QD)
		complete(&run->all_done);
}

static void iq_bh(struct work_struct *w)
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
static void iq_start_bh(struct work_struct *w)
{
	struct iq *q = container_of(w, struct iq, start);
	int i, ret;

	for (i = 0; i < QD; i++) {
		ret = submit(&q->req[i], (i & 1) ? OP_READ : OP_WRITE);
		if (ret) {
			fail("first submit", ret);
			if (atomic_inc_return(&run->finished) == NQ * QD)
				complete(&run->all_done);
		}
	}
}

/* The initiator's completion thread of a queue: hands finished requests
 * to the BH work. */
static int ithread(void *arg)
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
				fail("initiator completion error", -err.err);
			continue;
		}
		if (n < 0) {
			fail("initiator sread", n);
			msleep(10);
			continue;
		}
		for (i = 0; i < n; i++) {
			struct ctx *c = e[i].op_context;
			struct ireq *r = c->r;

			if (c->kind == CTX_RESP &&
			    (e[i].tag != r->slot || e[i].len != sizeof(r->resp)))
				fail("response entry, slot", r->slot);
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

/* Waits for the next entry of @cq; 1, or a negative errno (an error
 * entry is read into @err and gives -KFI_EAVAIL). */
static ssize_t next_entry(struct kfid_cq *cq, struct kfi_cq_tagged_entry *e,
			  struct kfi_cq_err_entry *err, int ms)
{
	ssize_t n = kfi_cq_sread(cq, e, 1, NULL, ms);

	if (n == -KFI_EAVAIL && kfi_cq_readerr(cq, err, 0) != 1)
		return -EIO;
	return n;
}

/* Starts the RMA of command @c, in two accesses of halves; 0 or -errno. */
static int target_rma_start(struct iq *q, const struct cmd *c)
{
	u32 half = c->len / 2, i;
	int ret;

	if (c->len > BIG_LEN || c->len < 2 || (c->op != OP_READ && c->op != OP_WRITE))
		return -EMSGSIZE;
	q->rma_status = 0;
	if (c->op == OP_WRITE) {
		memset(q->tbuf, 0, c->len);
		ret = kfi_read(q->tep, q->tbuf, half, NULL, 0, c->addr, c->key, q->tbuf);
		if (!ret)
			q->rma_left++;
		if (!ret)
			ret = kfi_read(q->tep, q->tbuf + half, c->len - half, NULL, 0,
				       c->addr + half, c->key, q->tbuf + half);
	} else {
		for (i = 0; i < c->len; i++)
			((u8 *)q->tbuf)[i] = pat(c->seed, i);
		ret = kfi_write(q->tep, q->tbuf, half, NULL, 0, c->addr, c->key, q->tbuf);
		if (!ret)
			q->rma_left++;
		if (!ret)
			ret = kfi_write(q->tep, q->tbuf + half, c->len - half, NULL, 0,
					c->addr + half, c->key, q->tbuf + half);
	}
	if (!ret)
		q->rma_left++;
	return ret;
}

/* Answers command @i with @status (its RMA done or refused). */
static void target_respond(struct iq *q, int i, int status)
{
	const struct cmd *c = &q->tcmd[i];
	u32 k;

	if (!status && c->op == OP_WRITE)
		for (k = 0; k < c->len; k++)
			if (((u8 *)q->tbuf)[k] != pat(c->seed, k)) {
				status = -EBADMSG;
				break;
			}
	q->tresp[i] = (struct resp){ .slot = c->slot, .seed = c->seed, .status = status };
	if (kfi_tsend(q->tep, &q->tresp[i], sizeof(q->tresp[i]), NULL, 0, c->slot, &q->tresp[i]))
		fail("target response", i);
}

/* One completion of the target's CQ. */
static void target_entry(struct iq *q, void *ctx, ssize_t n, size_t len, int err)
{
	struct cmd *c = ctx;
	int i;

	if (ctx == q->tbuf || ctx == q->tbuf + q->tcmd[q->cur].len / 2) {
		if (n != 1 && !q->rma_status)
			q->rma_status = -err;
		if (--q->rma_left == 0)
			target_respond(q, q->cur, q->rma_status);
		return;
	}
	if (n != 1) {
		fail("target completion error", -err);
		return;
	}
	if (ctx >= (void *)q->tresp && ctx < (void *)(q->tresp + TQ)) {
		/* A response sent: its command buffer takes the next. */
		i = (struct resp *)ctx - q->tresp;
		if (kfi_recv(q->tep, &q->tcmd[i], sizeof(q->tcmd[i]), NULL, 0, &q->tcmd[i]))
			fail("target repost", i);
		return;
	}
	if (ctx < (void *)q->tcmd || ctx >= (void *)(q->tcmd + TQ) || len != sizeof(*c) ||
	    c->magic != CMD_MAGIC || c->slot >= QD) {
		fail("target: bad command entry", (long)len);
		return;
	}
	i = c - q->tcmd;
	if (c->op == OP_HANG)
		return;		/* a hung controller: never answers */
	q->fifo[(q->fifo_head + q->fifo_len++) % TQ] = i;
}

/* The target thread of a queue: commands in arrival order, one RMA at a
 * time, while receives and sent responses keep being handled. */
static int tthread(void *arg)
{
	struct iq *q = arg;
	struct kfi_cq_tagged_entry e;
	struct kfi_cq_err_entry err;
	ssize_t n;
	int ret;

	while (!kthread_should_stop()) {
		while (!q->rma_left && q->fifo_len) {
			q->cur = q->fifo[q->fifo_head];
			q->fifo_head = (q->fifo_head + 1) % TQ;
			q->fifo_len--;
			ret = target_rma_start(q, &q->tcmd[q->cur]);
			/* A failed start leaves no access behind. */
			if (ret && q->rma_left == 0)
				target_respond(q, q->cur, ret);
			else if (ret)
				q->rma_status = ret;
		}
		n = next_entry(q->tcq, &e, &err, 100);
		if (n == -EAGAIN || n == -ETIMEDOUT || n == -EINTR)
			continue;
		if (n == 1)
			target_entry(q, e.op_context, n, e.len, 0);
		else if (n == -KFI_EAVAIL)
			target_entry(q, err.op_context, n, err.len, err.err);
		else
			fail("target sread", n);
	}
	return 0;
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

	ret = kfi_cq_open(run->domain, &cq_attr, &q->icq, NULL);
	if (!ret)
		ret = kfi_cq_open(run->domain, &cq_attr, &q->tcq, NULL);
	if (!ret)
		ret = kfi_endpoint(run->domain, run->dst, &q->iep, NULL);
	if (!ret)
		ret = kfi_ep_bind(q->iep, &q->icq->fid, KFI_TRANSMIT | KFI_RECV);
	if (!ret)
		ret = kfi_ep_bind(q->iep, &run->eq->fid, 0);
	if (!ret)
		ret = kfi_enable(q->iep);
	if (!ret)
		ret = kfi_connect(q->iep, NULL, NULL, 0);
	if (ret)
		return ret;
	ret = next_event(run->eq, &ev.e, sizeof(ev));
	if (ret != KFI_CONNREQ)
		return ret < 0 ? ret : -EPROTO;
	ret = kfi_endpoint(run->domain, ev.e.info, &q->tep, NULL);
	kfi_freeinfo(ev.e.info);
	if (!ret)
		ret = kfi_ep_bind(q->tep, &q->tcq->fid, KFI_TRANSMIT | KFI_RECV);
	if (!ret)
		ret = kfi_ep_bind(q->tep, &run->eq->fid, 0);
	if (!ret)
		ret = kfi_enable(q->tep);
	for (i = 0; !ret && i < TQ; i++)
		ret = kfi_recv(q->tep, &q->tcmd[i], sizeof(q->tcmd[i]), NULL, 0, &q->tcmd[i]);
	if (!ret)
		ret = kfi_accept(q->tep, NULL, 0);
	if (ret)
		return ret;
	if (next_event(run->eq, &ev.e, sizeof(ev)) != KFI_CONNECTED ||
	    next_event(run->eq, &ev.e, sizeof(ev)) != KFI_CONNECTED)
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
	ret = kfi_mr_alloc(run->domain, MAX_SEGS, KFI_REMOTE_READ | KFI_REMOTE_WRITE, 0,
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

static int run_open(void)
{
	struct kfi_eq_attr eq_attr = { .size = 4 * NQ };
	struct kfi_info *hints;
	int ret, i, j;

	spin_lock_init(&run->err_lock);
	init_completion(&run->all_done);
	hints = kfi_allocinfo();
	if (!hints)
		return -ENOMEM;
	hints->fabric_attr->prov_name = "sockets";
	hints->caps = KFI_MSG | KFI_RMA | KFI_TAGGED;
	ret = kfi_getinfo(KFI_API_VERSION, "127.0.0.1", PORT, KFI_SOURCE, hints, &run->src);
	if (!ret)
		ret = kfi_getinfo(KFI_API_VERSION, "127.0.0.1", PORT, 0, hints, &run->dst);
	kfi_freeinfo(hints);
	if (!ret)
		ret = kfi_fabric(run->src->fabric_attr, &run->fabric, NULL);
	if (!ret)
		ret = kfi_domain(run->fabric, run->src, &run->domain, NULL);
	if (!ret)
		ret = kfi_eq_open(run->fabric, &eq_attr, &run->eq, NULL);
	if (!ret)
		ret = kfi_passive_ep(run->fabric, run->src, &run->pep, NULL);
	if (!ret)
		ret = kfi_pep_bind(run->pep, &run->eq->fid, 0);
	if (!ret)
		ret = kfi_listen(run->pep);
	for (i = 0; !ret && i < NQ; i++) {
		struct iq *q = &run->q[i];

		q->id = i;
		spin_lock_init(&q->lock);
		INIT_LIST_HEAD(&q->done);
		INIT_LIST_HEAD(&q->retry);
		INIT_WORK(&q->start, iq_start_bh);
		INIT_WORK(&q->bh, iq_bh);
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

static void threads_stop(struct iq *q)
{
	if (q->ithread)
		kthread_stop(q->ithread);
	if (q->tthread)
		kthread_stop(q->tthread);
	q->ithread = q->tthread = NULL;
	flush_work(&q->start);
	flush_work(&q->bh);
}

static void run_close(struct kunit *test)
{
	int i, j;

	for (i = 0; i < NQ; i++) {
		struct iq *q = &run->q[i];

		threads_stop(q);
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
	if (run->pep)
		KUNIT_EXPECT_EQ(test, kfi_close(&run->pep->fid), 0);
	if (run->eq)
		KUNIT_EXPECT_EQ(test, kfi_close(&run->eq->fid), 0);
	if (run->domain)
		KUNIT_EXPECT_EQ(test, kfi_close(&run->domain->fid), 0);
	if (run->fabric)
		KUNIT_EXPECT_EQ(test, kfi_close(&run->fabric->fid), 0);
	kfi_freeinfo(run->src);
	kfi_freeinfo(run->dst);
}

static int suite_init(struct kunit_suite *suite)
{
	run = vzalloc(sizeof(*run));
	return run ? 0 : -ENOMEM;
}

static void suite_exit(struct kunit_suite *suite)
{
	vfree(run);
	run = NULL;
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
	layout(r);
	/* Run 0 warms up (TCG translates each path on its first run). */
	for (i = 0; i <= COST_RUNS && !ret; i++) {
		if (i == 1)
			map = map1 = unmap = clock = walk = reg = 0;
		local_bh_disable();
		t0 = ktime_get_ns();
		clock += ktime_get_ns() - t0;
		t0 = ktime_get_ns();
		for (j = 0; j < MAX_SEGS; j++)
			sum += (unsigned long)seg_addr(&r->bvec[j]) + r->bvec[j].bv_len;
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
		ret = ret ?: kfi_mr_regbv(run->domain, r->bvec, MAX_SEGS, KFI_REMOTE_READ, r->addr,
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

	memset(run, 0, sizeof(*run));
	KUNIT_ASSERT_EQ(test, run_open(), 0);
	for (i = 0; i < NQ; i++) {
		struct iq *q = &run->q[i];

		q->ithread = kthread_run(ithread, q, "kfi_stor_i%d", i);
		q->tthread = kthread_run(tthread, q, "kfi_stor_t%d", i);
		if (IS_ERR(q->ithread) || IS_ERR(q->tthread)) {
			q->ithread = IS_ERR(q->ithread) ? NULL : q->ithread;
			q->tthread = IS_ERR(q->tthread) ? NULL : q->tthread;
			KUNIT_FAIL(test, "thread start");
			run_close(test);
			return;
		}
		queue_work(system_bh_wq, &q->start);
	}
	KUNIT_EXPECT_NE(test, wait_for_completion_timeout(&run->all_done, 180 * HZ), 0);
	for (i = 0; i < NQ; i++)
		threads_stop(&run->q[i]);
	KUNIT_EXPECT_EQ_MSG(test, atomic_read(&run->errors), 0, "first: %s", run->first_error);
	KUNIT_EXPECT_EQ(test, atomic_read(&run->ios), NQ * QD * ROUNDS);
	KUNIT_EXPECT_EQ(test, atomic_read(&run->not_softirq), 0);
	KUNIT_EXPECT_EQ(test, atomic_read(&run->stale_keys), 0);
	maps = atomic64_read(&run->maps);
	if (maps)
		kunit_info(test, "%d I/Os, %lld MiB, %d unmaps tried again; per I/O: map %llu ns (%llu segments on average), unmap %llu ns\n",
			   atomic_read(&run->ios), atomic64_read(&run->bytes) >> 20,
			   atomic_read(&run->unmap_busy),
			   atomic64_read(&run->map_ns) / maps, atomic64_read(&run->map_segs) / maps,
			   atomic64_read(&run->unmap_ns) / maps);
	registration_cost(test, &run->q[0].req[0]);
	run_close(test);
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

	memset(run, 0, sizeof(*run));
	KUNIT_ASSERT_EQ(test, run_open(), 0);
	q = &run->q[0];
	r = &q->req[5];
	init_completion(&to.fired);
	to.r = r;
	timer_setup_on_stack(&to.timer, timeout_fired, 0);

	local_bh_disable();	/* an atomic submission path */
	KUNIT_EXPECT_EQ(test, submit(r, OP_HANG), 0);
	local_bh_enable();
	/* The target sees the command and, a hung controller, sits on it. */
	n = next_entry(q->tcq, &e, &err, WAIT_MS);
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
	while ((n = next_entry(q->icq, &e, &err, 500)) != -EAGAIN && n != -ETIMEDOUT) {
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
	n = next_entry(q->tcq, &e, &err, WAIT_MS);
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
	run_close(test);
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

	memset(run, 0, sizeof(*run));
	KUNIT_ASSERT_EQ(test, run_open(), 0);
	for (i = 0; i < ARRAY_SIZE(many); i++)
		many[i] = (struct kvec){ .iov_base = buf + i, .iov_len = 1 };
	KUNIT_EXPECT_EQ(test, kfi_mr_alloc(NULL, 4, KFI_REMOTE_WRITE, 0, &mr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_alloc(run->domain, 0, KFI_REMOTE_WRITE, 0, &mr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_alloc(run->domain, MAX_SEGS + 1, KFI_REMOTE_WRITE, 0, &mr,
					   NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_alloc(run->domain, 4, 1ULL << 62, 0, &mr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_alloc(run->domain, 4, KFI_REMOTE_WRITE, 1, &mr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_alloc(run->domain, 4, KFI_REMOTE_WRITE, 0, NULL, NULL), -EINVAL);
	KUNIT_ASSERT_EQ(test, kfi_mr_alloc(run->domain, 4, KFI_REMOTE_WRITE, 0, &mr, NULL), 0);
	KUNIT_ASSERT_EQ(test, kfi_mr_alloc(run->domain, MAX_SEGS, KFI_REMOTE_WRITE, 0, &two, NULL), 0);
	KUNIT_ASSERT_EQ(test, kfi_mr_reg(run->domain, buf, 64, KFI_REMOTE_WRITE, 0, 0, 0, &plain,
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
	KUNIT_EXPECT_EQ(test, kfi_mr_unmap((struct kfid_mr *)run->domain), -EINVAL);
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
	run_close(test);
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
