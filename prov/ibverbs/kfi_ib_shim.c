// SPDX-License-Identifier: GPL-2.0
/*
 * kfi_ibverbs' C shim, see kfi_ib_shim.h. Each function is a thin
 * forward to an ib_core or rdma_cm inline, macro or structure field.
 */
#include <linux/dma-mapping.h>
#include <linux/inetdevice.h>
#include <linux/math64.h>
#include <linux/scatterlist.h>
#include <linux/vmalloc.h>
#include <net/addrconf.h>
#include <net/ip6_route.h>
#include <net/route.h>
#include "kfi_ib_shim.h"

const char *kfi_ib_device_name(const struct ib_device *dev)
{
	return dev_name(&dev->dev);
}

const struct ib_device_attr *kfi_ib_device_attrs(const struct ib_device *dev)
{
	return &dev->attrs;
}

bool kfi_ib_local_key_is_global(const struct ib_device *dev)
{
	return !(dev->attrs.kernel_cap_flags & IBK_LOCAL_DMA_LKEY);
}

u32 kfi_ib_first_port(const struct ib_device *dev)
{
	return rdma_start_port(dev);
}

u32 kfi_ib_last_port(const struct ib_device *dev)
{
	return rdma_end_port(dev);
}

int kfi_ib_num_comp_vectors(const struct ib_device *dev)
{
	return dev->num_comp_vectors;
}

enum kfi_ib_link kfi_ib_port_link(const struct ib_device *dev, u32 port)
{
	if (rdma_protocol_iwarp(dev, port))
		return KFI_IB_LINK_IWARP;
	if (rdma_protocol_roce(dev, port))
		return KFI_IB_LINK_ROCE;
	if (rdma_protocol_ib(dev, port))
		return KFI_IB_LINK_INFINIBAND;
	return 0;
}

/* The netdev (with a reference) that owns @addr or that routes to it. */
static struct net_device *kfi_ib_netdev_for(struct net *net, const struct sockaddr *addr,
					    int source)
{
	struct net_device *ndev = NULL;

	if (addr->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
		struct rtable *rt;

		if (source)
			return ip_dev_find(net, in->sin_addr.s_addr);
		rt = ip_route_output(net, in->sin_addr.s_addr, 0, 0, 0, RT_SCOPE_UNIVERSE);
		if (IS_ERR(rt))
			return NULL;
		/* A local address routes through lo: its owner carries it. */
		if (rt->rt_type == RTN_LOCAL) {
			ip_rt_put(rt);
			return ip_dev_find(net, in->sin_addr.s_addr);
		}
		ndev = rt->dst.dev;
		dev_hold(ndev);
		ip_rt_put(rt);
	} else if (IS_ENABLED(CONFIG_IPV6) && addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
		struct flowi6 fl6 = { .daddr = in6->sin6_addr };
		struct dst_entry *dst;

		/* A local address: its owner carries it (as for IPv4). */
		if (source || ipv6_chk_addr(net, &in6->sin6_addr, NULL, 0)) {
			rcu_read_lock();
			ndev = ipv6_dev_find(net, &in6->sin6_addr, NULL);
			if (ndev)
				dev_hold(ndev);
			rcu_read_unlock();
			return ndev;
		}
		dst = ip6_route_output(net, NULL, &fl6);
		if (!dst->error) {
			ndev = dst->dev;
			dev_hold(ndev);
		}
		dst_release(dst);
	}
	return ndev;
}

int kfi_ib_device_for(struct net *net, const struct sockaddr *addr, int source,
		      struct ib_device **dev, u32 *port)
{
	struct net_device *ndev = kfi_ib_netdev_for(net, addr, source);
	struct ib_device *ib;
	u32 p;

	if (!ndev)
		return -ENODEV;
	/* rdma_cm does not connect over lo (even with siw attached to it). */
	if (ndev->flags & IFF_LOOPBACK) {
		dev_put(ndev);
		return -ENODEV;
	}
	ib = ib_device_get_by_netdev(ndev, RDMA_DRIVER_UNKNOWN);
	if (!ib) {
		dev_put(ndev);
		return -ENODEV;
	}
	rdma_for_each_port(ib, p) {
		struct net_device *pdev = ib_device_get_netdev(ib, p);

		if (pdev)
			dev_put(pdev);
		if (pdev == ndev) {
			dev_put(ndev);
			*dev = ib;
			*port = p;
			return 0;
		}
	}
	dev_put(ndev);
	ib_device_put(ib);
	return -ENODEV;
}

