// SPDX-License-Identifier: GPL-2.0
/*
 * kfi_test_hostile.ko: KUnit suite kfi_hostile_caller. A buggy ULP, written
 * in C against include/kfabric/ only, calls the exported kfi_* API with
 * NULL, forged and closed objects, objects of the wrong class, NULL
 * buffers with bytes, lengths and counts that overflow, transfers above
 * max_msg_size, and EQ events and hints whose memory it keeps. Each call
 * must return its documented -errno (never an oops), in process, softirq
 * and atomic context, and leave the objects working: a real message still
 * crosses the kfi_sockets connection afterwards. The guest log is scanned
 * for splats and (debug kernel) KASAN, lockdep, sleep-in-atomic and
 * kmemleak reports.
 */
#include <kunit/test.h>
#include <linux/bvec.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/timer.h>
#include <linux/vmalloc.h>
#include <kfabric/kfabric.h>
#include <kfabric/kfi_provider.h>

#include "hostile_pair.h"

/* What each bad data-path call returned (kept for the checking context). */
struct bad_calls {
	int send_null, recv_null, sendv_sum, sendv_huge, send_big;
	int sendbv_nopage, sendsgl_short, write_null, write_rma_sum;
	int atomic_null, fetch_null, compare_null, inject_null;
	int tsend_null, trecv_null;
};

/*
 * The bad data-path calls, none of which may reach the wire. Only calls
 * that are legal in any context but hard interrupt (no s-reads).
 */
static void bad_data_calls(struct pair *p, struct bad_calls *r)
{
	static char page_buf[64];
	struct kvec sum[2] = {
		{ .iov_base = page_buf, .iov_len = SIZE_MAX / 2 + 1 },
		{ .iov_base = page_buf, .iov_len = SIZE_MAX / 2 + 1 },
	};
	struct kvec huge = { .iov_base = page_buf, .iov_len = (size_t)SSIZE_MAX + 1 };
	struct kvec one = { .iov_base = page_buf, .iov_len = 8 };
	struct bio_vec bv = { .bv_page = NULL, .bv_len = 16, .bv_offset = 0 };
	struct scatterlist sg;
	struct kfi_rma_iov rma[2] = {
		{ .addr = 0, .len = SIZE_MAX, .key = 1 },
		{ .addr = 0, .len = 2, .key = 1 },
	};
	struct kfi_msg_rma wm = {
		.msg = { .iov_type = KFI_KVEC, .msg_iov = &one, .iov_count = 1 },
		.rma_iov = rma,
		.rma_iov_count = 2,
	};
	u64 operand = 1, result = 0;
	struct kfi_ioc null_ioc = { .addr = NULL, .count = 1 };
	struct kfi_ioc ioc = { .addr = &operand, .count = 1 };
	struct kfi_ioc res = { .addr = &result, .count = 1 };
	struct kfi_rma_ioc rioc = { .addr = 0, .count = 1, .key = 1 };
	struct kfi_msg_atomic am = {
		.msg_iov = &null_ioc, .iov_count = 1, .rma_iov = &rioc,
		.rma_iov_count = 1, .datatype = KFI_UINT64, .op = KFI_SUM,
	};
	struct kfi_msg_atomic good_am = am;

	good_am.msg_iov = &ioc;
	sg_init_one(&sg, page_buf, sizeof(page_buf));

	r->send_null = kfi_send(p->cep, NULL, 16, NULL, 0, NULL);
	r->recv_null = kfi_recv(p->sep, NULL, 16, NULL, 0, NULL);
	r->sendv_sum = kfi_sendv(p->cep, sum, NULL, 2, 0, NULL);
	r->sendv_huge = kfi_sendv(p->cep, &huge, NULL, 1, 0, NULL);
	/* Above the endpoint's max_msg_size: refused before any byte is read. */
	r->send_big = kfi_send(p->cep, page_buf, p->dst->ep_attr->max_msg_size + 1,
			       NULL, 0, NULL);
	r->sendbv_nopage = kfi_sendbv(p->cep, &bv, NULL, 1, 0, NULL);
	/* Two entries claimed, the list ends after one. */
	r->sendsgl_short = kfi_sendsgl(p->cep, &sg, NULL, 2, 0, NULL);
	r->write_null = kfi_write(p->cep, NULL, 8, NULL, 0, 0, 1, NULL);
	r->write_rma_sum = kfi_writemsg(p->cep, &wm, 0);
	r->atomic_null = kfi_atomicmsg(p->cep, &am, 0);
	r->fetch_null = kfi_fetch_atomicmsg(p->cep, &good_am, &null_ioc, NULL, 1, 0);
	r->compare_null = kfi_compare_atomicmsg(p->cep, &good_am, &null_ioc, NULL, 1,
						&res, NULL, 1, 0);
	r->inject_null = kfi_inject(p->cep, NULL, 4, 0);
	r->tsend_null = kfi_tsend(p->cep, NULL, 16, NULL, 0, 7, NULL);
	r->trecv_null = kfi_trecv(p->sep, NULL, 16, NULL, 0, 7, 0, NULL);
}

