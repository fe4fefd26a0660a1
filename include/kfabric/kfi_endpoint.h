/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kfabric endpoints: connection management, messages, tagged messages, RMA
 * and atomics. Included by <kfabric/kfabric.h>.
 *
 * Data transfer calls come in three spellings: a simple one (kfi_send), a
 * vector one (kfi_sendv/kfi_sendbv/kfi_sendsgl) and a message one
 * (kfi_sendmsg) that carries everything. The simple and vector spellings are
 * inline wrappers that build a message; kfabric.ko exports and checks the
 * message calls and hands them to the provider with one indirect call.
 *
 * Context of every data transfer call: any context but hard interrupt
 * (process, softirq, under a spinlock): neither kfabric.ko nor a provider
 * sleeps in them where the caller may not. A caller that may sleep (task
 * context, preemptible, no RCU read lock, bottom halves on) may find the
 * operation done, and its completion reported, when the call returns:
 * kfi_sockets then sends, or receives the message a posted receive takes,
 * from the caller's context, taking the socket's lock but never waiting
 * for the peer. They return 0 when the operation was queued; -EAGAIN when
 * the endpoint is out of resources (retry after reading completions, or
 * after a pause: the room an inject needs may come back without one);
 * -EINVAL on bad arguments (an unknown flag, too many buffers, a NULL buffer
 * with a non-zero length, lengths above SSIZE_MAX or whose sum overflows, an
 * inject larger than inject_size); -EMSGSIZE for a send, RMA or atomic
 * longer than the endpoint's max_msg_size; -EOPNOTSUPP when the endpoint lacks the
 * capability or completion level; -ENOSYS when the provider does not
 * implement the call; -ENOTCONN on an endpoint that is not connected.
 */
#ifndef _KFABRIC_KFI_ENDPOINT_H
#define _KFABRIC_KFI_ENDPOINT_H

/* Ops tables: defined for providers in <kfabric/kfi_provider.h>. */
struct kfi_ops_ep;
struct kfi_ops_cm;
struct kfi_ops_msg;
struct kfi_ops_rma;
struct kfi_ops_tagged;
struct kfi_ops_atomic;
struct kfid_eq;

/**
 * struct kfi_msg - a message: buffers, peer and completion context
 * @iov_type: enum kfi_iov_type of the buffer list
 * @msg_iov: the buffers as kvecs (KFI_KVEC)
 * @msg_bvec: the buffers as bio_vecs (KFI_BVEC)
 * @msg_sgl: the buffers as a scatterlist (KFI_SGL)
 * @desc: per buffer, the kfi_mr_desc() of its region, or NULL
 * @iov_count: entries in the buffer list
 * @addr: the peer (RDM endpoints), KFI_ADDR_UNSPEC otherwise
 * @context: returned in the operation's completion
 * @data: remote CQ data, sent with KFI_REMOTE_CQ_DATA
 */
struct kfi_msg {
	u32 iov_type;
	union {
		const struct kvec *msg_iov;
		const struct bio_vec *msg_bvec;
		struct scatterlist *msg_sgl;
	};
	void **desc;
	size_t iov_count;
	kfi_addr_t addr;
	void *context;
	u64 data;
};

/**
 * struct kfi_rma_iov - a piece of a peer's registered memory
 * @addr: its remote address (the region's offset plus the distance into it)
 * @len: its length
 * @key: the region's key
 */
struct kfi_rma_iov {
	u64 addr;
	size_t len;
	u64 key;
};

/**
 * struct kfi_msg_rma - an RMA operation
 * @msg: the local buffers, peer, context and data
 * @rma_iov: the remote buffers
 * @rma_iov_count: how many
 */
struct kfi_msg_rma {
	struct kfi_msg msg;
	const struct kfi_rma_iov *rma_iov;
	size_t rma_iov_count;
};

/**
 * struct kfi_msg_tagged - a tagged message
 * @msg: the buffers, peer, context and data
 * @tag: the tag sent, or to match
 * @ignore: receives: tag bits that do not take part in matching
 */
struct kfi_msg_tagged {
	struct kfi_msg msg;
	u64 tag;
	u64 ignore;
};

/**
 * enum kfi_datatype - types atomics operate on
 */
enum kfi_datatype {
	KFI_INT8,
	KFI_UINT8,
	KFI_INT16,
	KFI_UINT16,
	KFI_INT32,
	KFI_UINT32,
	KFI_INT64,
	KFI_UINT64,
	KFI_DATATYPE_LAST,
};

/**
 * enum kfi_op - atomic operations
 *
 * KFI_MIN to KFI_ATOMIC_WRITE combine the source with the target (write:
 * replace it); fetch variants also return the old target value.
 * KFI_CSWAP...KFI_MSWAP take a compare operand: KFI_CSWAP writes the source
 * if the target equals the compare value; KFI_MSWAP writes the source bits
 * selected by the compare value as a mask.
 */