int kfi_ib_device_ipv4(struct ib_device *dev, struct net *net, struct sockaddr_in *out)
{
	u32 p;

	rdma_for_each_port(dev, p) {
		struct net_device *ndev = ib_device_get_netdev(dev, p);
		const struct in_ifaddr *ifa;
		struct in_device *in;
		__be32 a = 0;

		if (!ndev)
			continue;
		rcu_read_lock();
		in = __in_dev_get_rcu(ndev);
		if (in && net_eq(dev_net(ndev), net) && !(ndev->flags & IFF_LOOPBACK)) {
			in_dev_for_each_ifa_rcu(ifa, in) {
				if (ifa->ifa_scope != RT_SCOPE_HOST) {
					a = ifa->ifa_local;
					break;
				}
			}
		}
		rcu_read_unlock();
		dev_put(ndev);
		if (a) {
			memset(out, 0, sizeof(*out));
			out->sin_family = AF_INET;
			out->sin_addr.s_addr = a;
			return 0;
		}
	}
	return -EADDRNOTAVAIL;
}

struct ib_pd *kfi_ib_alloc_pd(struct ib_device *dev)
{
	return ib_alloc_pd(dev, 0);
}

void kfi_ib_dealloc_pd(struct ib_pd *pd)
{
	ib_dealloc_pd(pd);
}

u32 kfi_ib_pd_lkey(const struct ib_pd *pd)
{
	return pd->local_dma_lkey;
}

struct ib_cq *kfi_ib_alloc_cq(struct ib_device *dev, void *context, int entries, int vector)
{
	return ib_alloc_cq(dev, context, entries, vector, IB_POLL_SOFTIRQ);
}

void *kfi_ib_cq_context(const struct ib_cq *cq)
{
	return cq->cq_context;
}

u32 kfi_ib_qp_retry_ms(struct ib_qp *qp)
{
	struct ib_qp_init_attr init = {};
	struct ib_qp_attr attr = {};
	u64 ms;

	if (ib_query_qp(qp, &attr, IB_QP_TIMEOUT | IB_QP_RETRY_CNT, &init) || !attr.timeout)
		return 0;
	/* 4.096 us << timeout per try: at most 2^31 * 4096 ns, no overflow. */
	ms = div_u64((4096ULL << min_t(u8, attr.timeout, 31)) * (attr.retry_cnt + 1ULL),
		     NSEC_PER_MSEC);
	return min_t(u64, ms, U32_MAX);
}

int kfi_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr)
{
	return ib_post_send(qp, wr, NULL);
}

int kfi_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr)
{
	return ib_post_recv(qp, wr, NULL);
}

int kfi_ib_dma_map(struct ib_device *dev, void *addr, size_t len, u64 *dma)
{
	u64 a = ib_dma_map_single(dev, addr, len, DMA_BIDIRECTIONAL);

	if (ib_dma_mapping_error(dev, a))
		return -ENOMEM;
	*dma = a;
	return 0;
}

void kfi_ib_dma_unmap(struct ib_device *dev, u64 dma, size_t len)
{
	ib_dma_unmap_single(dev, dma, len, DMA_BIDIRECTIONAL);
}

void kfi_ib_dma_sync(struct ib_device *dev, u64 dma, size_t len, int for_cpu)
{
	if (for_cpu)
		ib_dma_sync_single_for_cpu(dev, dma, len, DMA_BIDIRECTIONAL);
	else
		ib_dma_sync_single_for_device(dev, dma, len, DMA_BIDIRECTIONAL);
}

int kfi_ib_dma_map_page(struct ib_device *dev, struct page *page, unsigned long offset,
			size_t len, int to_device, u64 *dma)
{
	u64 a = ib_dma_map_page(dev, page, offset, len,
				to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE);

	if (ib_dma_mapping_error(dev, a))
		return -ENOMEM;
	*dma = a;
	return 0;
}

void kfi_ib_dma_unmap_page(struct ib_device *dev, u64 dma, size_t len, int to_device)
{
	ib_dma_unmap_page(dev, dma, len, to_device ? DMA_TO_DEVICE : DMA_FROM_DEVICE);
}

u32 kfi_ib_mr_lkey(const struct ib_mr *mr)
{
	return mr->lkey;
}

u32 kfi_ib_mr_rkey(const struct ib_mr *mr)
{
	return mr->rkey;
}

u64 kfi_ib_mr_iova(const struct ib_mr *mr)
{
	return mr->iova;
}

void kfi_ib_mr_bump_key(struct ib_mr *mr)
{
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
}

int kfi_ib_post_rdma(struct ib_qp *qp, int read, struct ib_sge *sge, int nsge, u64 raddr,
		     u32 rkey, struct ib_cqe *cqe)
{
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_cqe = cqe,
			.sg_list = sge,
			.num_sge = nsge,
			.opcode = read ? IB_WR_RDMA_READ : IB_WR_RDMA_WRITE,
			.send_flags = IB_SEND_SIGNALED,
		},
		.remote_addr = raddr,
		.rkey = rkey,
	};

	return ib_post_send(qp, &wr.wr, NULL);
}

