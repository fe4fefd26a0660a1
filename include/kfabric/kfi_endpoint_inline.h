/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The simple and vector spellings of the data transfer calls: each builds
 * the message form on the stack and calls the exported message call of
 * kfabric.ko. Included by <kfabric/kfi_endpoint.h>; same contexts and
 * return values as the message calls.
 */
#ifndef _KFABRIC_KFI_ENDPOINT_INLINE_H
#define _KFABRIC_KFI_ENDPOINT_INLINE_H

#include <linux/bvec.h>
#include <linux/scatterlist.h>
#include <linux/uio.h>

/* One buffer list of any type into a message. */
static inline struct kfi_msg kfi__msg(u32 type, const void *list, void **desc,
				      size_t count, kfi_addr_t addr,
				      void *context, u64 data)
{
	struct kfi_msg m = {
		.iov_type = type, .desc = desc, .iov_count = count,
		.addr = addr, .context = context, .data = data,
	};

	m.msg_iov = list;
	return m;
}

/* Messages. */
static inline int kfi_send(struct kfid_ep *ep, const void *buf, size_t len,
			   void *desc, kfi_addr_t dest_addr, void *context)
{
	struct kvec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct kfi_msg m = kfi__msg(KFI_KVEC, &iov, &desc, 1, dest_addr, context, 0);

	return kfi_sendmsg(ep, &m, KFI_COMPLETION);
}

/* kfi_sendto() - kfi_send() to an AV address (the RDM spelling). */
static inline int kfi_sendto(struct kfid_ep *ep, const void *buf, size_t len,
			     void *desc, kfi_addr_t dest_addr, void *context)
{
	return kfi_send(ep, buf, len, desc, dest_addr, context);
}

static inline int kfi_sendv(struct kfid_ep *ep, const struct kvec *iov,
			    void **desc, size_t count, kfi_addr_t dest_addr,
			    void *context)
{
	struct kfi_msg m = kfi__msg(KFI_KVEC, iov, desc, count, dest_addr, context, 0);

	return kfi_sendmsg(ep, &m, KFI_COMPLETION);
}

static inline int kfi_sendbv(struct kfid_ep *ep, const struct bio_vec *bvec,
			     void **desc, size_t count, kfi_addr_t dest_addr,
			     void *context)
{
	struct kfi_msg m = kfi__msg(KFI_BVEC, bvec, desc, count, dest_addr, context, 0);

	return kfi_sendmsg(ep, &m, KFI_COMPLETION);
}

static inline int kfi_sendsgl(struct kfid_ep *ep, struct scatterlist *sgl,
			      void **desc, size_t count, kfi_addr_t dest_addr,
			      void *context)
{
	struct kfi_msg m = kfi__msg(KFI_SGL, sgl, desc, count, dest_addr, context, 0);

	return kfi_sendmsg(ep, &m, KFI_COMPLETION);
}

static inline int kfi_senddata(struct kfid_ep *ep, const void *buf, size_t len,
			       void *desc, u64 data, kfi_addr_t dest_addr,
			       void *context)
{
	struct kvec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct kfi_msg m = kfi__msg(KFI_KVEC, &iov, &desc, 1, dest_addr, context, data);

	return kfi_sendmsg(ep, &m, KFI_COMPLETION | KFI_REMOTE_CQ_DATA);
}

/* kfi_inject() - send a small message; @buf is reusable on return and no
 * completion is generated. */
static inline int kfi_inject(struct kfid_ep *ep, const void *buf, size_t len,
			     kfi_addr_t dest_addr)
{
	struct kvec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct kfi_msg m = kfi__msg(KFI_KVEC, &iov, NULL, 1, dest_addr, NULL, 0);

	return kfi_sendmsg(ep, &m, KFI_INJECT);
}

static inline int kfi_injectdata(struct kfid_ep *ep, const void *buf,
				 size_t len, u64 data, kfi_addr_t dest_addr)
{
	struct kvec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct kfi_msg m = kfi__msg(KFI_KVEC, &iov, NULL, 1, dest_addr, NULL, data);

	return kfi_sendmsg(ep, &m, KFI_INJECT | KFI_REMOTE_CQ_DATA);
}

