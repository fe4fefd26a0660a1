/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kfi_ibverbs' C shim: the ib_core and rdma_cm calls that are static
 * inlines or macros (so Rust cannot call them), and accessors of the large
 * ib_core objects the Rust side treats as opaque. The Rust declarations are
 * generated from this header (scripts/bindgen.sh ib), so both sides are
 * checked by their compilers against it.
 */
#ifndef KFI_IB_SHIM_H
#define KFI_IB_SHIM_H

#include <linux/inet.h>
#include <net/net_namespace.h>
#include <rdma/ib_cm.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

/* How a device's port carries RDMA. */
enum kfi_ib_link {
	KFI_IB_LINK_INFINIBAND = 1,
	KFI_IB_LINK_ROCE = 2,
	KFI_IB_LINK_IWARP = 3,
};

/* Devices (any context; the device must be registered). */
const char *kfi_ib_device_name(const struct ib_device *dev);
const struct ib_device_attr *kfi_ib_device_attrs(const struct ib_device *dev);
u32 kfi_ib_first_port(const struct ib_device *dev);
u32 kfi_ib_last_port(const struct ib_device *dev);
int kfi_ib_num_comp_vectors(const struct ib_device *dev);
/* 0 when the port speaks none of the three. */
enum kfi_ib_link kfi_ib_port_link(const struct ib_device *dev, u32 port);
/*
 * Whether a PD's local key on @dev is that of a DMA region over all memory
 * (ib_alloc_pd makes one when the device has no local DMA key of its own,
 * IBK_LOCAL_DMA_LKEY): a key a peer must not learn.
 */
bool kfi_ib_local_key_is_global(const struct ib_device *dev);

/*
 * The device and port that carry traffic from (@source) or to @addr in
 * @net: the RDMA device of the netdev that owns the address or that the
 * route to it leaves by (for a local address: the netdev that has it; lo
 * never, as rdma_cm does not connect over it). Returns 0 and a reference
 * on *@dev (put it with ib_device_put), or -ENODEV. Process context; does
 * not wait on the network (no neighbour resolution).
 */
int kfi_ib_device_for(struct net *net, const struct sockaddr *addr, int source,
		      struct ib_device **dev, u32 *port);

/*
 * An IPv4 address (port 0) in @out that a netdev of one of @dev's ports has
 * in @net (lo never: see kfi_ib_device_for). 0, or -EADDRNOTAVAIL when no
 * port has one. Process context; the device must be registered.
 */
int kfi_ib_device_ipv4(struct ib_device *dev, struct net *net, struct sockaddr_in *out);

/* Protection domains and completion queues (process context). */
struct ib_pd *kfi_ib_alloc_pd(struct ib_device *dev);
void kfi_ib_dealloc_pd(struct ib_pd *pd);
u32 kfi_ib_pd_lkey(const struct ib_pd *pd);
/* A CQ polled in softirq context; each entry's ib_cqe says what ended. */
struct ib_cq *kfi_ib_alloc_cq(struct ib_device *dev, void *context, int entries, int vector);
void *kfi_ib_cq_context(const struct ib_cq *cq);

/*
 * How long the QP's transport retries an unacknowledged request before it
 * fails it, in ms (its ack timeout times its retries plus one); 0 when the
 * QP has no such bound or cannot say (iWARP's is TCP's). Process context.
 */
u32 kfi_ib_qp_retry_ms(struct ib_qp *qp);

/* Posting (any context). */
int kfi_ib_post_send(struct ib_qp *qp, const struct ib_send_wr *wr);
int kfi_ib_post_recv(struct ib_qp *qp, const struct ib_recv_wr *wr);

/*
 * DMA mapping of kernel memory for a device (any context): a buffer both
 * the CPU and the device write (the ring's slots), synced for the one
 * about to use it (@for_cpu: the CPU).
 */
int kfi_ib_dma_map(struct ib_device *dev, void *addr, size_t len, u64 *dma);
void kfi_ib_dma_unmap(struct ib_device *dev, u64 dma, size_t len);
void kfi_ib_dma_sync(struct ib_device *dev, u64 dma, size_t len, int for_cpu);
int kfi_ib_dma_map_page(struct ib_device *dev, struct page *page, unsigned long offset,
			size_t len, int to_device, u64 *dma);