int kfi_ib_post_atomic(struct ib_qp *qp, int cswap, struct ib_sge *sge, u64 raddr, u32 rkey,
		       u64 compare_add, u64 swap, struct ib_cqe *cqe)
{
	struct ib_atomic_wr wr = {
		.wr = {
			.wr_cqe = cqe,
			.sg_list = sge,
			.num_sge = 1,
			.opcode = cswap ? IB_WR_ATOMIC_CMP_AND_SWP : IB_WR_ATOMIC_FETCH_AND_ADD,
			.send_flags = IB_SEND_SIGNALED,
		},
		.remote_addr = raddr,
		.compare_add = compare_add,
		.swap = swap,
		.rkey = rkey,
	};

	return ib_post_send(qp, &wr.wr, NULL);
}

struct page *kfi_ib_kaddr_page(const void *addr)
{
	/* Module memory (a ULP's static buffers) is mapped like vmalloc's. */
	if (is_vmalloc_or_module_addr(addr))
		return vmalloc_to_page(addr);
	if (virt_addr_valid(addr))
		return virt_to_page(addr);
	return NULL;
}

size_t kfi_ib_kaddr_run(const void *addr, size_t max)
{
	struct page *first = kfi_ib_kaddr_page(addr);
	size_t off = offset_in_page(addr), n;
	unsigned long pfn;

	if (!first)
		return 0;
	pfn = page_to_pfn(first);
	n = min_t(size_t, PAGE_SIZE - off, max);
	while (n < max) {
		/* addr + n starts a page: the next one must follow in memory. */
		struct page *next = kfi_ib_kaddr_page((const u8 *)addr + n);

		if (!next || page_to_pfn(next) != pfn + ((off + n) >> PAGE_SHIFT))
			break;
		n += min_t(size_t, PAGE_SIZE, max - n);
	}
	return n;
}

struct kfi_ib_frmr {
	struct ib_cqe cqe;		/* first: the completion finds us */
	struct completion done;
	int status;
	struct ib_device *dev;
	struct ib_mr *mr;
	struct sg_table sgt;		/* as allocated */
	struct sg_table map;		/* the entries filled, as mapped */
	struct scatterlist *last;	/* the last entry filled */
	unsigned int nents;
	bool mapped;
};

static void kfi_ib_frmr_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct kfi_ib_frmr *r = container_of(wc->wr_cqe, struct kfi_ib_frmr, cqe);

	r->status = wc->status == IB_WC_SUCCESS ? 0 : -EIO;
	complete(&r->done);
}

struct kfi_ib_frmr *kfi_ib_frmr_alloc(struct ib_pd *pd, unsigned int npages)
{
	struct kfi_ib_frmr *r;
	int ret;

	if (!npages)
		return ERR_PTR(-EINVAL);
	r = kzalloc(sizeof(*r), GFP_KERNEL);
	if (!r)
		return ERR_PTR(-ENOMEM);
	ret = sg_alloc_table(&r->sgt, npages, GFP_KERNEL);
	if (ret)
		goto free;
	r->mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, npages);
	if (IS_ERR(r->mr)) {
		ret = PTR_ERR(r->mr);
		goto table;
	}
	r->dev = pd->device;
	r->cqe.done = kfi_ib_frmr_done;
	init_completion(&r->done);
	return r;
table:
	sg_free_table(&r->sgt);
free:
	kfree(r);
	return ERR_PTR(ret);
}

int kfi_ib_frmr_add(struct kfi_ib_frmr *r, struct page *page, unsigned int offset,
		    unsigned int len)
{
	struct scatterlist *sg;

	if (r->mapped || r->nents >= r->sgt.orig_nents)
		return -E2BIG;
	sg = r->last ? sg_next(r->last) : r->sgt.sgl;
	if (!sg)
		return -E2BIG;
	sg_set_page(sg, page, len, offset);
	r->last = sg;
	r->nents++;
	return 0;
}

/* Whether a mapped entry of @r needs dma_sync_*() calls (never on a
 * device with virtual DMA: siw, rxe). */
static bool kfi_ib_frmr_needs_sync(struct kfi_ib_frmr *r)
{
	struct scatterlist *sg;
	int i;

	if (ib_uses_virt_dma(r->dev))
		return false;
	/* The device's flag, not dma_need_sync() alone: that one answers
	 * yes for every mapping through dma_map_ops with sync callbacks
	 * (and under CONFIG_DMA_API_DEBUG) even where nothing bounces;
	 * swiotlb clears the flag at its first bounce. */
	if (dev_dma_skip_sync(r->dev->dma_device))
		return false;
	for_each_sgtable_dma_sg(&r->map, sg, i)
		if (dma_need_sync(r->dev->dma_device, sg_dma_address(sg)))
			return true;
	return false;
}

