/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kfabric domains: the local resources of one device or interface, memory
 * registration and address vectors. Included by <kfabric/kfabric.h>.
 */
#ifndef _KFABRIC_KFI_DOMAIN_H
#define _KFABRIC_KFI_DOMAIN_H

struct kvec;
struct bio_vec;
struct scatterlist;
/* Ops tables: defined for providers in <kfabric/kfi_provider.h>. */
struct kfi_ops_mr;
struct kfi_ops_domain;
struct kfi_ops_av;
struct kfid_av;
struct kfid_cq;
struct kfid_cntr;
struct kfid_ep;
struct kfid_mr;
struct kfi_av_attr;
struct kfi_cq_attr;
struct kfi_cntr_attr;

/**
 * enum kfi_iov_type - which kind of buffer list a message or region uses
 * @KFI_KVEC: struct kvec (kernel virtual addresses)
 * @KFI_BVEC: struct bio_vec (pages, as in a bio)
 * @KFI_SGL: struct scatterlist
 */
enum kfi_iov_type {
	KFI_KVEC,
	KFI_BVEC,
	KFI_SGL,
};

/**
 * struct kfi_mr_attr - a memory registration request
 * @iov_type: enum kfi_iov_type of the buffer list
 * @mr_iov: the buffers as kvecs (KFI_KVEC)
 * @mr_bvec: the buffers as bio_vecs (KFI_BVEC)
 * @mr_sgl: the buffers as a scatterlist (KFI_SGL)
 * @iov_count: entries in the buffer list
 * @access: what the region allows: KFI_SEND, KFI_RECV, KFI_READ, KFI_WRITE
 *	locally, KFI_REMOTE_READ, KFI_REMOTE_WRITE for peers
 * @offset: the remote address of the region's first byte, as peers name it
 * @requested_key: the key to use, if the provider allows choosing
 * @context: the ULP's pointer
 */
struct kfi_mr_attr {
	u32 iov_type;
	union {
		const struct kvec *mr_iov;
		const struct bio_vec *mr_bvec;
		struct scatterlist *mr_sgl;
	};
	size_t iov_count;
	u64 access;
	u64 offset;
	u64 requested_key;
	void *context;
};

/* Access bits a region may have. */
#define KFI_MR_ACCESS /* u64 */ (KFI_SEND | KFI_RECV | KFI_READ | KFI_WRITE | \
		       KFI_REMOTE_READ | KFI_REMOTE_WRITE)

/* Most buffers kfi_mr_alloc() regions take per mapping: a bio's worth. */
#define KFI_MR_MAP_SEGS_MAX 256

/**
 * struct kfi_mr_map - the buffers of one I/O, for kfi_mr_map()
 * @iov_type: enum kfi_iov_type of the buffer list
 * @mr_iov: the buffers as kvecs (KFI_KVEC)
 * @mr_bvec: the buffers as bio_vecs (KFI_BVEC)
 * @mr_sgl: the buffers as a scatterlist (KFI_SGL)
 * @iov_count: entries in the buffer list, 1 to the region's @max_segs
 * @offset: the remote address of the first byte, as peers name it
 */
struct kfi_mr_map {
	u32 iov_type;
	union {
		const struct kvec *mr_iov;
		const struct bio_vec *mr_bvec;
		struct scatterlist *mr_sgl;
	};
	size_t iov_count;
	u64 offset;
};

/**
 * struct kfid_mr - a registered memory region
 * @fid: the object header (fclass KFI_CLASS_MR)
 * @mem_desc: the local descriptor to pass with buffers of the region
 * @key: the key peers use to reach the region; for a region of
 *	kfi_mr_alloc(), the key of its current mapping (0 while unmapped)
 * @ops: the memory registration table of the region's domain (set by the
 *	provider; kfi_mr_map() and kfi_mr_unmap() call through it)
 */
struct kfid_mr {
	struct kfid fid;
	void *mem_desc;
	u64 key;
	const struct kfi_ops_mr *ops;
};

/**
 * struct kfid_domain - a domain: one device or interface of a fabric
 * @fid: the object header (fclass KFI_CLASS_DOMAIN)
 * @ops: the domain's operations
 * @mr: memory registration
 */
struct kfid_domain {
	struct kfid fid;
	const struct kfi_ops_domain *ops;
	const struct kfi_ops_mr *mr;
};