static inline int kfi_recv(struct kfid_ep *ep, void *buf, size_t len,
			   void *desc, kfi_addr_t src_addr, void *context)
{
	struct kvec iov = { .iov_base = buf, .iov_len = len };
	struct kfi_msg m = kfi__msg(KFI_KVEC, &iov, &desc, 1, src_addr, context, 0);

	return kfi_recvmsg(ep, &m, KFI_COMPLETION);
}

/* kfi_recvfrom() - kfi_recv() from an AV address (the RDM spelling). */
static inline int kfi_recvfrom(struct kfid_ep *ep, void *buf, size_t len,
			       void *desc, kfi_addr_t src_addr, void *context)
{
	return kfi_recv(ep, buf, len, desc, src_addr, context);
}

static inline int kfi_recvv(struct kfid_ep *ep, const struct kvec *iov,
			    void **desc, size_t count, kfi_addr_t src_addr,
			    void *context)
{
	struct kfi_msg m = kfi__msg(KFI_KVEC, iov, desc, count, src_addr, context, 0);

	return kfi_recvmsg(ep, &m, KFI_COMPLETION);
}

static inline int kfi_recvbv(struct kfid_ep *ep, const struct bio_vec *bvec,
			     void **desc, size_t count, kfi_addr_t src_addr,
			     void *context)
{
	struct kfi_msg m = kfi__msg(KFI_BVEC, bvec, desc, count, src_addr, context, 0);

	return kfi_recvmsg(ep, &m, KFI_COMPLETION);
}

static inline int kfi_recvsgl(struct kfid_ep *ep, struct scatterlist *sgl,
			      void **desc, size_t count, kfi_addr_t src_addr,
			      void *context)
{
	struct kfi_msg m = kfi__msg(KFI_SGL, sgl, desc, count, src_addr, context, 0);

	return kfi_recvmsg(ep, &m, KFI_COMPLETION);
}

/* RMA. */
static inline size_t kfi__kvec_len(const struct kvec *iov, size_t count)
{
	size_t len = 0;

	while (count--)
		len += iov[count].iov_len;
	return len;
}

static inline struct kfi_msg_rma kfi__rma(struct kfi_msg m,
					  const struct kfi_rma_iov *rma)
{
	struct kfi_msg_rma r = { .msg = m, .rma_iov = rma, .rma_iov_count = 1 };

	return r;
}

static inline int kfi_read(struct kfid_ep *ep, void *buf, size_t len,
			   void *desc, kfi_addr_t src_addr, u64 addr, u64 key,
			   void *context)
{
	struct kvec iov = { .iov_base = buf, .iov_len = len };
	struct kfi_rma_iov rma = { .addr = addr, .len = len, .key = key };
	struct kfi_msg_rma r = kfi__rma(kfi__msg(KFI_KVEC, &iov, &desc, 1,
						 src_addr, context, 0), &rma);

	return kfi_readmsg(ep, &r, KFI_COMPLETION);
}

static inline int kfi_readv(struct kfid_ep *ep, const struct kvec *iov,
			    void **desc, size_t count, kfi_addr_t src_addr,
			    u64 addr, u64 key, void *context)
{
	struct kfi_rma_iov rma = { .addr = addr, .len = kfi__kvec_len(iov, count), .key = key };
	struct kfi_msg_rma r = kfi__rma(kfi__msg(KFI_KVEC, iov, desc, count,
						 src_addr, context, 0), &rma);

	return kfi_readmsg(ep, &r, KFI_COMPLETION);
}

static inline int kfi_write(struct kfid_ep *ep, const void *buf, size_t len,
			    void *desc, kfi_addr_t dest_addr, u64 addr, u64 key,
			    void *context)
{
	struct kvec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct kfi_rma_iov rma = { .addr = addr, .len = len, .key = key };
	struct kfi_msg_rma r = kfi__rma(kfi__msg(KFI_KVEC, &iov, &desc, 1,
						 dest_addr, context, 0), &rma);

	return kfi_writemsg(ep, &r, KFI_COMPLETION);
}

static inline int kfi_writev(struct kfid_ep *ep, const struct kvec *iov,
			     void **desc, size_t count, kfi_addr_t dest_addr,
			     u64 addr, u64 key, void *context)
{
	struct kfi_rma_iov rma = { .addr = addr, .len = kfi__kvec_len(iov, count), .key = key };
	struct kfi_msg_rma r = kfi__rma(kfi__msg(KFI_KVEC, iov, desc, count,
						 dest_addr, context, 0), &rma);

	return kfi_writemsg(ep, &r, KFI_COMPLETION);
}