static void expect_bad_calls_refused(struct kunit *test, const struct bad_calls *r)
{
	KUNIT_EXPECT_EQ(test, r->send_null, -EINVAL);
	KUNIT_EXPECT_EQ(test, r->recv_null, -EINVAL);
	KUNIT_EXPECT_EQ(test, r->sendv_sum, -EINVAL);
	KUNIT_EXPECT_EQ(test, r->sendv_huge, -EINVAL);
	KUNIT_EXPECT_EQ(test, r->send_big, -EMSGSIZE);
	KUNIT_EXPECT_EQ(test, r->sendbv_nopage, -EINVAL);
	KUNIT_EXPECT_EQ(test, r->sendsgl_short, -EINVAL);
	KUNIT_EXPECT_EQ(test, r->write_null, -EINVAL);
	KUNIT_EXPECT_EQ(test, r->write_rma_sum, -EINVAL);
	KUNIT_EXPECT_EQ(test, r->atomic_null, -EINVAL);
	KUNIT_EXPECT_EQ(test, r->fetch_null, -EINVAL);
	KUNIT_EXPECT_EQ(test, r->compare_null, -EINVAL);
	KUNIT_EXPECT_EQ(test, r->inject_null, -EINVAL);
	KUNIT_EXPECT_EQ(test, r->tsend_null, -EINVAL);
	KUNIT_EXPECT_EQ(test, r->trecv_null, -EINVAL);
}

/* kfi_send(ep, NULL, 16) and its kin, from process context. */
static void hostile_buffers_process(struct kunit *test)
{
	struct bad_calls r;
	struct pair p;

	KUNIT_ASSERT_EQ(test, pair_open(test, &p), 0);
	KUNIT_EXPECT_GT(test, p.dst->ep_attr->max_msg_size, 0);
	bad_data_calls(&p, &r);
	expect_bad_calls_refused(test, &r);
	pair_still_works(test, &p);
	pair_close(test, &p);
}

static DEFINE_SPINLOCK(atomic_lock);

/* The same with interrupts off under a spinlock. */
static void hostile_buffers_atomic(struct kunit *test)
{
	unsigned long flags;
	struct bad_calls r;
	struct pair p;

	KUNIT_ASSERT_EQ(test, pair_open(test, &p), 0);
	spin_lock_irqsave(&atomic_lock, flags);
	bad_data_calls(&p, &r);
	spin_unlock_irqrestore(&atomic_lock, flags);
	expect_bad_calls_refused(test, &r);
	pair_still_works(test, &p);
	pair_close(test, &p);
}

/* A call of @fn(@arg) from a timer, and whether it ran in softirq context. */
struct softirq_call {
	struct timer_list timer;
	struct completion done;
	void (*fn)(void *arg);
	void *arg;
	bool in_softirq;
};

static void softirq_call_fn(struct timer_list *t)
{
	struct softirq_call *s = timer_container_of(s, t, timer);

	s->in_softirq = in_serving_softirq();
	s->fn(s->arg);
	complete(&s->done);
}

/* Calls @fn(@arg) from a timer; true if it ran in softirq context. */
static bool call_in_softirq(void (*fn)(void *arg), void *arg)
{
	struct softirq_call s = { .fn = fn, .arg = arg };

	init_completion(&s.done);
	timer_setup_on_stack(&s.timer, softirq_call_fn, 0);
	mod_timer(&s.timer, jiffies + 1);
	wait_for_completion(&s.done);
	timer_delete_sync(&s.timer);
	timer_destroy_on_stack(&s.timer);
	return s.in_softirq;
}

/* The bad calls of hostile_buffers_softirq, and what they returned. */
struct softirq_calls {
	struct pair *p;
	struct bad_calls r;
};

static void softirq_calls_fn(void *arg)
{
	struct softirq_calls *s = arg;

	bad_data_calls(s->p, &s->r);
}