enum kfi_op {
	KFI_MIN,
	KFI_MAX,
	KFI_SUM,
	KFI_PROD,
	KFI_LOR,
	KFI_LAND,
	KFI_BOR,
	KFI_BAND,
	KFI_LXOR,
	KFI_BXOR,
	KFI_ATOMIC_READ,
	KFI_ATOMIC_WRITE,
	KFI_CSWAP,
	KFI_CSWAP_NE,
	KFI_CSWAP_LE,
	KFI_CSWAP_LT,
	KFI_CSWAP_GE,
	KFI_CSWAP_GT,
	KFI_MSWAP,
	KFI_ATOMIC_OP_LAST,
};

/**
 * struct kfi_ioc - a local atomic operand array
 * @addr: the elements
 * @count: how many
 */
struct kfi_ioc {
	void *addr;
	size_t count;
};

/**
 * struct kfi_rma_ioc - a remote atomic operand array
 * @addr: its remote address
 * @count: elements
 * @key: the region's key
 */
struct kfi_rma_ioc {
	u64 addr;
	size_t count;
	u64 key;
};

/**
 * struct kfi_msg_atomic - an atomic operation
 * @msg_iov: the source operands
 * @desc: their regions' descriptors, or NULL
 * @iov_count: entries in @msg_iov
 * @addr: the peer (RDM endpoints)
 * @rma_iov: the target operands
 * @rma_iov_count: entries in @rma_iov
 * @datatype: enum kfi_datatype
 * @op: enum kfi_op
 * @context: returned in the completion
 * @data: remote CQ data, with KFI_REMOTE_CQ_DATA
 */
struct kfi_msg_atomic {
	const struct kfi_ioc *msg_iov;
	void **desc;
	size_t iov_count;
	kfi_addr_t addr;
	const struct kfi_rma_ioc *rma_iov;
	size_t rma_iov_count;
	u32 datatype;
	u32 op;
	void *context;
	u64 data;
};

/* kfi_getopt/kfi_setopt levels and options. */
#define KFI_OPT_ENDPOINT	0
#define KFI_OPT_MIN_MULTI_RECV	0	/* size_t */
#define KFI_OPT_CM_DATA_SIZE	1	/* size_t, read only */

/**
 * struct kfid_ep - an active endpoint
 * @fid: the object header (fclass KFI_CLASS_EP)
 * @ops: control
 * @cm: connection management
 * @msg: messages, or NULL
 * @rma: RMA, or NULL
 * @tagged: tagged messages, or NULL
 * @atomic: atomics, or NULL
 * @caps: what the endpoint can do (KFI_MSG, KFI_RMA, ...), set by the
 *	provider when it opens the endpoint; kfabric.ko refuses operations
 *	outside it with -EOPNOTSUPP
 * @op_flags: the operation flags (completion levels, KFI_INJECT, ...) the
 *	endpoint supports
 * @tx_iov_limit: most local buffers in a transmit operation
 * @rx_iov_limit: most buffers in a receive
 * @rma_iov_limit: most remote buffers in an RMA or atomic operation
 * @inject_size: largest KFI_INJECT payload
 * @max_msg_size: longest send, RMA or atomic transfer (0: no limit is
 *	checked by kfabric.ko)
 */
struct kfid_ep {
	struct kfid fid;
	const struct kfi_ops_ep *ops;
	const struct kfi_ops_cm *cm;
	const struct kfi_ops_msg *msg;
	const struct kfi_ops_rma *rma;
	const struct kfi_ops_tagged *tagged;
	const struct kfi_ops_atomic *atomic;
	u64 caps;
	u64 op_flags;
	size_t tx_iov_limit;
	size_t rx_iov_limit;
	size_t rma_iov_limit;
	size_t inject_size;
	size_t max_msg_size;
};

/**
 * struct kfid_pep - a passive endpoint: listens for connection requests
 * @fid: the object header (fclass KFI_CLASS_PEP)
 * @ops: control
 * @cm: connection management (getname, listen, reject)
 */
struct kfid_pep {
	struct kfid fid;
	const struct kfi_ops_ep *ops;
	const struct kfi_ops_cm *cm;
};

/* Control and connection management: process context, may sleep. */
int kfi_endpoint(struct kfid_domain *domain, struct kfi_info *info,
		 struct kfid_ep **ep, void *context);
int kfi_passive_ep(struct kfid_fabric *fabric, struct kfi_info *info,
		   struct kfid_pep **pep, void *context);
/**
 * kfi_ep_bind() - bind a CQ (KFI_TRANSMIT/KFI_RECV, KFI_SELECTIVE_COMPLETION),
 * an EQ, a counter or an AV to an endpoint
 * @ep: the endpoint
 * @bfid: the object to bind
 * @flags: which events go there
 *
 * The bound object cannot be closed before the endpoint (-EBUSY).
 */
int kfi_ep_bind(struct kfid_ep *ep, struct kfid *bfid, u64 flags);
int kfi_pep_bind(struct kfid_pep *pep, struct kfid *bfid, u64 flags);
/**
 * kfi_bind() - bind @bfid to the endpoint or passive endpoint @fid (the
 * class-independent spelling of kfi_ep_bind() and kfi_pep_bind())
 * @fid: an endpoint's or passive endpoint's kfid
 * @bfid: the object to bind
 * @flags: as for kfi_ep_bind()
 */