static inline int kfi_writedata(struct kfid_ep *ep, const void *buf, size_t len,
				void *desc, u64 data, kfi_addr_t dest_addr,
				u64 addr, u64 key, void *context)
{
	struct kvec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct kfi_rma_iov rma = { .addr = addr, .len = len, .key = key };
	struct kfi_msg_rma r = kfi__rma(kfi__msg(KFI_KVEC, &iov, &desc, 1,
						 dest_addr, context, data), &rma);

	return kfi_writemsg(ep, &r, KFI_COMPLETION | KFI_REMOTE_CQ_DATA);
}

static inline int kfi_inject_write(struct kfid_ep *ep, const void *buf,
				   size_t len, kfi_addr_t dest_addr, u64 addr,
				   u64 key)
{
	struct kvec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct kfi_rma_iov rma = { .addr = addr, .len = len, .key = key };
	struct kfi_msg_rma r = kfi__rma(kfi__msg(KFI_KVEC, &iov, NULL, 1,
						 dest_addr, NULL, 0), &rma);

	return kfi_writemsg(ep, &r, KFI_INJECT);
}

static inline size_t kfi__bvec_len(const struct bio_vec *bv, size_t count)
{
	size_t len = 0;

	while (count--)
		len += bv[count].bv_len;
	return len;
}

static inline size_t kfi__sgl_len(struct scatterlist *sgl, size_t count)
{
	struct scatterlist *sg;
	size_t len = 0;
	int i;

	for_each_sg(sgl, sg, count, i)
		len += sg->length;
	return len;
}

/* RMA from and into pages (bio_vec) and scatterlists: one remote range. */
static inline int kfi_readbv(struct kfid_ep *ep, const struct bio_vec *bvec,
			     void **desc, size_t count, kfi_addr_t src_addr,
			     u64 addr, u64 key, void *context)
{
	struct kfi_rma_iov rma = { .addr = addr, .len = kfi__bvec_len(bvec, count), .key = key };
	struct kfi_msg_rma r = kfi__rma(kfi__msg(KFI_BVEC, bvec, desc, count,
						 src_addr, context, 0), &rma);

	return kfi_readmsg(ep, &r, KFI_COMPLETION);
}

static inline int kfi_writebv(struct kfid_ep *ep, const struct bio_vec *bvec,
			      void **desc, size_t count, kfi_addr_t dest_addr,
			      u64 addr, u64 key, void *context)
{
	struct kfi_rma_iov rma = { .addr = addr, .len = kfi__bvec_len(bvec, count), .key = key };
	struct kfi_msg_rma r = kfi__rma(kfi__msg(KFI_BVEC, bvec, desc, count,
						 dest_addr, context, 0), &rma);

	return kfi_writemsg(ep, &r, KFI_COMPLETION);
}

static inline int kfi_readsgl(struct kfid_ep *ep, struct scatterlist *sgl,
			      void **desc, size_t count, kfi_addr_t src_addr,
			      u64 addr, u64 key, void *context)
{
	struct kfi_rma_iov rma = { .addr = addr, .len = kfi__sgl_len(sgl, count), .key = key };
	struct kfi_msg_rma r = kfi__rma(kfi__msg(KFI_SGL, sgl, desc, count,
						 src_addr, context, 0), &rma);

	return kfi_readmsg(ep, &r, KFI_COMPLETION);
}

static inline int kfi_writesgl(struct kfid_ep *ep, struct scatterlist *sgl,
			       void **desc, size_t count, kfi_addr_t dest_addr,
			       u64 addr, u64 key, void *context)
{
	struct kfi_rma_iov rma = { .addr = addr, .len = kfi__sgl_len(sgl, count), .key = key };
	struct kfi_msg_rma r = kfi__rma(kfi__msg(KFI_SGL, sgl, desc, count,
						 dest_addr, context, 0), &rma);

	return kfi_writemsg(ep, &r, KFI_COMPLETION);
}

/* Tagged messages. */
static inline int kfi_tsend(struct kfid_ep *ep, const void *buf, size_t len,
			    void *desc, kfi_addr_t dest_addr, u64 tag,
			    void *context)
{
	struct kvec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct kfi_msg_tagged t = {
		.msg = kfi__msg(KFI_KVEC, &iov, &desc, 1, dest_addr, context, 0),
		.tag = tag,
	};

	return kfi_tsendmsg(ep, &t, KFI_COMPLETION);
}

