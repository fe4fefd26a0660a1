// SPDX-License-Identifier: GPL-2.0
/*
 * kfi_test_c.ko: KUnit suite kfi_c_abi. Uses kfabric the way C code does,
 * through include/kfabric/ only: a small provider written in C (one
 * endpoint delivers its sends to its own posted receive) and a ULP that
 * discovers it with kfi_getinfo(), opens the object tree and moves data
 * with the simple and vector spellings (kfi_send, kfi_sendv, kfi_recvbv,
 * kfi_senddata, kfi_inject, ...).
 */
#include <kunit/test.h>
#include <linux/bvec.h>
#include <linux/completion.h>
#include <linux/module.h>
#include <linux/timer.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <kfabric/kfabric.h>
#include <kfabric/kfi_provider.h>

/* ---- the provider ---- */

struct cp_fabric {
	struct kfid_fabric fabric;
};

struct cp_domain {
	struct kfid_domain domain;
};

struct cp_ep {
	struct kfid_ep ep;
	spinlock_t lock;		/* protects the fields below */
	struct kfid_cq *tx, *rx;
	void *rbuf;
	size_t rlen;
	void *rctx;
	bool enabled;
};

static int cp_free(struct kfid *fid)
{
	kfree(fid);	/* every object here starts with its kfid */
	return 0;
}

static const struct kfi_ops cp_free_ops = {
	.size = sizeof(struct kfi_ops),
	.close = cp_free,
};

static int cp_ep_bind(struct kfid *fid, struct kfid *bfid, u64 flags)
{
	struct cp_ep *e = container_of(fid, struct cp_ep, ep.fid);

	if (bfid->fclass != KFI_CLASS_CQ)
		return 0;
	spin_lock_bh(&e->lock);
	if (flags & KFI_TRANSMIT)
		e->tx = container_of(bfid, struct kfid_cq, fid);
	if (flags & KFI_RECV)
		e->rx = container_of(bfid, struct kfid_cq, fid);
	spin_unlock_bh(&e->lock);
	return 0;
}

static int cp_ep_control(struct kfid *fid, int command, void *arg)
{
	struct cp_ep *e = container_of(fid, struct cp_ep, ep.fid);

	if (command != KFI_ENABLE)
		return -ENOSYS;
	e->enabled = e->tx && e->rx;
	return e->enabled ? 0 : -EINVAL;
}

static const struct kfi_ops cp_ep_ops = {
	.size = sizeof(struct kfi_ops),
	.close = cp_free,
	.bind = cp_ep_bind,
	.control = cp_ep_control,
};