int kfi_ib_frmr_map(struct kfi_ib_frmr *r, u64 iova)
{
	int n, ret;

	if (r->mapped || !r->last)
		return -EINVAL;
	sg_mark_end(r->last);
	r->map.sgl = r->sgt.sgl;
	r->map.orig_nents = r->nents;
	ret = ib_dma_map_sgtable_attrs(r->dev, &r->map, DMA_BIDIRECTIONAL, 0);
	if (ret)
		return ret;
	/* The region stays mapped, and is never synced, while peers use it:
	 * refuse memory that would need syncs (bounce buffers, non-coherent
	 * DMA), where the ULP and peers would see stale bytes. */
	if (kfi_ib_frmr_needs_sync(r)) {
		ib_dma_unmap_sgtable_attrs(r->dev, &r->map, DMA_BIDIRECTIONAL, 0);
		return -EOPNOTSUPP;
	}
	n = ib_map_mr_sg(r->mr, r->map.sgl, r->map.nents, NULL, PAGE_SIZE);
	/* A gap between pages (an entry that neither ends nor starts on a
	 * page boundary) cannot be mapped; nor can an iova that puts the
	 * first byte at another offset in its page. */
	if (n != r->map.nents || offset_in_page(r->mr->iova) != offset_in_page(iova)) {
		ib_dma_unmap_sgtable_attrs(r->dev, &r->map, DMA_BIDIRECTIONAL, 0);
		return -EINVAL;
	}
	r->mr->iova = iova;
	r->mapped = true;
	return 0;
}

u32 kfi_ib_frmr_rkey(const struct kfi_ib_frmr *r)
{
	return r->mr->rkey;
}

int kfi_ib_frmr_post(struct kfi_ib_frmr *r, struct ib_qp *qp, int access)
{
	struct ib_reg_wr wr = {
		.wr = {
			.wr_cqe = &r->cqe,
			.opcode = IB_WR_REG_MR,
			.send_flags = IB_SEND_SIGNALED,
		},
		.mr = r->mr,
		.key = r->mr->rkey,
		.access = access,
	};

	if (!r->mapped)
		return -EINVAL;
	reinit_completion(&r->done);
	return ib_post_send(qp, &wr.wr, NULL);
}

int kfi_ib_frmr_wait(struct kfi_ib_frmr *r, unsigned int timeout_ms)
{
	if (!timeout_ms)
		wait_for_completion(&r->done);
	else if (!wait_for_completion_timeout(&r->done, msecs_to_jiffies(timeout_ms)))
		return -ETIMEDOUT;
	return r->status;
}

void kfi_ib_frmr_free(struct kfi_ib_frmr *r)
{
	ib_dereg_mr(r->mr);
	if (r->mapped)
		ib_dma_unmap_sgtable_attrs(r->dev, &r->map, DMA_BIDIRECTIONAL, 0);
	sg_free_table(&r->sgt);
	kfree(r);
}

struct rdma_cm_id *kfi_rdma_create_id(struct net *net, rdma_cm_event_handler handler,
				      void *context)
{
	return rdma_create_id(net, handler, context, RDMA_PS_TCP, IB_QPT_RC);
}

void *kfi_rdma_id_context(const struct rdma_cm_id *id)
{
	return id->context;
}

void kfi_rdma_id_set_context(struct rdma_cm_id *id, void *context)
{
	id->context = context;
}

void kfi_rdma_id_set_handler(struct rdma_cm_id *id, rdma_cm_event_handler handler,
			     void *context)
{
	id->event_handler = handler;
	id->context = context;
}

struct ib_device *kfi_rdma_id_device(const struct rdma_cm_id *id)
{
	return id->device;
}

struct ib_qp *kfi_rdma_id_qp(const struct rdma_cm_id *id)
{
	return id->qp;
}

u32 kfi_rdma_id_port(const struct rdma_cm_id *id)
{
	return id->port_num;
}

size_t kfi_rdma_id_addr(const struct rdma_cm_id *id, int peer, void *out, size_t len)
{
	const struct sockaddr *sa = peer ? (const struct sockaddr *)&id->route.addr.dst_addr :
					   (const struct sockaddr *)&id->route.addr.src_addr;
	size_t n = sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
		   sizeof(struct sockaddr_in);

	if (n > len)
		n = len;
	memcpy(out, sa, n);
	return n;
}