static inline int kfi_tsendv(struct kfid_ep *ep, const struct kvec *iov,
			     void **desc, size_t count, kfi_addr_t dest_addr,
			     u64 tag, void *context)
{
	struct kfi_msg_tagged t = {
		.msg = kfi__msg(KFI_KVEC, iov, desc, count, dest_addr, context, 0),
		.tag = tag,
	};

	return kfi_tsendmsg(ep, &t, KFI_COMPLETION);
}

static inline int kfi_tsenddata(struct kfid_ep *ep, const void *buf, size_t len,
				void *desc, u64 data, kfi_addr_t dest_addr,
				u64 tag, void *context)
{
	struct kvec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct kfi_msg_tagged t = {
		.msg = kfi__msg(KFI_KVEC, &iov, &desc, 1, dest_addr, context, data),
		.tag = tag,
	};

	return kfi_tsendmsg(ep, &t, KFI_COMPLETION | KFI_REMOTE_CQ_DATA);
}

static inline int kfi_tinject(struct kfid_ep *ep, const void *buf, size_t len,
			      kfi_addr_t dest_addr, u64 tag)
{
	struct kvec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct kfi_msg_tagged t = {
		.msg = kfi__msg(KFI_KVEC, &iov, NULL, 1, dest_addr, NULL, 0),
		.tag = tag,
	};

	return kfi_tsendmsg(ep, &t, KFI_INJECT);
}

static inline int kfi_trecv(struct kfid_ep *ep, void *buf, size_t len,
			    void *desc, kfi_addr_t src_addr, u64 tag,
			    u64 ignore, void *context)
{
	struct kvec iov = { .iov_base = buf, .iov_len = len };
	struct kfi_msg_tagged t = {
		.msg = kfi__msg(KFI_KVEC, &iov, &desc, 1, src_addr, context, 0),
		.tag = tag, .ignore = ignore,
	};

	return kfi_trecvmsg(ep, &t, KFI_COMPLETION);
}

static inline int kfi_trecvv(struct kfid_ep *ep, const struct kvec *iov,
			     void **desc, size_t count, kfi_addr_t src_addr,
			     u64 tag, u64 ignore, void *context)
{
	struct kfi_msg_tagged t = {
		.msg = kfi__msg(KFI_KVEC, iov, desc, count, src_addr, context, 0),
		.tag = tag, .ignore = ignore,
	};

	return kfi_trecvmsg(ep, &t, KFI_COMPLETION);
}

/* Atomics. */
static inline int kfi_atomic(struct kfid_ep *ep, const void *buf, size_t count,
			     void *desc, kfi_addr_t dest_addr, u64 addr,
			     u64 key, u32 datatype, u32 op, void *context)
{
	struct kfi_ioc ioc = { .addr = (void *)buf, .count = count };
	struct kfi_rma_ioc rma = { .addr = addr, .count = count, .key = key };
	struct kfi_msg_atomic a = {
		.msg_iov = &ioc, .desc = &desc, .iov_count = 1,
		.addr = dest_addr, .rma_iov = &rma, .rma_iov_count = 1,
		.datatype = datatype, .op = op, .context = context,
	};

	return kfi_atomicmsg(ep, &a, KFI_COMPLETION);
}

static inline int kfi_atomicv(struct kfid_ep *ep, const struct kfi_ioc *iov,
			      void **desc, size_t count, kfi_addr_t dest_addr,
			      u64 addr, u64 key, u32 datatype, u32 op,
			      void *context)
{
	struct kfi_rma_ioc rma = { .addr = addr, .key = key };
	struct kfi_msg_atomic a = {
		.msg_iov = iov, .desc = desc, .iov_count = count,
		.addr = dest_addr, .rma_iov = &rma, .rma_iov_count = 1,
		.datatype = datatype, .op = op, .context = context,
	};
	size_t i;

	for (i = 0; i < count; i++)
		rma.count += iov[i].count;
	return kfi_atomicmsg(ep, &a, KFI_COMPLETION);
}