/* The one receive buffer of a message (kvec or bio_vec, one entry). */
static int cp_one_buffer(const struct kfi_msg *msg, void **buf, size_t *len)
{
	if (msg->iov_count != 1)
		return -EINVAL;
	switch (msg->iov_type) {
	case KFI_KVEC:
		*buf = msg->msg_iov[0].iov_base;
		*len = msg->msg_iov[0].iov_len;
		return 0;
	case KFI_BVEC:
		*buf = page_address(msg->msg_bvec[0].bv_page) +
		       msg->msg_bvec[0].bv_offset;
		*len = msg->msg_bvec[0].bv_len;
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

static int cp_recvmsg(struct kfid_ep *ep, const struct kfi_msg *msg, u64 flags)
{
	struct cp_ep *e = container_of(ep, struct cp_ep, ep);
	void *buf;
	size_t len;
	int ret = cp_one_buffer(msg, &buf, &len);

	if (ret)
		return ret;
	spin_lock_bh(&e->lock);
	if (e->rbuf) {
		ret = -EAGAIN;
	} else {
		e->rbuf = buf;
		e->rlen = len;
		e->rctx = msg->context;
	}
	spin_unlock_bh(&e->lock);
	return ret;
}

static int cp_sendmsg(struct kfid_ep *ep, const struct kfi_msg *msg, u64 flags)
{
	struct cp_ep *e = container_of(ep, struct cp_ep, ep);
	struct kfi_cq_tagged_entry rx = {}, tx = {};
	size_t i, off = 0;
	void *rbuf;

	if (msg->iov_type != KFI_KVEC)
		return -EOPNOTSUPP;
	spin_lock_bh(&e->lock);
	if (!e->enabled || !e->rbuf) {
		spin_unlock_bh(&e->lock);
		return e->enabled ? -EAGAIN : -EINVAL;
	}
	rbuf = e->rbuf;
	rx.op_context = e->rctx;
	for (i = 0; i < msg->iov_count; i++) {
		size_t n = min(msg->msg_iov[i].iov_len, e->rlen - off);

		memcpy(rbuf + off, msg->msg_iov[i].iov_base, n);
		off += n;
	}
	e->rbuf = NULL;
	spin_unlock_bh(&e->lock);

	rx.flags = KFI_RECV | KFI_MSG | (flags & KFI_REMOTE_CQ_DATA);
	rx.len = off;
	rx.buf = rbuf;
	rx.data = flags & KFI_REMOTE_CQ_DATA ? msg->data : 0;
	kfi_util_cq_write(e->rx, &rx);
	if (!(flags & KFI_INJECT)) {
		tx.op_context = msg->context;
		tx.flags = KFI_SEND | KFI_MSG;
		tx.len = off;
		kfi_util_cq_write(e->tx, &tx);
	}
	return 0;
}

static const struct kfi_ops_msg cp_msg_ops = {
	.size = sizeof(struct kfi_ops_msg),
	.recvmsg = cp_recvmsg,
	.sendmsg = cp_sendmsg,
};

static int cp_ep_open(struct kfid_domain *domain, struct kfi_info *info,
		      struct kfid_ep **ep, void *context)
{
	struct cp_ep *e = kzalloc(sizeof(*e), GFP_KERNEL);

	if (!e)
		return -ENOMEM;
	spin_lock_init(&e->lock);
	e->ep.fid.ops = &cp_ep_ops;
	e->ep.msg = &cp_msg_ops;
	e->ep.caps = KFI_MSG | KFI_SEND | KFI_RECV;
	e->ep.op_flags = KFI_INJECT | KFI_REMOTE_CQ_DATA;
	e->ep.tx_iov_limit = 4;
	e->ep.rx_iov_limit = 1;
	e->ep.inject_size = 32;
	*ep = &e->ep;
	return 0;
}

static const struct kfi_ops_domain cp_domain_ops = {
	.size = sizeof(struct kfi_ops_domain),
	.cq_open = kfi_util_cq_open,
	.endpoint = cp_ep_open,
	.cntr_open = kfi_util_cntr_open,
};

static int cp_domain(struct kfid_fabric *fabric, struct kfi_info *info,
		     struct kfid_domain **domain, void *context)
{
	struct cp_domain *d = kzalloc(sizeof(*d), GFP_KERNEL);

	if (!d)
		return -ENOMEM;
	d->domain.fid.ops = &cp_free_ops;
	d->domain.ops = &cp_domain_ops;
	*domain = &d->domain;
	return 0;
}

static const struct kfi_ops_fabric cp_fabric_ops = {
	.size = sizeof(struct kfi_ops_fabric),
	.domain = cp_domain,
	.eq_open = kfi_util_eq_open,
};

static int cp_fabric(const struct kfi_fabric_attr *attr,
		     struct kfid_fabric **fabric, void *context)
{
	struct cp_fabric *f = kzalloc(sizeof(*f), GFP_KERNEL);

	if (!f)
		return -ENOMEM;
	f->fabric.fid.ops = &cp_free_ops;
	f->fabric.ops = &cp_fabric_ops;
	*fabric = &f->fabric;
	return 0;
}

static int cp_getinfo(u32 version, const char *node, const char *service,
		      u64 flags, const struct kfi_info *hints,
		      struct kfi_info **info)
{
	struct kfi_info *i = kfi_allocinfo();

	if (!i)
		return -ENOMEM;
	i->caps = KFI_MSG | KFI_SEND | KFI_RECV;
	i->ep_attr->type = KFI_EP_RDM;
	if (kfi_info_set(i, KFI_INFO_FABRIC_NAME, "cfab", 0)) {
		kfi_freeinfo(i);
		return -ENOMEM;
	}
	*info = i;
	return 0;
}

static struct kfi_provider cp_provider = {
	.name = "kfi_test_c",
	.version = KFI_VERSION(0, 1),
	.owner = THIS_MODULE,
	.getinfo = cp_getinfo,
	.fabric = cp_fabric,
};

/* ---- the ULP ---- */

struct ulp {
	struct kfi_info *info;
	struct kfid_fabric *fabric;
	struct kfid_domain *domain;
	struct kfid_cq *tx, *rx;
	struct kfid_ep *ep;
};

static void ulp_close(struct kunit *test, struct ulp *u)
{
	if (u->ep)
		KUNIT_EXPECT_EQ(test, kfi_close(&u->ep->fid), 0);
	if (u->tx)
		KUNIT_EXPECT_EQ(test, kfi_close(&u->tx->fid), 0);
	if (u->rx)
		KUNIT_EXPECT_EQ(test, kfi_close(&u->rx->fid), 0);
	if (u->domain)
		KUNIT_EXPECT_EQ(test, kfi_close(&u->domain->fid), 0);
	if (u->fabric)
		KUNIT_EXPECT_EQ(test, kfi_close(&u->fabric->fid), 0);
	kfi_freeinfo(u->info);
	KUNIT_EXPECT_EQ(test, kfi_provider_deregister(&cp_provider), 0);
}

/* Registers the provider and opens everything a ULP needs. */
static int ulp_open(struct kunit *test, struct ulp *u)
{
	struct kfi_cq_attr cq_attr = {
		.size = 8, .format = KFI_CQ_FORMAT_DATA,
	};
	struct kfi_info *hints;
	int ret;

	memset(u, 0, sizeof(*u));
	ret = kfi_provider_register(KFI_API_VERSION, &cp_provider);
	if (ret)
		return ret;
	hints = kfi_allocinfo();
	if (!hints)
		return -ENOMEM;
	/* A literal: hints stay the caller's, kfi_freeinfo() frees none of it. */
	hints->fabric_attr->prov_name = "kfi_test_c";
	ret = kfi_getinfo(KFI_API_VERSION, NULL, NULL, 0, hints, &u->info);
	kfi_freeinfo(hints);
	if (ret)
		return ret;
	ret = kfi_fabric(u->info->fabric_attr, &u->fabric, NULL);
	if (!ret)
		ret = kfi_domain(u->fabric, u->info, &u->domain, NULL);
	if (!ret)
		ret = kfi_cq_open(u->domain, &cq_attr, &u->tx, NULL);
	if (!ret)
		ret = kfi_cq_open(u->domain, &cq_attr, &u->rx, NULL);
	if (!ret)
		ret = kfi_endpoint(u->domain, u->info, &u->ep, NULL);
	if (!ret)
		ret = kfi_ep_bind(u->ep, &u->tx->fid, KFI_TRANSMIT);
	if (!ret)
		ret = kfi_bind(&u->ep->fid, &u->rx->fid, KFI_RECV);
	if (!ret)
		ret = kfi_enable(u->ep);
	return ret;
}

static void c_getinfo_names_the_provider(struct kunit *test)
{
	struct ulp u;

	KUNIT_ASSERT_EQ(test, ulp_open(test, &u), 0);
	KUNIT_EXPECT_NULL(test, u.info->next);
	KUNIT_EXPECT_STREQ(test, u.info->fabric_attr->prov_name, "kfi_test_c");
	KUNIT_EXPECT_STREQ(test, u.info->fabric_attr->name, "cfab");
	KUNIT_EXPECT_EQ(test, u.info->fabric_attr->prov_version, KFI_VERSION(0, 1));
	KUNIT_EXPECT_EQ(test, u.info->ep_attr->type, KFI_EP_RDM);
	ulp_close(test, &u);
}

static void c_send_recv_spellings(struct kunit *test)
{
	struct kfi_cq_data_entry e[2];
	char rbuf[32] = {}, hello[] = "hello", world[] = " world";
	struct kvec two[] = {
		{ .iov_base = hello, .iov_len = 5 },
		{ .iov_base = world, .iov_len = 6 },
	};
	struct page *page;
	struct bio_vec bv;
	int rctx, sctx;
	struct ulp u;

	KUNIT_ASSERT_EQ(test, ulp_open(test, &u), 0);

	/* kfi_recv + kfi_send: one completion on each side. */
	KUNIT_EXPECT_EQ(test, kfi_recv(u.ep, rbuf, sizeof(rbuf), NULL, KFI_ADDR_UNSPEC, &rctx), 0);
	KUNIT_EXPECT_EQ(test, kfi_send(u.ep, "abc", 3, NULL, KFI_ADDR_UNSPEC, &sctx), 0);
	KUNIT_EXPECT_EQ(test, kfi_cq_read(u.rx, e, 2), 1);
	KUNIT_EXPECT_PTR_EQ(test, e[0].op_context, (void *)&rctx);
	KUNIT_EXPECT_EQ(test, e[0].len, 3);
	KUNIT_EXPECT_MEMEQ(test, rbuf, "abc", 3);
	KUNIT_EXPECT_EQ(test, kfi_cq_read(u.tx, e, 2), 1);
	KUNIT_EXPECT_PTR_EQ(test, e[0].op_context, (void *)&sctx);

	/* kfi_sendv gathers; kfi_senddata carries remote CQ data. */
	KUNIT_EXPECT_EQ(test, kfi_recv(u.ep, rbuf, sizeof(rbuf), NULL, 0, NULL), 0);
	KUNIT_EXPECT_EQ(test, kfi_sendv(u.ep, two, NULL, 2, 0, NULL), 0);
	KUNIT_EXPECT_EQ(test, kfi_cq_read(u.rx, e, 1), 1);
	KUNIT_EXPECT_EQ(test, e[0].len, 11);
	KUNIT_EXPECT_MEMEQ(test, rbuf, "hello world", 11);
	KUNIT_EXPECT_EQ(test, kfi_recv(u.ep, rbuf, sizeof(rbuf), NULL, 0, NULL), 0);
	KUNIT_EXPECT_EQ(test, kfi_senddata(u.ep, "x", 1, NULL, 0xfeed, 0, NULL), 0);
	KUNIT_EXPECT_EQ(test, kfi_cq_read(u.rx, e, 1), 1);
	KUNIT_EXPECT_EQ(test, e[0].data, 0xfeed);
	KUNIT_EXPECT_TRUE(test, e[0].flags & KFI_REMOTE_CQ_DATA);
	KUNIT_EXPECT_EQ(test, kfi_cq_read(u.tx, e, 2), 2);

	/* kfi_inject: no transmit completion; too large is refused. */
	KUNIT_EXPECT_EQ(test, kfi_recv(u.ep, rbuf, sizeof(rbuf), NULL, 0, NULL), 0);
	KUNIT_EXPECT_EQ(test, kfi_inject(u.ep, "inj", 3, 0), 0);
	KUNIT_EXPECT_EQ(test, kfi_cq_read(u.rx, e, 1), 1);
	KUNIT_EXPECT_EQ(test, kfi_cq_read(u.tx, e, 1), -EAGAIN);
	KUNIT_EXPECT_EQ(test, kfi_inject(u.ep, rbuf, 33, 0), -EINVAL);

	/* kfi_recvbv: a receive into a page, as a block ULP holds it. */
	page = alloc_page(GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, page);
	bvec_set_page(&bv, page, 64, 128);
	KUNIT_EXPECT_EQ(test, kfi_recvbv(u.ep, &bv, NULL, 1, 0, NULL), 0);
	KUNIT_EXPECT_EQ(test, kfi_send(u.ep, "into a page", 11, NULL, 0, NULL), 0);
	KUNIT_EXPECT_EQ(test, kfi_cq_read(u.rx, e, 1), 1);
	KUNIT_EXPECT_MEMEQ(test, page_address(page) + 128, "into a page", 11);
	KUNIT_EXPECT_EQ(test, kfi_cq_read(u.tx, e, 1), 1);
	__free_page(page);

	ulp_close(test, &u);
}

static void c_errors_are_errnos(struct kunit *test)
{
	u64 result = 0;
	struct scatterlist sg;
	struct bio_vec bv;
	struct ulp u;

	KUNIT_ASSERT_EQ(test, ulp_open(test, &u), 0);
	KUNIT_EXPECT_EQ(test, kfi_send(NULL, "a", 1, NULL, 0, NULL), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_write(u.ep, "a", 1, NULL, 0, 0, 1, NULL), -EOPNOTSUPP);
	KUNIT_EXPECT_EQ(test, kfi_tsend(u.ep, "a", 1, NULL, 0, 7, NULL), -EOPNOTSUPP);
	sg_init_one(&sg, &result, sizeof(result));
	bvec_set_virt(&bv, &result, sizeof(result));
	KUNIT_EXPECT_EQ(test, kfi_writebv(u.ep, &bv, NULL, 1, 0, 0, 1, NULL), -EOPNOTSUPP);
	KUNIT_EXPECT_EQ(test, kfi_readsgl(u.ep, &sg, NULL, 1, 0, 0, 1, NULL), -EOPNOTSUPP);
	KUNIT_EXPECT_EQ(test, kfi_bind(&u.tx->fid, &u.rx->fid, 0), -EINVAL);
	KUNIT_EXPECT_EQ(test, kfi_fetch_atomic(u.ep, &result, 1, NULL, &result, NULL, 0, 0, 1,
					       KFI_UINT64, KFI_SUM, NULL), -EOPNOTSUPP);
	/* The fabric cannot close under its domain; the provider cannot go. */
	KUNIT_EXPECT_EQ(test, kfi_close(&u.fabric->fid), -EBUSY);
	KUNIT_EXPECT_EQ(test, kfi_provider_deregister(&cp_provider), -EBUSY);
	KUNIT_EXPECT_STREQ(test, kfi_strerror(-EBUSY), "object in use");
	ulp_close(test, &u);
	/* A provider in a module that does not name it as owner is refused. */
	{
		static struct kfi_provider orphan = {
			.name = "kfi_test_orphan",
			.version = KFI_VERSION(0, 1),
			.getinfo = cp_getinfo,
			.fabric = cp_fabric,
		};

		KUNIT_EXPECT_EQ(test, kfi_provider_register(KFI_API_VERSION, &orphan), -EINVAL);
		KUNIT_EXPECT_EQ(test, kfi_provider_deregister(&orphan), -ENOENT);
	}
}

/* What the timer callback did, in softirq context. */
struct softirq_post {
	struct timer_list timer;
	struct completion done;
	struct ulp *u;
	char rbuf[8];
	int in_softirq, recv, send, rx, tx;
};

static void softirq_post_fn(struct timer_list *t)
{
	struct softirq_post *p = timer_container_of(p, t, timer);
	/* The CQs are of DATA format: an entry of that size. */
	struct kfi_cq_data_entry e;

	p->in_softirq = in_serving_softirq();
	p->recv = kfi_recv(p->u->ep, p->rbuf, sizeof(p->rbuf), NULL, 0, NULL);
	p->send = kfi_send(p->u->ep, "bh", 2, NULL, 0, NULL);
	p->rx = kfi_cq_read(p->u->rx, &e, 1);
	p->tx = kfi_cq_read(p->u->tx, &e, 1);
	complete(&p->done);
}

/*
 * Block-layer completion paths post the next I/O from softirq context: the
 * data path and CQ polling must work there (and, on the debug kernel,
 * DEBUG_ATOMIC_SLEEP reports any sleep on the way).
 */
static void c_post_from_softirq(struct kunit *test)
{
	struct softirq_post p = {};
	struct ulp u;

	KUNIT_ASSERT_EQ(test, ulp_open(test, &u), 0);
	p.u = &u;
	init_completion(&p.done);
	timer_setup_on_stack(&p.timer, softirq_post_fn, 0);
	mod_timer(&p.timer, jiffies + 1);
	wait_for_completion(&p.done);
	timer_delete_sync(&p.timer);
	timer_destroy_on_stack(&p.timer);
	KUNIT_EXPECT_TRUE(test, p.in_softirq);
	KUNIT_EXPECT_EQ(test, p.recv, 0);
	KUNIT_EXPECT_EQ(test, p.send, 0);
	KUNIT_EXPECT_EQ(test, p.rx, 1);
	KUNIT_EXPECT_EQ(test, p.tx, 1);
	KUNIT_EXPECT_MEMEQ(test, p.rbuf, "bh", 2);
	ulp_close(test, &u);
}

/* Waits for the next event on @eq; returns its type or a negative errno. */
static int c_event(struct kfid_eq *eq, struct kfi_eq_cm_entry *e, size_t len)
{
	u32 ev;
	ssize_t n = kfi_eq_sread(eq, &ev, e, len, 20000, 0);

	return n < 0 ? (int)n : (int)ev;
}

/*
 * A C ULP on the sockets provider (loaded by the VM runner): a connection
 * over loopback, then a message sent from a scatterlist into a scatterlist.
 */
static void c_sockets_scatterlists(struct kunit *test)
{
	struct kfi_cq_attr cq_attr = { .size = 8, .format = KFI_CQ_FORMAT_DATA };
	struct kfi_eq_attr eq_attr = { .size = 8 };
	struct {
		struct kfi_eq_cm_entry e;
		u8 data[64];
	} ev;
	struct kfi_info *hints, *src = NULL, *dst = NULL;
	struct kfid_fabric *fabric = NULL;
	struct kfid_domain *domain = NULL;
	struct kfid_eq *eq = NULL;
	struct kfid_cq *ccq = NULL, *scq = NULL;
	struct kfid_pep *pep = NULL;
	struct kfid_ep *cep = NULL, *sep = NULL;
	struct kfi_cq_data_entry ce;
	struct scatterlist ssg[2], rsg;
	char a[] = "scatter", b[] = "list", out[32] = {};

	hints = kfi_allocinfo();
	KUNIT_ASSERT_NOT_NULL(test, hints);
	hints->fabric_attr->prov_name = "sockets";
	KUNIT_ASSERT_EQ(test, kfi_getinfo(KFI_API_VERSION, "127.0.0.1", "7476",
					  KFI_SOURCE, hints, &src), 0);
	KUNIT_ASSERT_EQ(test, kfi_getinfo(KFI_API_VERSION, "127.0.0.1", "7476",
					  0, hints, &dst), 0);
	kfi_freeinfo(hints);
	KUNIT_ASSERT_EQ(test, kfi_fabric(src->fabric_attr, &fabric, NULL), 0);
	KUNIT_ASSERT_EQ(test, kfi_domain(fabric, src, &domain, NULL), 0);
	KUNIT_ASSERT_EQ(test, kfi_eq_open(fabric, &eq_attr, &eq, NULL), 0);
	KUNIT_ASSERT_EQ(test, kfi_cq_open(domain, &cq_attr, &ccq, NULL), 0);
	KUNIT_ASSERT_EQ(test, kfi_cq_open(domain, &cq_attr, &scq, NULL), 0);
	KUNIT_ASSERT_EQ(test, kfi_passive_ep(fabric, src, &pep, NULL), 0);
	KUNIT_ASSERT_EQ(test, kfi_pep_bind(pep, &eq->fid, 0), 0);
	KUNIT_ASSERT_EQ(test, kfi_listen(pep), 0);
	KUNIT_ASSERT_EQ(test, kfi_endpoint(domain, dst, &cep, NULL), 0);
	KUNIT_ASSERT_EQ(test, kfi_ep_bind(cep, &ccq->fid, KFI_TRANSMIT | KFI_RECV), 0);
	KUNIT_ASSERT_EQ(test, kfi_ep_bind(cep, &eq->fid, 0), 0);
	KUNIT_ASSERT_EQ(test, kfi_enable(cep), 0);
	KUNIT_ASSERT_EQ(test, kfi_connect(cep, NULL, NULL, 0), 0);
	KUNIT_ASSERT_EQ(test, c_event(eq, &ev.e, sizeof(ev)), KFI_CONNREQ);
	KUNIT_ASSERT_EQ(test, kfi_endpoint(domain, ev.e.info, &sep, NULL), 0);
	kfi_freeinfo(ev.e.info);
	KUNIT_ASSERT_EQ(test, kfi_ep_bind(sep, &scq->fid, KFI_TRANSMIT | KFI_RECV), 0);
	KUNIT_ASSERT_EQ(test, kfi_ep_bind(sep, &eq->fid, 0), 0);
	KUNIT_ASSERT_EQ(test, kfi_enable(sep), 0);
	KUNIT_ASSERT_EQ(test, kfi_accept(sep, NULL, 0), 0);
	KUNIT_ASSERT_EQ(test, c_event(eq, &ev.e, sizeof(ev)), KFI_CONNECTED);
	KUNIT_ASSERT_EQ(test, c_event(eq, &ev.e, sizeof(ev)), KFI_CONNECTED);

	sg_init_table(ssg, 2);
	sg_set_buf(&ssg[0], a, 7);
	sg_set_buf(&ssg[1], b, 4);
	sg_init_one(&rsg, out, sizeof(out));
	KUNIT_EXPECT_EQ(test, kfi_recvsgl(sep, &rsg, NULL, 1, 0, &rsg), 0);
	KUNIT_EXPECT_EQ(test, kfi_sendsgl(cep, ssg, NULL, 2, 0, ssg), 0);
	KUNIT_EXPECT_EQ(test, kfi_cq_sread(scq, &ce, 1, NULL, 20000), 1);
	KUNIT_EXPECT_EQ(test, ce.len, 11);
	KUNIT_EXPECT_MEMEQ(test, out, "scatterlist", 11);
	KUNIT_EXPECT_EQ(test, kfi_cq_sread(ccq, &ce, 1, NULL, 20000), 1);

	KUNIT_EXPECT_EQ(test, kfi_close(&cep->fid), 0);
	KUNIT_EXPECT_EQ(test, kfi_close(&sep->fid), 0);
	KUNIT_EXPECT_EQ(test, kfi_close(&pep->fid), 0);
	KUNIT_EXPECT_EQ(test, kfi_close(&ccq->fid), 0);
	KUNIT_EXPECT_EQ(test, kfi_close(&scq->fid), 0);
	KUNIT_EXPECT_EQ(test, kfi_close(&eq->fid), 0);
	KUNIT_EXPECT_EQ(test, kfi_close(&domain->fid), 0);
	KUNIT_EXPECT_EQ(test, kfi_close(&fabric->fid), 0);
	kfi_freeinfo(src);
	kfi_freeinfo(dst);
}

static struct kunit_case kfi_c_abi_cases[] = {
	KUNIT_CASE(c_sockets_scatterlists),
	KUNIT_CASE(c_post_from_softirq),
	KUNIT_CASE(c_getinfo_names_the_provider),
	KUNIT_CASE(c_send_recv_spellings),
	KUNIT_CASE(c_errors_are_errnos),
	{}
};

static struct kunit_suite kfi_c_abi_suite = {
	.name = "kfi_c_abi",
	.test_cases = kfi_c_abi_cases,
};
kunit_test_suite(kfi_c_abi_suite);

MODULE_DESCRIPTION("KUnit tests of kfabric's C ABI, from C");
MODULE_LICENSE("GPL");