int kfi_bind(struct kfid *fid, struct kfid *bfid, u64 flags);
/**
 * kfi_enable() - start an endpoint once its queues are bound
 * @ep: the endpoint
 *
 * An endpoint needs a CQ for KFI_TRANSMIT and one for KFI_RECV (they may be
 * the same), and a connected (MSG) endpoint an EQ for its connection
 * events; an RDM endpoint needs an AV.
 *
 * Context: process context; may sleep.
 * Return: 0; -KFI_ENOCQ when a CQ is missing, -KFI_ENOEQ when the EQ is,
 * -KFI_ENOAV when the AV is; -EINVAL on a bad or already enabled endpoint.
 */
int kfi_enable(struct kfid_ep *ep);
/**
 * kfi_cancel() - take back a posted receive
 * @fid: the endpoint's fid
 * @context: the context the receive (or tagged receive) was posted with
 *
 * The receive completes once, as an error entry with -ECANCELED, before
 * this returns; its buffer is the caller's again. A send, RMA or atomic
 * the provider still queues (kfi_sockets, MSG endpoints) is taken back the
 * same way; one already on the wire is -ENOENT.
 *
 * Context: any but hard interrupt; never sleeps.
 * Return: 0; -ENOENT when no such receive waits (completed, being filled,
 * never posted); -EINVAL on a bad object; -ENOSYS if the provider has no
 * cancel.
 */
int kfi_cancel(struct kfid *fid, void *context);
int kfi_getopt(struct kfid *fid, int level, int optname, void *optval,
	       size_t *optlen);
int kfi_setopt(struct kfid *fid, int level, int optname, const void *optval,
	       size_t optlen);
int kfi_getname(struct kfid *fid, void *addr, size_t *addrlen);
int kfi_getpeer(struct kfid_ep *ep, void *addr, size_t *addrlen);
int kfi_listen(struct kfid_pep *pep);
/**
 * kfi_connect() - connect an enabled MSG endpoint
 * @ep: the endpoint
 * @addr: the peer's address in the domain's format (a sockaddr_in or
 *	sockaddr_in6 on kfi_sockets and kfi_ibverbs, as long as its family
 *	says), or NULL for the destination of the endpoint's info
 * @param: private data for the peer's KFI_CONNREQ, or NULL
 * @paramlen: its length (at most KFI_EQ_DATA_MAX; less on some links)
 *
 * KFI_CONNECTED or an error entry follows on the endpoint's EQ.
 *
 * Context: process context; may sleep.
 * Return: 0; -EINVAL with neither an address nor a destination, or a bad
 * address; -EISCONN (kfi_ibverbs) or -EINVAL (kfi_sockets) when already
 * connecting.
 */
int kfi_connect(struct kfid_ep *ep, const void *addr, const void *param,
		size_t paramlen);
int kfi_accept(struct kfid_ep *ep, const void *param, size_t paramlen);
int kfi_reject(struct kfid_pep *pep, struct kfid *handle, const void *param,
	       size_t paramlen);
int kfi_shutdown(struct kfid_ep *ep, u64 flags);

/* Data transfer, exported: any context but hard interrupt. */
int kfi_recvmsg(struct kfid_ep *ep, const struct kfi_msg *msg, u64 flags);
int kfi_sendmsg(struct kfid_ep *ep, const struct kfi_msg *msg, u64 flags);
int kfi_readmsg(struct kfid_ep *ep, const struct kfi_msg_rma *msg, u64 flags);
int kfi_writemsg(struct kfid_ep *ep, const struct kfi_msg_rma *msg, u64 flags);
int kfi_trecvmsg(struct kfid_ep *ep, const struct kfi_msg_tagged *msg,
		 u64 flags);
int kfi_tsendmsg(struct kfid_ep *ep, const struct kfi_msg_tagged *msg,
		 u64 flags);
int kfi_atomicmsg(struct kfid_ep *ep, const struct kfi_msg_atomic *msg,
		  u64 flags);
int kfi_fetch_atomicmsg(struct kfid_ep *ep, const struct kfi_msg_atomic *msg,
			struct kfi_ioc *resultv, void **result_desc,
			size_t result_count, u64 flags);
int kfi_compare_atomicmsg(struct kfid_ep *ep, const struct kfi_msg_atomic *msg,
			  const struct kfi_ioc *comparev, void **compare_desc,
			  size_t compare_count, struct kfi_ioc *resultv,
			  void **result_desc, size_t result_count, u64 flags);
int kfi_atomicvalid(struct kfid_ep *ep, u32 datatype, u32 op, size_t *count);
int kfi_fetch_atomicvalid(struct kfid_ep *ep, u32 datatype, u32 op,
			  size_t *count);
int kfi_compare_atomicvalid(struct kfid_ep *ep, u32 datatype, u32 op,
			    size_t *count);

#include <kfabric/kfi_endpoint_inline.h>

#endif /* _KFABRIC_KFI_ENDPOINT_H */