static inline int kfi_fetch_atomicv(struct kfid_ep *ep, const struct kfi_ioc *iov,
				    void **desc, size_t count,
				    struct kfi_ioc *resultv, void **result_desc,
				    size_t result_count, kfi_addr_t dest_addr,
				    u64 addr, u64 key, u32 datatype, u32 op,
				    void *context)
{
	struct kfi_rma_ioc rma = { .addr = addr, .key = key };
	struct kfi_msg_atomic a = {
		.msg_iov = iov, .desc = desc, .iov_count = count,
		.addr = dest_addr, .rma_iov = &rma, .rma_iov_count = 1,
		.datatype = datatype, .op = op, .context = context,
	};
	size_t i;

	for (i = 0; i < count; i++)
		rma.count += iov[i].count;
	return kfi_fetch_atomicmsg(ep, &a, resultv, result_desc, result_count,
				   KFI_COMPLETION);
}

static inline int kfi_compare_atomicv(struct kfid_ep *ep,
				      const struct kfi_ioc *iov, void **desc,
				      size_t count, const struct kfi_ioc *comparev,
				      void **compare_desc, size_t compare_count,
				      struct kfi_ioc *resultv, void **result_desc,
				      size_t result_count, kfi_addr_t dest_addr,
				      u64 addr, u64 key, u32 datatype, u32 op,
				      void *context)
{
	struct kfi_rma_ioc rma = { .addr = addr, .key = key };
	struct kfi_msg_atomic a = {
		.msg_iov = iov, .desc = desc, .iov_count = count,
		.addr = dest_addr, .rma_iov = &rma, .rma_iov_count = 1,
		.datatype = datatype, .op = op, .context = context,
	};
	size_t i;

	for (i = 0; i < count; i++)
		rma.count += iov[i].count;
	return kfi_compare_atomicmsg(ep, &a, comparev, compare_desc,
				     compare_count, resultv, result_desc,
				     result_count, KFI_COMPLETION);
}

static inline int kfi_inject_atomic(struct kfid_ep *ep, const void *buf,
				    size_t count, kfi_addr_t dest_addr,
				    u64 addr, u64 key, u32 datatype, u32 op)
{
	struct kfi_ioc ioc = { .addr = (void *)buf, .count = count };
	struct kfi_rma_ioc rma = { .addr = addr, .count = count, .key = key };
	struct kfi_msg_atomic a = {
		.msg_iov = &ioc, .iov_count = 1, .addr = dest_addr,
		.rma_iov = &rma, .rma_iov_count = 1,
		.datatype = datatype, .op = op,
	};

	return kfi_atomicmsg(ep, &a, KFI_INJECT);
}

static inline int kfi_fetch_atomic(struct kfid_ep *ep, const void *buf,
				   size_t count, void *desc, void *result,
				   void *result_desc, kfi_addr_t dest_addr,
				   u64 addr, u64 key, u32 datatype, u32 op,
				   void *context)
{
	struct kfi_ioc ioc = { .addr = (void *)buf, .count = count };
	struct kfi_ioc res = { .addr = result, .count = count };
	struct kfi_rma_ioc rma = { .addr = addr, .count = count, .key = key };
	struct kfi_msg_atomic a = {
		.msg_iov = &ioc, .desc = &desc, .iov_count = 1,
		.addr = dest_addr, .rma_iov = &rma, .rma_iov_count = 1,
		.datatype = datatype, .op = op, .context = context,
	};

	return kfi_fetch_atomicmsg(ep, &a, &res, &result_desc, 1, KFI_COMPLETION);
}

static inline int kfi_compare_atomic(struct kfid_ep *ep, const void *buf,
				     size_t count, void *desc,
				     const void *compare, void *compare_desc,
				     void *result, void *result_desc,
				     kfi_addr_t dest_addr, u64 addr, u64 key,
				     u32 datatype, u32 op, void *context)
{
	struct kfi_ioc ioc = { .addr = (void *)buf, .count = count };
	struct kfi_ioc cmp = { .addr = (void *)compare, .count = count };
	struct kfi_ioc res = { .addr = result, .count = count };
	struct kfi_rma_ioc rma = { .addr = addr, .count = count, .key = key };
	struct kfi_msg_atomic a = {
		.msg_iov = &ioc, .desc = &desc, .iov_count = 1,
		.addr = dest_addr, .rma_iov = &rma, .rma_iov_count = 1,
		.datatype = datatype, .op = op, .context = context,
	};

	return kfi_compare_atomicmsg(ep, &a, &cmp, &compare_desc, 1, &res,
				     &result_desc, 1, KFI_COMPLETION);
}

#endif /* _KFABRIC_KFI_ENDPOINT_INLINE_H */