/* The same from a timer, in softirq context. */
static void hostile_buffers_softirq(struct kunit *test)
{
	struct softirq_calls s = {};
	struct pair p;

	KUNIT_ASSERT_EQ(test, pair_open(test, &p), 0);
	s.p = &p;
	KUNIT_EXPECT_TRUE(test, call_in_softirq(softirq_calls_fn, &s));
	expect_bad_calls_refused(test, &s.r);
	pair_still_works(test, &p);
	pair_close(test, &p);
}

/* A receive posted from a timer, and what it found on the CQ there. */
struct softirq_held {
	struct pair *p;
	void *buf;
	size_t len;
	int recv, rx;
};

static void softirq_held_fn(void *arg)
{
	struct softirq_held *s = arg;
	struct kfi_cq_data_entry e;

	s->recv = kfi_recv(s->p->sep, s->buf, s->len, NULL, 0, s->buf);
	s->rx = kfi_cq_read(s->p->scq, &e, 1);
}

/*
 * A receive posted from softirq that takes a large message the peer sent
 * before any receive was posted (held for it, up to unexpected_bytes_max)
 * is not copied there: the post returns, and the provider's work copies
 * and reports it in process context. The message arrives whole.
 */
static void hostile_softirq_post_leaves_large_copies(struct kunit *test)
{
	const size_t len = 1 << 20;
	struct softirq_held s = {};
	struct kfi_cq_data_entry ce;
	u8 *src, *dst;
	struct pair p;
	size_t i;

	KUNIT_ASSERT_EQ(test, pair_open(test, &p), 0);
	src = vmalloc(len);
	dst = vzalloc(len);
	if (!src || !dst) {
		vfree(src);
		vfree(dst);
		pair_close(test, &p);
		KUNIT_FAIL(test, "no memory for the buffers");
		return;
	}
	for (i = 0; i < len; i++)
		src[i] = (u8)(i * 7 + i / 4096);
	KUNIT_EXPECT_EQ(test, kfi_send(p.cep, src, len, NULL, 0, src), 0);
	KUNIT_EXPECT_EQ(test, kfi_cq_sread(p.ccq, &ce, 1, NULL, WAIT_MS), 1);
	/* Past its wait in the socket for a receive (recv_wait_ms): held. */
	msleep(300);
	s.p = &p;
	s.buf = dst;
	s.len = len;
	KUNIT_EXPECT_TRUE(test, call_in_softirq(softirq_held_fn, &s));
	KUNIT_EXPECT_EQ(test, s.recv, 0);
	/* Not reported from within the softirq's post. */
	KUNIT_EXPECT_EQ(test, s.rx, -EAGAIN);
	KUNIT_EXPECT_EQ(test, kfi_cq_sread(p.scq, &ce, 1, NULL, WAIT_MS), 1);
	KUNIT_EXPECT_PTR_EQ(test, ce.op_context, (void *)dst);
	KUNIT_EXPECT_EQ(test, ce.len, len);
	KUNIT_EXPECT_TRUE(test, memcmp(dst, src, len) == 0);
	vfree(src);
	vfree(dst);
	pair_still_works(test, &p);
	pair_close(test, &p);
}

/*
 * NULL objects, forged headers (right class, never opened) and objects of
 * the wrong class, for every kind of exported call.
 */