void kfi_ib_dma_unmap_page(struct ib_device *dev, u64 dma, size_t len, int to_device);

/* Regions registered by work request (IB_WR_REG_MR). */
u32 kfi_ib_mr_lkey(const struct ib_mr *mr);
u32 kfi_ib_mr_rkey(const struct ib_mr *mr);
u64 kfi_ib_mr_iova(const struct ib_mr *mr);
/* A fresh key for the next registration of the same MR. */
void kfi_ib_mr_bump_key(struct ib_mr *mr);

/*
 * RDMA read (@read) or write of the local list @sge (@nsge entries) at
 * @raddr of the peer's region @rkey, signaled to @cqe (any context).
 */
int kfi_ib_post_rdma(struct ib_qp *qp, int read, struct ib_sge *sge, int nsge, u64 raddr,
		     u32 rkey, struct ib_cqe *cqe);

/*
 * An atomic on the 8 bytes at @raddr of the peer's region @rkey: compare
 * and swap (@cswap: if they equal @compare_add they become @swap) or fetch
 * and add (@compare_add is added). The old value goes to the 8-byte local
 * entry @sge. Signaled to @cqe (any context).
 */
int kfi_ib_post_atomic(struct ib_qp *qp, int cswap, struct ib_sge *sge, u64 raddr, u32 rkey,
		       u64 compare_add, u64 swap, struct ib_cqe *cqe);

/* The page of kernel address @addr (linear map or vmalloc); NULL if none. */
struct page *kfi_ib_kaddr_page(const void *addr);
/*
 * How many of the @max bytes at kernel address @addr lie in physically
 * contiguous pages: at least the rest of @addr's page (capped at @max);
 * 0 when @addr has no page. Any context.
 */
size_t kfi_ib_kaddr_run(const void *addr, size_t max);

/*
 * A fast-registration region: an MR of a PD over a DMA-mapped scatterlist
 * of pages, made valid by an IB_WR_REG_MR work request. Allocation,
 * mapping, waiting and freeing are process context; posting any context.
 */
struct kfi_ib_frmr;
struct kfi_ib_frmr *kfi_ib_frmr_alloc(struct ib_pd *pd, unsigned int npages);
/* Appends @len bytes at @offset of @page (-E2BIG when the list is full). */
int kfi_ib_frmr_add(struct kfi_ib_frmr *r, struct page *page, unsigned int offset,
		    unsigned int len);
/* Maps the list and the MR; the region's first byte is at @iova.
 * -EOPNOTSUPP for memory that would need DMA syncs (bounce buffers). */
int kfi_ib_frmr_map(struct kfi_ib_frmr *r, u64 iova);
u32 kfi_ib_frmr_rkey(const struct kfi_ib_frmr *r);
/* Posts the registration with access flags @access on @qp. */
int kfi_ib_frmr_post(struct kfi_ib_frmr *r, struct ib_qp *qp, int access);
/* Waits for the posted registration: 0, -EIO (failed) or -ETIMEDOUT; no
 * limit when @timeout_ms is 0. */
int kfi_ib_frmr_wait(struct kfi_ib_frmr *r, unsigned int timeout_ms);
/* Frees the region; no registration of it may be in flight. */
void kfi_ib_frmr_free(struct kfi_ib_frmr *r);

/* rdma_cm identifiers: a reliable connected QP in namespace @net. */
struct rdma_cm_id *kfi_rdma_create_id(struct net *net, rdma_cm_event_handler handler,
				      void *context);
void *kfi_rdma_id_context(const struct rdma_cm_id *id);
void kfi_rdma_id_set_context(struct rdma_cm_id *id, void *context);
/* Under rdma_lock_handler(): a request's identifier gets its own handler. */
void kfi_rdma_id_set_handler(struct rdma_cm_id *id, rdma_cm_event_handler handler,
			     void *context);
struct ib_device *kfi_rdma_id_device(const struct rdma_cm_id *id);
struct ib_qp *kfi_rdma_id_qp(const struct rdma_cm_id *id);
u32 kfi_rdma_id_port(const struct rdma_cm_id *id);
/* The id's own and its peer's address (copied, of @len bytes at most). */
size_t kfi_rdma_id_addr(const struct rdma_cm_id *id, int peer, void *out, size_t len);

#endif /* KFI_IB_SHIM_H */