/**
 * enum kfi_av_type - how an address vector hands out addresses
 * @KFI_AV_UNSPEC: the provider's choice
 * @KFI_AV_MAP: kfi_addr_t values are provider-defined
 * @KFI_AV_TABLE: kfi_addr_t values are indexes 0, 1, 2, ... in insert order
 */
enum kfi_av_type {
	KFI_AV_UNSPEC,
	KFI_AV_MAP,
	KFI_AV_TABLE,
};

/**
 * struct kfi_av_attr - address vector attributes
 * @type: enum kfi_av_type
 * @count: the number of addresses expected
 * @flags: reserved, 0
 */
struct kfi_av_attr {
	u32 type;
	size_t count;
	u64 flags;
};

/**
 * struct kfid_av - an address vector: peers of RDM endpoints
 * @fid: the object header (fclass KFI_CLASS_AV)
 * @ops: the vector's operations
 */
struct kfid_av {
	struct kfid fid;
	const struct kfi_ops_av *ops;
};

/**
 * kfi_domain() - open a domain of @fabric
 * @fabric: an open fabric
 * @info: the entry of kfi_getinfo() to open
 * @domain: on success, the domain
 * @context: the ULP's pointer
 *
 * Context: process context; may sleep.
 * Return: 0, -EINVAL, -ENOSYS or the provider's error.
 */
int kfi_domain(struct kfid_fabric *fabric, struct kfi_info *info,
	       struct kfid_domain **domain, void *context);

/**
 * kfi_mr_reg() - register one virtually contiguous kernel buffer
 * @domain: the domain
 * @buf: the buffer
 * @len: its length
 * @access: KFI_MR_ACCESS bits
 * @offset: the remote address peers use for @buf
 * @requested_key: the key wanted, where the provider lets the ULP choose
 * @flags: 0 or KFI_RMA_PMEM (the region is persistent memory)
 * @mr: on success, the region
 * @context: the ULP's pointer
 *
 * kfi_mr_regv(), kfi_mr_regbv() and kfi_mr_regsgl() take kvec, bio_vec and
 * scatterlist buffer lists; kfi_mr_regattr() takes all of it in a struct.
 *
 * Context: process context; may sleep.
 * Return: 0; -EINVAL on bad arguments or access bits; -ENOSYS; or the
 * provider's error.
 */
int kfi_mr_reg(struct kfid_domain *domain, const void *buf, size_t len,
	       u64 access, u64 offset, u64 requested_key, u64 flags,
	       struct kfid_mr **mr, void *context);
int kfi_mr_regv(struct kfid_domain *domain, const struct kvec *iov,
		size_t count, u64 access, u64 offset, u64 requested_key,
		u64 flags, struct kfid_mr **mr, void *context);
int kfi_mr_regbv(struct kfid_domain *domain, const struct bio_vec *bvec,
		 size_t count, u64 access, u64 offset, u64 requested_key,
		 u64 flags, struct kfid_mr **mr, void *context);
int kfi_mr_regsgl(struct kfid_domain *domain, struct scatterlist *sgl,
		  size_t count, u64 access, u64 offset, u64 requested_key,
		  u64 flags, struct kfid_mr **mr, void *context);
int kfi_mr_regattr(struct kfid_domain *domain, const struct kfi_mr_attr *attr,
		   u64 flags, struct kfid_mr **mr);

/**
 * kfi_mr_alloc() - a region for per-I/O mapping, with no memory yet
 * @domain: the domain
 * @max_segs: most buffers one mapping may have, 1..KFI_MR_MAP_SEGS_MAX
 * @access: KFI_MR_ACCESS bits every mapping gets
 * @flags: 0 or KFI_RMA_PMEM
 * @mr: on success, the region, unmapped
 * @context: the ULP's pointer
 *
 * The storage way of registering memory: allocate the regions once (say
 * one per request slot of a queue), then give each I/O's pages to one with
 * kfi_mr_map() on the submission path and take them back with
 * kfi_mr_unmap() when the I/O completes. Everything a mapping needs is
 * allocated here, so mapping neither sleeps nor allocates.
 *
 * Context: process context; may sleep.
 * Return: 0; -EINVAL on bad arguments; -ENOSYS when the provider has no
 * per-I/O mapping; or the provider's error.
 */