static void hostile_objects(struct kunit *test)
{
	struct kfid forged_ep_fid = { .fclass = KFI_CLASS_EP };
	struct kfid_ep forged_ep = { .fid = { .fclass = KFI_CLASS_EP } };
	struct kfid_cq forged_cq = { .fid = { .fclass = KFI_CLASS_CQ } };
	struct kfid_eq forged_eq = { .fid = { .fclass = KFI_CLASS_EQ } };
	struct kfid_cntr forged_cntr = { .fid = { .fclass = KFI_CLASS_CNTR } };
	struct kfi_cq_attr cq_attr = { .size = 4 };
	struct kfi_eq_attr eq_attr = { .size = 4 };
	struct kfi_cntr_attr cntr_attr = {};
	struct kfi_av_attr av_attr = {};
	struct kfi_cq_data_entry ce;
	struct kfi_cq_err_entry cerr;
	struct kfi_eq_err_entry eerr;
	struct kfid_cq *cq = NULL;
	struct kfid_eq *eq = NULL;
	struct kfid_cntr *cntr = NULL;
	struct kfid_av *av = NULL;
	struct kfid_mr *mr = NULL;
	struct kfid_ep *ep = NULL;
	char buf[8], name[64];
	size_t len = sizeof(name), count = 0;
	kfi_addr_t addr = 0;
	u32 ev;
	struct pair p;

	KUNIT_ASSERT_EQ(test, pair_open(test, &p), 0);

	/* NULL everything. */
	KUNIT_EXPECT_EQ(test, kfi_close(NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_control(NULL, 0, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_fabric(NULL, NULL, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_domain(NULL, p.src, NULL, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_endpoint(p.domain, NULL, &ep, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_endpoint(p.domain, p.dst, NULL, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_passive_ep(NULL, p.src, NULL, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cq_open(p.domain, NULL, &cq, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_eq_open(p.fabric, NULL, &eq, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cntr_open(NULL, &cntr_attr, &cntr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_av_open(NULL, &av_attr, &av, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_reg(p.domain, NULL, 8, KFI_REMOTE_WRITE, 0, 0, 0,
					 &mr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_reg(p.domain, buf, 8, KFI_REMOTE_WRITE, 0, 0, 0,
					 NULL, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_ep_bind(NULL, &p.ccq->fid, KFI_TRANSMIT), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_ep_bind(p.cep, NULL, KFI_TRANSMIT), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_enable(NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cancel(NULL, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_getname(NULL, name, &len), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_getname(&p.cep->fid, name, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_getpeer(NULL, name, &len), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_listen(NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_connect(NULL, NULL, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_accept(NULL, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_reject(NULL, NULL, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_shutdown(NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_av_insert(NULL, name, 1, &addr, 0, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_av_remove(NULL, &addr, 1, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_av_lookup(NULL, 0, name, &len), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_sendmsg(p.cep, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_readmsg(p.cep, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_tsendmsg(p.cep, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_atomicmsg(p.cep, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_atomicvalid(p.cep, KFI_UINT64, KFI_SUM, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cq_read(NULL, &ce, 1), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cq_read(p.ccq, NULL, 1), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cq_read(p.ccq, &ce, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cq_readerr(p.ccq, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cq_sread(NULL, &ce, 1, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cq_signal(NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_eq_read(NULL, &ev, buf, sizeof(buf), 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_eq_read(p.eq, NULL, buf, sizeof(buf), 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_eq_readerr(p.eq, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_eq_write(NULL, KFI_CONNECTED, buf, 1, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_eq_sread(NULL, &ev, buf, sizeof(buf), 0, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cntr_add(NULL, 1), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cntr_wait(NULL, 1, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cntr_read(NULL), 0);
	KUNIT_EXPECT_EQ(test, kfi_util_cq_write(NULL, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_util_eq_write_err(NULL, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_util_eq_write_cm(NULL, KFI_CONNREQ, buf, 1), -EINVAL);

	/* Forged headers: the right class, never opened. */
	KUNIT_EXPECT_EQ(test, kfi_close(&forged_ep_fid), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_enable(&forged_ep), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_send(&forged_ep, buf, 1, NULL, 0, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cq_read(&forged_cq, &ce, 1), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_eq_read(&forged_eq, &ev, buf, sizeof(buf), 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cntr_add(&forged_cntr, 1), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_ep_bind(p.cep, &forged_cq.fid, KFI_TRANSMIT), -EINVAL);

	/* The wrong class. */
	KUNIT_EXPECT_EQ(test, kfi_send((struct kfid_ep *)p.ccq, buf, 1, NULL, 0, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cq_read((struct kfid_cq *)p.eq, &ce, 1), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cq_readerr((struct kfid_cq *)p.cep, &cerr, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_eq_readerr((struct kfid_eq *)p.ccq, &eerr, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_listen((struct kfid_pep *)p.cep), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_domain((struct kfid_fabric *)p.domain, p.src, NULL, NULL),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_cq_open((struct kfid_domain *)p.fabric, &cq_attr, &cq, NULL),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_eq_open((struct kfid_fabric *)p.domain, &eq_attr, &eq, NULL),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_atomicvalid((struct kfid_ep *)p.pep, KFI_UINT64, KFI_SUM,
					      &count), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_util_eq_write_cm((struct kfid_eq *)p.ccq, KFI_SHUTDOWN,
						   buf, 0), -EINVAL);

	/* Counts, sizes and flags out of range. */
	cq_attr.size = 0;
	KUNIT_EXPECT_EQ(test, kfi_cq_open(p.domain, &cq_attr, &cq, NULL), -EINVAL);
	cq_attr.size = SIZE_MAX;
	KUNIT_EXPECT_EQ(test, kfi_cq_open(p.domain, &cq_attr, &cq, NULL), -EINVAL);
	eq_attr.size = SIZE_MAX;
	KUNIT_EXPECT_EQ(test, kfi_eq_open(p.fabric, &eq_attr, &eq, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_eq_write(p.eq, KFI_CONNECTED, buf, SIZE_MAX, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_sendmsg(p.cep, NULL, 1ULL << 63), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_atomicvalid(p.cep, 1000, KFI_SUM, &count), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_atomicvalid(p.cep, KFI_UINT64, 1000, &count), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_getinfo(KFI_API_VERSION + (1 << 16), NULL, NULL, 0, NULL,
					  &p.src), -EINVAL);
	KUNIT_EXPECT_PTR_EQ(test, cq, NULL);
	KUNIT_EXPECT_PTR_EQ(test, eq, NULL);
	KUNIT_EXPECT_PTR_EQ(test, cntr, NULL);
	KUNIT_EXPECT_PTR_EQ(test, av, NULL);
	KUNIT_EXPECT_PTR_EQ(test, mr, NULL);
	KUNIT_EXPECT_PTR_EQ(test, ep, NULL);

	/*
	 * An AV takes at most 65536 addresses in its life: a larger insert
	 * is -ENOSPC before an address is read; a count above INT_MAX, which
	 * the returned count could not say, is -EINVAL.
	 */
	av_attr.type = KFI_AV_TABLE;
	av_attr.count = 4;
	KUNIT_ASSERT_EQ(test, kfi_av_open(p.domain, &av_attr, &av, NULL), 0);
	{
		kfi_addr_t *many = kvmalloc_array((1 << 16) + 1, sizeof(*many), GFP_KERNEL);

		KUNIT_ASSERT_NOT_NULL(test, many);
		KUNIT_EXPECT_EQ(test, kfi_av_insert(av, name, (1 << 16) + 1, many, 0, NULL),
				-ENOSPC);
		KUNIT_EXPECT_EQ(test, kfi_av_insert(av, name, (size_t)INT_MAX + 1, many, 0,
						    NULL), -EINVAL);
		kvfree(many);
	}
	KUNIT_EXPECT_EQ(test, kfi_close(&av->fid), 0);

	pair_still_works(test, &p);
	pair_close(test, &p);
}

/* Memory registration of lists with NULL or overflowing buffers. */
static void hostile_registration(struct kunit *test)
{
	static char region[64];
	struct kvec sum[2] = {
		{ .iov_base = region, .iov_len = SIZE_MAX },
		{ .iov_base = region, .iov_len = 2 },
	};
	struct kvec null_iov = { .iov_base = NULL, .iov_len = 16 };
	struct kvec empty = { .iov_base = region, .iov_len = 0 };
	struct bio_vec bv = { .bv_page = NULL, .bv_len = 64 };
	struct kfid_mr *mr = NULL;
	struct pair p;

	KUNIT_ASSERT_EQ(test, pair_open(test, &p), 0);
	KUNIT_EXPECT_EQ(test, kfi_mr_regv(p.domain, &null_iov, 1, KFI_REMOTE_WRITE, 0, 0, 0,
					  &mr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_regv(p.domain, sum, 2, KFI_REMOTE_WRITE, 0, 0, 0,
					  &mr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_regv(p.domain, &empty, 1, KFI_REMOTE_WRITE, 0, 0, 0,
					  &mr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_regbv(p.domain, &bv, 1, KFI_REMOTE_WRITE, 0, 0, 0,
					   &mr, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_mr_reg(p.domain, region, sizeof(region), 1ULL << 62, 0, 0,
					 0, &mr, NULL), -EINVAL);
	KUNIT_EXPECT_PTR_EQ(test, mr, NULL);
	/* A good registration still works and closes. */
	KUNIT_EXPECT_EQ(test, kfi_mr_reg(p.domain, region, sizeof(region), KFI_REMOTE_WRITE,
					 0, 0, 0, &mr, NULL), 0);
	if (mr)
		KUNIT_EXPECT_EQ(test, kfi_close(&mr->fid), 0);
	pair_close(test, &p);
}

/*
 * A ULP's own CONNREQ events carry an info the EQ must never free: one on
 * the stack, written and left queued at close, and one the ULP allocated
 * and frees itself after reading it (PEEK first, then the real read).
 */
static void hostile_eq_connreq_ownership(struct kunit *test)
{
	struct kfi_eq_attr eq_attr = { .size = 8 };
	struct kfi_info stack_info = {};
	struct kfi_eq_cm_entry e = { .info = &stack_info };
	struct kfi_eq_cm_entry got = {};
	struct kfid_fabric *fabric = NULL;
	struct kfid_eq *eq = NULL;
	struct kfi_info *mine;
	struct pair p;
	u32 ev = 0;

	KUNIT_ASSERT_EQ(test, pair_open(test, &p), 0);
	fabric = p.fabric;
	KUNIT_ASSERT_EQ(test, kfi_eq_open(fabric, &eq_attr, &eq, NULL), 0);
	/* Queued and never read: the close frees nothing of the writer's. */
	KUNIT_EXPECT_EQ(test, kfi_eq_write(eq, KFI_CONNREQ, &e, sizeof(e), 0), sizeof(e));
	mine = kfi_allocinfo();
	KUNIT_ASSERT_NOT_NULL(test, mine);
	e.info = mine;
	KUNIT_EXPECT_EQ(test, kfi_eq_write(eq, KFI_CONNREQ, &e, sizeof(e), 0), sizeof(e));
	/* The stack one first; then the allocated one, peeked and read. */
	KUNIT_EXPECT_EQ(test, kfi_eq_read(eq, &ev, &got, sizeof(got), 0), sizeof(got));
	KUNIT_EXPECT_PTR_EQ(test, got.info, &stack_info);
	KUNIT_EXPECT_EQ(test, kfi_eq_read(eq, &ev, &got, sizeof(got), KFI_PEEK), sizeof(got));
	KUNIT_EXPECT_PTR_EQ(test, got.info, mine);
	KUNIT_EXPECT_EQ(test, kfi_eq_read(eq, &ev, &got, sizeof(got), 0), sizeof(got));
	KUNIT_EXPECT_PTR_EQ(test, got.info, mine);
	KUNIT_EXPECT_EQ(test, ev, KFI_CONNREQ);
	/* Again on the stack, left queued at close. */
	e.info = &stack_info;
	KUNIT_EXPECT_EQ(test, kfi_eq_write(eq, KFI_CONNREQ, &e, sizeof(e), 0), sizeof(e));
	KUNIT_EXPECT_EQ(test, kfi_close(&eq->fid), 0);
	/* Ours to free, exactly once. */
	kfi_freeinfo(mine);
	pair_close(test, &p);
}

/*
 * A provider's CONNREQ left queued when the EQ closes is freed with the
 * EQ (kmemleak on the debug kernel reports it otherwise).
 */
static void hostile_eq_closed_with_request(struct kunit *test)
{
	struct kfi_eq_attr eq_attr = { .size = 8 };
	struct kfid_eq *eq2 = NULL;
	struct kfid_ep *ep2 = NULL;
	struct {
		struct kfi_eq_cm_entry e;
		u8 data[64];
	} ev;
	u32 type = 0;
	struct pair p;
	int i;

	KUNIT_ASSERT_EQ(test, pair_open(test, &p), 0);
	KUNIT_ASSERT_EQ(test, kfi_eq_open(p.fabric, &eq_attr, &eq2, NULL), 0);
	KUNIT_ASSERT_EQ(test, kfi_endpoint(p.domain, p.dst, &ep2, NULL), 0);
	KUNIT_EXPECT_EQ(test, kfi_ep_bind(ep2, &p.ccq->fid, KFI_TRANSMIT | KFI_RECV), 0);
	KUNIT_EXPECT_EQ(test, kfi_ep_bind(ep2, &eq2->fid, 0), 0);
	KUNIT_EXPECT_EQ(test, kfi_enable(ep2), 0);
	KUNIT_EXPECT_EQ(test, kfi_connect(ep2, NULL, NULL, 0), 0);
	/* Wait until the request is queued on the listener's EQ, peek at it. */
	for (i = 0; i < WAIT_MS / 10; i++) {
		if (kfi_eq_read(p.eq, &type, &ev, sizeof(ev), KFI_PEEK) > 0)
			break;
		msleep(10);
	}
	KUNIT_EXPECT_EQ(test, type, KFI_CONNREQ);
	/* Reject it, leaving its info queued: the EQ's close frees it. */
	if (type == KFI_CONNREQ)
		KUNIT_EXPECT_EQ(test, kfi_reject(p.pep, ev.e.info->handle, NULL, 0), 0);
	KUNIT_EXPECT_EQ(test, kfi_close(&ep2->fid), 0);
	KUNIT_EXPECT_EQ(test, kfi_close(&p.pep->fid), 0);
	p.pep = NULL;
	KUNIT_EXPECT_EQ(test, kfi_close(&eq2->fid), 0);
	pair_close(test, &p);
}

/* Hints whose strings and addresses the caller keeps. */
static void hostile_hints_stay_the_callers(struct kunit *test)
{
	static char addr[16] = { 2 };	/* AF_INET, rest zero */
	struct kfi_info *hints, *list = NULL, *copy;

	hints = kfi_allocinfo();
	KUNIT_ASSERT_NOT_NULL(test, hints);
	hints->fabric_attr->prov_name = "sockets";
	hints->fabric_attr->name = "tcp";
	hints->domain_attr->name = "kernel";
	hints->src_addr = addr;
	hints->src_addrlen = sizeof(addr);
	KUNIT_EXPECT_EQ(test, kfi_getinfo(KFI_API_VERSION, "127.0.0.1", PORT, 0, hints,
					  &list), 0);
	/* Replacing a field the entry owns with one we own: both survive. */
	copy = kfi_dupinfo(hints);
	KUNIT_ASSERT_NOT_NULL(test, copy);
	KUNIT_EXPECT_STREQ(test, copy->fabric_attr->prov_name, "sockets");
	KUNIT_EXPECT_PTR_NE(test, copy->fabric_attr->prov_name, hints->fabric_attr->prov_name);
	copy->fabric_attr->prov_name = "literal";
	kfi_freeinfo(copy);
	/* An entry of the caller's own, without attributes: a full copy. */
	{
		struct kfi_info bare = { .caps = KFI_MSG };

		copy = kfi_dupinfo(&bare);
		KUNIT_ASSERT_NOT_NULL(test, copy);
		KUNIT_EXPECT_EQ(test, copy->caps, (u64)KFI_MSG);
		KUNIT_EXPECT_NOT_NULL(test, copy->fabric_attr);
		KUNIT_EXPECT_NULL(test, copy->fabric_attr->prov_name);
		kfi_freeinfo(copy);
	}
	/* kfi_info_set copies; setting again frees the old copy. */
	KUNIT_EXPECT_EQ(test, kfi_info_set(hints, KFI_INFO_DOMAIN_NAME, "owned", 0), 0);
	KUNIT_EXPECT_STREQ(test, hints->domain_attr->name, "owned");
	KUNIT_EXPECT_EQ(test, kfi_info_set(hints, KFI_INFO_DOMAIN_NAME, "again", 0), 0);
	KUNIT_EXPECT_EQ(test, kfi_info_set(hints, KFI_INFO_SRC_ADDR, addr, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_info_set(hints, KFI_INFO_SRC_ADDR, addr, 4096), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_info_set(hints, KFI_INFO_FIELD_LAST, "x", 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_info_set(NULL, KFI_INFO_PROV_NAME, "x", 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_info_set(hints, KFI_INFO_DEST_ADDR, addr, sizeof(addr)), 0);
	KUNIT_EXPECT_EQ(test, hints->dest_addrlen, sizeof(addr));
	KUNIT_EXPECT_EQ(test, kfi_info_set(hints, KFI_INFO_DEST_ADDR, NULL, 0), 0);
	KUNIT_EXPECT_NULL(test, hints->dest_addr);
	KUNIT_EXPECT_EQ(test, hints->dest_addrlen, 0);
	kfi_freeinfo(hints);
	kfi_freeinfo(list);
	/* The literals are untouched. */
	KUNIT_EXPECT_EQ(test, addr[0], 2);
}

/* kfi_enable() says which bound object is missing, and enables once bound. */
static void hostile_enable_says_what_is_missing(struct kunit *test)
{
	struct kfid_ep *ep = NULL;
	struct pair p;

	KUNIT_ASSERT_EQ(test, pair_open(test, &p), 0);
	KUNIT_ASSERT_EQ(test, kfi_endpoint(p.domain, p.dst, &ep, NULL), 0);
	KUNIT_EXPECT_EQ(test, kfi_enable(ep), -KFI_ENOCQ);
	KUNIT_EXPECT_EQ(test, kfi_ep_bind(ep, &p.ccq->fid, KFI_TRANSMIT), 0);
	KUNIT_EXPECT_EQ(test, kfi_enable(ep), -KFI_ENOCQ);
	KUNIT_EXPECT_EQ(test, kfi_ep_bind(ep, &p.ccq->fid, KFI_RECV), 0);
	KUNIT_EXPECT_EQ(test, kfi_enable(ep), -KFI_ENOEQ);
	KUNIT_EXPECT_EQ(test, kfi_ep_bind(ep, &p.eq->fid, 0), 0);
	KUNIT_EXPECT_EQ(test, kfi_enable(ep), 0);
	KUNIT_EXPECT_STREQ(test, kfi_strerror(-KFI_ENOCQ), "no completion queue bound");
	KUNIT_EXPECT_STREQ(test, kfi_strerror(-KFI_ENOEQ), "no event queue bound");
	KUNIT_EXPECT_EQ(test, kfi_close(&ep->fid), 0);
	pair_close(test, &p);
}

/*
 * The calls off the data path refuse an object closed already (-EINVAL)
 * before they read it: a double teardown (close, then shutdown) is a
 * clear error, not a call into a freed endpoint. Nothing is opened
 * between a close and the calls, so no new object can take the address.
 */
static void hostile_closed_objects_are_einval(struct kunit *test)
{
	struct kfi_av_attr av_attr = { .type = KFI_AV_TABLE, .count = 4 };
	struct kfid_pep *pep = NULL;
	struct kfid_ep *ep = NULL;
	struct kfid_av *av = NULL;
	kfi_addr_t addr = 0;
	u8 name[32] = {};
	size_t len = sizeof(name);
	struct pair p;

	KUNIT_ASSERT_EQ(test, pair_open(test, &p), 0);
	KUNIT_ASSERT_EQ(test, kfi_endpoint(p.domain, p.dst, &ep, NULL), 0);
	KUNIT_ASSERT_EQ(test, kfi_close(&ep->fid), 0);
	KUNIT_EXPECT_EQ(test, kfi_enable(ep), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_connect(ep, NULL, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_accept(ep, NULL, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_getpeer(ep, name, &len), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_shutdown(ep, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_close(&ep->fid), -EINVAL);

	KUNIT_ASSERT_EQ(test, kfi_passive_ep(p.fabric, p.src, &pep, NULL), 0);
	KUNIT_ASSERT_EQ(test, kfi_close(&pep->fid), 0);
	KUNIT_EXPECT_EQ(test, kfi_listen(pep), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_reject(pep, NULL, NULL, 0), -EINVAL);

	KUNIT_ASSERT_EQ(test, kfi_av_open(p.domain, &av_attr, &av, NULL), 0);
	KUNIT_ASSERT_EQ(test, kfi_close(&av->fid), 0);
	KUNIT_EXPECT_EQ(test, kfi_av_insert(av, name, 1, &addr, 0, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_av_remove(av, &addr, 1, 0), -EINVAL);
	len = sizeof(name);
	KUNIT_EXPECT_EQ(test, kfi_av_lookup(av, addr, name, &len), -EINVAL);

	pair_still_works(test, &p);
	pair_close(test, &p);
}

/* Error texts: every code distinct from an I/O error, and KFI_EAVAIL. */
static void hostile_error_texts(struct kunit *test)
{
	KUNIT_EXPECT_STRNEQ(test, kfi_strerror(-KFI_EAVAIL), kfi_strerror(-EIO));
	KUNIT_EXPECT_STRNEQ(test, kfi_strerror(-ENOKEY), "unknown error");
	KUNIT_EXPECT_STRNEQ(test, kfi_strerror(-ERANGE), "unknown error");
	KUNIT_EXPECT_STRNEQ(test, kfi_strerror(-E2BIG), "unknown error");
	KUNIT_EXPECT_STRNEQ(test, kfi_strerror(-ENOTCONN), "unknown error");
	KUNIT_EXPECT_STREQ(test, kfi_strerror(INT_MIN), "unknown error");
}

static struct kunit_case kfi_hostile_caller_cases[] = {
	KUNIT_CASE(hostile_buffers_process),
	KUNIT_CASE(hostile_buffers_atomic),
	KUNIT_CASE(hostile_buffers_softirq),
	KUNIT_CASE(hostile_softirq_post_leaves_large_copies),
	KUNIT_CASE(hostile_objects),
	KUNIT_CASE(hostile_registration),
	KUNIT_CASE(hostile_eq_connreq_ownership),
	KUNIT_CASE(hostile_eq_closed_with_request),
	KUNIT_CASE(hostile_hints_stay_the_callers),
	KUNIT_CASE(hostile_enable_says_what_is_missing),
	KUNIT_CASE(hostile_closed_objects_are_einval),
	KUNIT_CASE(hostile_error_texts),
	{}
};

static struct kunit_suite kfi_hostile_caller_suite = {
	.name = "kfi_hostile_caller",
	.test_cases = kfi_hostile_caller_cases,
};
kunit_test_suite(kfi_hostile_caller_suite);

MODULE_DESCRIPTION("KUnit tests of kfabric against a buggy C caller");
MODULE_LICENSE("GPL");