int kfi_mr_alloc(struct kfid_domain *domain, size_t max_segs, u64 access,
		 u64 flags, struct kfid_mr **mr, void *context);

/**
 * kfi_mr_map() - give a region of kfi_mr_alloc() the buffers of one I/O
 * @mr: an unmapped region of kfi_mr_alloc()
 * @map: the buffers and the remote address of their first byte
 *
 * The region gets a fresh key, which peers cannot guess from earlier ones
 * (read it with kfi_mr_key()); from now until kfi_mr_unmap(), peers reach
 * the buffers with it, within the region's access rights. The buffers must
 * stay valid until kfi_mr_unmap() returns 0 or the region is closed.
 * kfi_mr_mapv(), kfi_mr_mapbv() and kfi_mr_mapsgl() are the spellings for
 * one list type. Calls on one region must not race each other.
 *
 * Context: any context but hard interrupt; does not sleep or allocate.
 * Return: 0; -EINVAL on a bad list, more buffers than @max_segs, or a
 * region not made by kfi_mr_alloc(); -EBUSY when the region is mapped (or
 * its last mapping still drains); -ENOSYS.
 */
int kfi_mr_map(struct kfid_mr *mr, const struct kfi_mr_map *map);
int kfi_mr_mapv(struct kfid_mr *mr, const struct kvec *iov, size_t count,
		u64 offset);
int kfi_mr_mapbv(struct kfid_mr *mr, const struct bio_vec *bvec,
		 size_t count, u64 offset);
int kfi_mr_mapsgl(struct kfid_mr *mr, struct scatterlist *sgl, size_t count,
		  u64 offset);

/**
 * kfi_mr_unmap() - invalidate a region's mapping and take its buffers back
 * @mr: a mapped region of kfi_mr_alloc()
 *
 * The key stops working at once: a peer access that starts later fails
 * with -ENOKEY at the peer. If no peer access is in progress, the buffers
 * are the ULP's again and the region can be mapped anew. Otherwise the
 * call returns -EBUSY and the ULP calls it again later: an access in
 * progress ends within the provider's frame deadline (or its connection is
 * torn down), and kfi_close() of the region waits for it with a bounded
 * grace.
 *
 * Context: any context but hard interrupt; does not sleep.
 * Return: 0 (the buffers are free); -EBUSY (a peer access still uses
 * them); -EINVAL when the region is not mapped or not from kfi_mr_alloc();
 * -ENOSYS.
 */
int kfi_mr_unmap(struct kfid_mr *mr);

/**
 * kfi_mr_desc() - the local descriptor of a region
 * @mr: the region
 */
static inline void *kfi_mr_desc(struct kfid_mr *mr)
{
	return mr->mem_desc;
}

/**
 * kfi_mr_key() - the key peers use for a region
 * @mr: the region
 */
static inline u64 kfi_mr_key(struct kfid_mr *mr)
{
	return mr->key;
}

/**
 * kfi_av_open() - open an address vector
 * @domain: the domain
 * @attr: its attributes
 * @av: on success, the vector
 * @context: the ULP's pointer
 *
 * Context: process context; may sleep.
 * Return: 0, -EINVAL, -ENOSYS or the provider's error.
 */
int kfi_av_open(struct kfid_domain *domain, struct kfi_av_attr *attr,
		struct kfid_av **av, void *context);

/**
 * kfi_av_insert() - add addresses to an address vector
 * @av: the vector
 * @addr: @count addresses of the domain's address format, back to back
 * @count: how many
 * @fi_addr: on return, one handle per address (KFI_ADDR_NOTAVAIL for one
 *	that failed)
 * @flags: 0
 * @context: the ULP's pointer
 *
 * Context: process context; may sleep.
 * Return: the number of addresses inserted, or a negative errno.
 */
int kfi_av_insert(struct kfid_av *av, const void *addr, size_t count,
		  kfi_addr_t *fi_addr, u64 flags, void *context);
int kfi_av_insertsvc(struct kfid_av *av, const char *node, const char *service,
		     kfi_addr_t *fi_addr, u64 flags, void *context);
int kfi_av_remove(struct kfid_av *av, kfi_addr_t *fi_addr, size_t count,
		  u64 flags);
int kfi_av_lookup(struct kfid_av *av, kfi_addr_t fi_addr, void *addr,
		  size_t *addrlen);

#endif /* _KFABRIC_KFI_DOMAIN_H */
