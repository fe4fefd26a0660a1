/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kfabric: the Linux kernel fabric interface.
 *
 * This header is the contract between kfabric.ko, its providers and the
 * kernel ULPs that use it. Every kfi_* function declared here is exported by
 * kfabric.ko; it checks its arguments and dispatches to the provider that
 * created the object.
 *
 * Objects: every object begins with a struct kfid. Objects are created by
 * the kfi_* calls and destroyed by kfi_close(). While an object is open it
 * pins the provider that created it: the provider's module cannot be
 * unloaded and the provider cannot be deregistered.
 *
 * Errors are negative kernel errno values.
 */
#ifndef _KFABRIC_KFABRIC_H
#define _KFABRIC_KFABRIC_H

#include <linux/types.h>

/* The API version: major changes break the ABI, minor ones extend it. */
#define KFI_MAJOR_VERSION 1
#define KFI_MINOR_VERSION 0
#define KFI_VERSION(major, minor) (((__u32)(major) << 16) | (__u16)(minor))
#define KFI_MAJOR(version) ((__u32)(version) >> 16)
#define KFI_MINOR(version) ((__u32)(version) & 0xffff)
#define KFI_API_VERSION KFI_VERSION(KFI_MAJOR_VERSION, KFI_MINOR_VERSION)

/* The longest provider, fabric or domain name, terminating NUL included. */
#define KFI_NAME_MAX 32

/*
 * Capabilities (kfi_info.caps, kfid_ep.caps) and operation flags share one
 * bit space: a capability bit is also the flag that asks for it.
 */
#define KFI_MSG			(1ULL << 1)
#define KFI_RMA			(1ULL << 2)
#define KFI_TAGGED		(1ULL << 3)
#define KFI_ATOMIC		(1ULL << 4)
#define KFI_READ		(1ULL << 8)
#define KFI_WRITE		(1ULL << 9)
#define KFI_RECV		(1ULL << 10)
#define KFI_SEND		(1ULL << 11)
#define KFI_TRANSMIT		(1ULL << 11)	/* = KFI_SEND */
#define KFI_REMOTE_READ		(1ULL << 12)
#define KFI_REMOTE_WRITE	(1ULL << 13)
/* RMA into registered persistent memory; commit completion flushes it. */
#define KFI_RMA_PMEM		(1ULL << 14)
#define KFI_MULTI_RECV		(1ULL << 16)
/* The operation carries 64 bits of remote completion data. */
#define KFI_REMOTE_CQ_DATA	(1ULL << 17)
#define KFI_MORE		(1ULL << 18)
/* Bind flag: only operations with KFI_COMPLETION produce a completion. */
#define KFI_SELECTIVE_COMPLETION (1ULL << 23)
#define KFI_COMPLETION		(1ULL << 24)
/* The source buffer may be reused as soon as the call returns. */
#define KFI_INJECT		(1ULL << 25)
#define KFI_FENCE		(1ULL << 26)
/*
 * Completion levels, weakest first. A completion is reported when:
 * INJECT_COMPLETE:   the source buffer may be reused;
 * TRANSMIT_COMPLETE: the data left the local endpoint and reached the peer
 *                    (for a reliable endpoint: the peer has it);
 * DELIVERY_COMPLETE: the target placed the data; its result is visible to
 *                    the target (for RMA: in the target memory);
 * COMMIT_COMPLETE:   as DELIVERY_COMPLETE, and the result is persistent at
 *                    the target (for KFI_RMA_PMEM regions: flushed to the
 *                    persistence domain).
 */
#define KFI_INJECT_COMPLETE	(1ULL << 28)
#define KFI_TRANSMIT_COMPLETE	(1ULL << 29)
#define KFI_DELIVERY_COMPLETE	(1ULL << 30)
#define KFI_COMMIT_COMPLETE	(1ULL << 31)
/* kfi_getinfo: node and service name the local (source) address. */
#define KFI_SOURCE		(1ULL << 57)
#define KFI_NUMERICHOST		(1ULL << 55)

/* The flags an operation call accepts (the rest are refused: -EINVAL). */
#define KFI_OP_FLAGS /* u64 */ (KFI_COMPLETION | KFI_INJECT | KFI_FENCE | KFI_MORE | \
		      KFI_REMOTE_CQ_DATA | KFI_INJECT_COMPLETE | \
		      KFI_TRANSMIT_COMPLETE | KFI_DELIVERY_COMPLETE | \
		      KFI_COMMIT_COMPLETE | KFI_MULTI_RECV)

/* An address handle of an address vector; KFI_ADDR_UNSPEC when unused. */
typedef u64 kfi_addr_t;
#define KFI_ADDR_UNSPEC (~0ULL)
#define KFI_ADDR_NOTAVAIL (~0ULL)

/**
 * enum kfi_fclass - the class of an object, the first field of its kfid
 */
enum kfi_fclass {
	KFI_CLASS_UNSPEC,
	KFI_CLASS_FABRIC,
	KFI_CLASS_DOMAIN,
	KFI_CLASS_EP,
	KFI_CLASS_PEP,
	KFI_CLASS_AV,
	KFI_CLASS_MR,
	KFI_CLASS_EQ,
	KFI_CLASS_CQ,
	KFI_CLASS_CNTR,
	KFI_CLASS_MAX,
};

/**
 * enum kfi_ep_type - endpoint types
 * @KFI_EP_UNSPEC: any (in hints)
 * @KFI_EP_MSG: reliable, connected
 * @KFI_EP_RDM: reliable datagram, peers addressed through an AV
 */
enum kfi_ep_type {
	KFI_EP_UNSPEC,
	KFI_EP_MSG,
	KFI_EP_RDM,
};

/**
 * enum kfi_addr_format - formats of kfi_info.src_addr / dest_addr
 * @KFI_FORMAT_UNSPEC: any (in hints)
 * @KFI_SOCKADDR_IN: struct sockaddr_in
 * @KFI_SOCKADDR_IN6: struct sockaddr_in6
 * @KFI_ADDR_IB_GID: struct kfi_addr_ib (an InfiniBand GID with a service id)
 */
enum kfi_addr_format {
	KFI_FORMAT_UNSPEC,
	KFI_SOCKADDR_IN,
	KFI_SOCKADDR_IN6,
	KFI_ADDR_IB_GID,
};

/**
 * struct kfi_addr_ib - an InfiniBand address
 * @gid: the port GID, network byte order
 * @service_id: the rdma_cm service id
 */
struct kfi_addr_ib {
	u8 gid[16];
	u64 service_id;
};

/* Ops tables: defined for providers in <kfabric/kfi_provider.h>. */
struct kfi_ops;
struct kfi_ops_fabric;
struct kfid;
struct kfid_fabric;
struct kfid_domain;
struct net;
struct kfi_provider;

/* kfi_control() commands. */
#define KFI_ENABLE	1	/* endpoints: start operating */
#define KFI_GETFIDFLAG	2	/* arg: u64 *, the object's default flags */
#define KFI_SETFIDFLAG	3	/* arg: u64 *, set the object's default flags */

/**
 * struct kfid - the header every kfabric object begins with
 * @fclass: enum kfi_fclass of the object
 * @context: the ULP's pointer given when the object was opened
 * @ops: the provider's operations common to all objects
 * @core: owned by kfabric.ko (the provider reference the object holds);
 *	providers and ULPs must not touch it
 */
struct kfid {
	u32 fclass;
	void *context;
	const struct kfi_ops *ops;
	void *core;
};

/**
 * struct kfi_tx_attr - transmit attributes of an endpoint
 * @caps: transmit capabilities (KFI_MSG, KFI_RMA, KFI_READ, ...)
 * @mode: requirements on the ULP
 * @op_flags: default and supported operation flags (completion levels)
 * @msg_order: ordering guarantees between messages
 * @inject_size: largest KFI_INJECT payload
 * @size: transmit operations that may be outstanding
 * @iov_limit: most local buffers in one operation
 * @rma_iov_limit: most remote buffers in one RMA operation
 */
struct kfi_tx_attr {
	u64 caps;
	u64 mode;
	u64 op_flags;
	u64 msg_order;
	size_t inject_size;
	size_t size;
	size_t iov_limit;
	size_t rma_iov_limit;
};

/**
 * struct kfi_rx_attr - receive attributes of an endpoint
 * @caps: receive capabilities (KFI_MSG, KFI_TAGGED, KFI_REMOTE_WRITE, ...)
 * @mode: requirements on the ULP
 * @op_flags: default and supported operation flags
 * @msg_order: ordering guarantees between messages
 * @size: receive operations that may be posted
 * @iov_limit: most buffers in one receive
 */
struct kfi_rx_attr {
	u64 caps;
	u64 mode;
	u64 op_flags;
	u64 msg_order;
	size_t size;
	size_t iov_limit;
};

/*
 * Wire protocols (kfi_ep_attr.protocol), libfabric's values. On the RDMA
 * ones a remote access error (bad key, range or rights) ends the
 * connection, and data of a failed multi-buffer transfer may be placed.
 */
#define KFI_PROTO_UNSPEC	0
#define KFI_PROTO_RDMA_CM_IB_RC	1
#define KFI_PROTO_IWARP		2

/**
 * struct kfi_ep_attr - endpoint attributes
 * @type: enum kfi_ep_type
 * @protocol: provider-specific wire protocol id
 * @protocol_version: its version
 * @max_msg_size: largest message or RMA transfer
 * @max_order_raw_size: largest read-after-write ordered size
 * @mem_tag_format: tag bits the provider matches on (0: all 64)
 * @tx_ctx_cnt: transmit contexts (1)
 * @rx_ctx_cnt: receive contexts (1)
 */
struct kfi_ep_attr {
	u32 type;
	u32 protocol;
	u32 protocol_version;
	size_t max_msg_size;
	size_t max_order_raw_size;
	u64 mem_tag_format;
	size_t tx_ctx_cnt;
	size_t rx_ctx_cnt;
};

/**
 * enum kfi_threading - how much a domain serializes for its users
 * @KFI_THREAD_UNSPEC: in hints: any
 * @KFI_THREAD_SAFE: every call may come from any thread at any time
 * @KFI_THREAD_FID: calls on one object must be serialized by the ULP
 * @KFI_THREAD_DOMAIN: calls on one domain must be serialized by the ULP
 * @KFI_THREAD_COMPLETION: calls tied to one CQ must be serialized
 * @KFI_THREAD_ENDPOINT: calls on one endpoint must be serialized
 *
 * A hint other than KFI_THREAD_UNSPEC matches a domain with the same
 * model or with KFI_THREAD_SAFE.
 */
enum kfi_threading {
	KFI_THREAD_UNSPEC,
	KFI_THREAD_SAFE,
	KFI_THREAD_FID,
	KFI_THREAD_DOMAIN,
	KFI_THREAD_COMPLETION,
	KFI_THREAD_ENDPOINT,
};

/**
 * enum kfi_progress - who moves operations forward
 * @KFI_PROGRESS_UNSPEC: in hints: any
 * @KFI_PROGRESS_AUTO: the provider (its device or threads), with no calls
 *	from the ULP
 * @KFI_PROGRESS_MANUAL: only while the ULP calls into the provider (reads
 *	its CQ or EQ)
 *
 * A hint of KFI_PROGRESS_MANUAL is met by either; KFI_PROGRESS_AUTO only
 * by KFI_PROGRESS_AUTO.
 */
enum kfi_progress {
	KFI_PROGRESS_UNSPEC,
	KFI_PROGRESS_AUTO,
	KFI_PROGRESS_MANUAL,
};

/* Memory region modes (kfi_domain_attr.mr_mode), libfabric's values. */
/* Local buffers need the kfi_mr_desc() of a region that holds them. */
#define KFI_MR_LOCAL		(1ULL << 2)
/* Remote addresses are the target's virtual addresses, not offsets. */
#define KFI_MR_VIRT_ADDR	(1ULL << 4)
/* The provider chooses every key; requested_key is ignored. */
#define KFI_MR_PROV_KEY		(1ULL << 6)

/**
 * struct kfi_domain_attr - domain attributes
 * @domain: an open domain these attributes describe, or NULL
 * @name: the domain's name (a device, an interface)
 * @cq_data_size: bytes of remote CQ data an operation can carry
 * @cq_cnt: CQs the domain can open
 * @ep_cnt: endpoints the domain can open
 * @cntr_cnt: counters the domain can open and its endpoints can bind
 *	(SIZE_MAX: bounded by memory only); 0 when its endpoints bind none
 *	(kfi_ep_bind() of a counter is then -EOPNOTSUPP)
 * @mr_key_size: bytes of an MR key
 * @mr_iov_limit: most buffers in one registration
 * @max_err_data: bytes of provider error data in error entries
 * @threading: enum kfi_threading: which concurrent calls the domain's
 *	objects allow without the ULP's own locking
 * @control_progress: enum kfi_progress of connection management
 * @data_progress: enum kfi_progress of data transfers
 * @mr_mode: KFI_MR_* bits the provider requires of the ULP's use of
 *	memory regions (0: none); in hints, the bits the ULP can live with
 * @net: the network namespace the domain's addresses and connections live
 *	in; NULL for the initial namespace. Set it in the hints of
 *	kfi_getinfo(); providers copy it into their entries. The ULP keeps the
 *	namespace alive while objects opened from such an entry are open (as
 *	for any kernel socket, the provider takes no reference on it).
 */
struct kfi_domain_attr {
	struct kfid_domain *domain;
	char *name;
	size_t cq_data_size;
	size_t cq_cnt;
	size_t ep_cnt;
	size_t cntr_cnt;
	size_t mr_key_size;
	size_t mr_iov_limit;
	size_t max_err_data;
	u32 threading;
	u32 control_progress;
	u32 data_progress;
	u64 mr_mode;
	struct net *net;
};

/**
 * struct kfi_fabric_attr - what a fabric is
 * @fabric: an open fabric these attributes describe, or NULL
 * @name: the fabric's name
 * @prov_name: the provider that serves it
 * @prov_version: the provider's version, KFI_VERSION(major, minor)
 * @api_version: the kfabric API version the provider was built against
 */
struct kfi_fabric_attr {
	struct kfid_fabric *fabric;
	char *name;
	char *prov_name;
	u32 prov_version;
	u32 api_version;
};

/**
 * struct kfi_info - one way to reach a fabric, as kfi_getinfo() lists them
 * @next: the next entry of the list
 * @caps: capabilities (union of tx and rx capabilities)
 * @mode: requirements on the ULP
 * @addr_format: enum kfi_addr_format of @src_addr and @dest_addr
 * @src_addrlen: bytes at @src_addr
 * @dest_addrlen: bytes at @dest_addr
 * @src_addr: the local address, or NULL
 * @dest_addr: the peer's address, or NULL
 * @handle: in a KFI_CONNREQ event: the connection request to accept/reject
 * @tx_attr: transmit attributes
 * @rx_attr: receive attributes
 * @ep_attr: endpoint attributes
 * @domain_attr: domain attributes
 * @fabric_attr: fabric attributes
 *
 * Entries are allocated with kfi_allocinfo() (never on the stack or with
 * kmalloc directly) and freed with kfi_freeinfo(). The names and addresses
 * kfabric.ko made for an entry (kfi_info_set(), kfi_dupinfo(), the entries
 * of kfi_getinfo()) are owned by the entry and freed with it; a pointer the
 * caller stores in a field itself (a string literal as a hint's prov_name)
 * stays the caller's and is never freed by kfabric.ko.
 */
struct kfi_info {
	struct kfi_info *next;
	u64 caps;
	u64 mode;
	u32 addr_format;
	size_t src_addrlen;
	size_t dest_addrlen;
	void *src_addr;
	void *dest_addr;
	struct kfid *handle;
	struct kfi_tx_attr *tx_attr;
	struct kfi_rx_attr *rx_attr;
	struct kfi_ep_attr *ep_attr;
	struct kfi_domain_attr *domain_attr;
	struct kfi_fabric_attr *fabric_attr;
};

struct kfi_eq_attr;
struct kfid_eq;
struct kfid_pep;

/**
 * struct kfid_fabric - a fabric: the provider's view of one network
 * @fid: the object header (fclass KFI_CLASS_FABRIC)
 * @ops: the fabric's operations
 * @api_version: the API version the fabric was opened with
 */
struct kfid_fabric {
	struct kfid fid;
	const struct kfi_ops_fabric *ops;
	u32 api_version;
};

/**
 * kfi_getinfo() - list the ways to reach a fabric that match @hints
 * @version: KFI_API_VERSION as the caller was built
 * @node: a host name or numeric address, or NULL
 * @service: a port or service name, or NULL
 * @flags: KFI_SOURCE (@node/@service are the local address), KFI_NUMERICHOST
 * @hints: what the caller needs, or NULL for everything: entries must have
 *	all of @hints->caps, need no mode bit outside @hints->mode, and match
 *	every endpoint type, address format and provider, fabric or domain
 *	name @hints sets
 * @info: on success, a list to free with kfi_freeinfo()
 *
 * Every registered provider is asked; an unknown provider name in @hints
 * matches nothing.
 *
 * Context: process context; may sleep.
 * Return: 0; -EINVAL on bad arguments or version; -ENODATA when nothing
 * matches; -ENOMEM.
 */
int kfi_getinfo(u32 version, const char *node, const char *service, u64 flags,
		const struct kfi_info *hints, struct kfi_info **info);

/**
 * kfi_allocinfo() - a zeroed kfi_info with all its attribute structures
 *
 * Context: process context; may sleep.
 * Return: the entry, or NULL when out of memory.
 */
struct kfi_info *kfi_allocinfo(void);

/**
 * enum kfi_info_field - the name and address fields of a kfi_info
 * @KFI_INFO_SRC_ADDR: src_addr (and src_addrlen)
 * @KFI_INFO_DEST_ADDR: dest_addr (and dest_addrlen)
 * @KFI_INFO_FABRIC_NAME: fabric_attr->name
 * @KFI_INFO_PROV_NAME: fabric_attr->prov_name
 * @KFI_INFO_DOMAIN_NAME: domain_attr->name
 * @KFI_INFO_FIELD_LAST: the number of fields
 */
enum kfi_info_field {
	KFI_INFO_SRC_ADDR,
	KFI_INFO_DEST_ADDR,
	KFI_INFO_FABRIC_NAME,
	KFI_INFO_PROV_NAME,
	KFI_INFO_DOMAIN_NAME,
	KFI_INFO_FIELD_LAST,
};

/**
 * kfi_info_set() - set a name or address of an entry to a copy the entry owns
 * @info: an entry from kfi_allocinfo(), kfi_dupinfo() or kfi_getinfo()
 * @field: which field
 * @val: a NUL-terminated string (names) or @len bytes (addresses); NULL
 *	clears the field
 * @len: the address's length (1 to sizeof(struct sockaddr_storage));
 *	ignored for names
 *
 * The copy is freed with the entry, or when the field is set again.
 * Providers build their getinfo and CONNREQ entries with it.
 *
 * Context: process context; may sleep.
 * Return: 0; -EINVAL on a NULL entry, an unknown field or a bad length;
 * -ENOMEM.
 */
int kfi_info_set(struct kfi_info *info, enum kfi_info_field field,
		 const void *val, size_t len);

/**
 * kfi_dupinfo() - a deep copy of one kfi_info entry (not of its list)
 * @info: the entry to copy
 *
 * Context: process context; may sleep.
 * Return: the copy (its @next is NULL), or NULL on NULL or no memory.
 */
struct kfi_info *kfi_dupinfo(const struct kfi_info *info);

/**
 * kfi_freeinfo() - free a list of kfi_info entries
 * @info: the list's head, or NULL
 *
 * Context: any context that may free memory (not hard interrupt).
 */
void kfi_freeinfo(struct kfi_info *info);

/**
 * kfi_fabric() - open a fabric of the provider named in @attr
 * @attr: the fabric to open; @attr->prov_name selects the provider
 * @fabric: on success, the new fabric
 * @context: the ULP's pointer, stored in the fabric's kfid
 *
 * Context: process context; may sleep.
 * Return: 0; -EINVAL on a NULL argument or a missing provider name;
 * -ENODEV when no registered provider has that name; -ENOSYS when the
 * provider opens no fabrics; or the provider's error.
 */
int kfi_fabric(const struct kfi_fabric_attr *attr, struct kfid_fabric **fabric,
	       void *context);

/**
 * kfi_close() - close any kfabric object
 * @fid: the object's header
 *
 * Releases the object and the provider reference it held, and drops
 * from the util EQs it was bound to its unread connection events and
 * error entries (a passive endpoint's KFI_CONNREQs too, their infos
 * freed). After a successful close the object must not be used
 * again. Objects bound to
 * others are closed before them (endpoints before their CQs, EQs and
 * domain; domains before their fabric).
 *
 * Context: process context; may sleep.
 * Return: 0; -EINVAL on NULL or an object that is not open (closed
 * already, for one: the pointer is looked up before it is read); -EBUSY when
 * another object still uses it, or a thread sleeps in the queue's
 * kfi_cq_sread(), kfi_eq_sread() or kfi_cntr_wait() (util queues); or the
 * provider's error, in which case the object stays open.
 */
int kfi_close(struct kfid *fid);

/**
 * kfi_control() - an object-specific command
 * @fid: the object
 * @command: KFI_ENABLE, KFI_GETFIDFLAG, KFI_SETFIDFLAG or provider-defined
 * @arg: the command's argument
 *
 * Context: process context; may sleep.
 * Return: 0, -EINVAL on a bad object, -ENOSYS when the object has no such
 * command, or the provider's error.
 */
int kfi_control(struct kfid *fid, int command, void *arg);

/**
 * kfi_strerror() - a short text for a kfabric error code
 * @errnum: a negative errno value as returned by the kfi_* calls
 *
 * Context: any.
 * Return: a static string; never NULL.
 */
const char *kfi_strerror(int errnum);

#include <kfabric/kfi_domain.h>
#include <kfabric/kfi_endpoint.h>
#include <kfabric/kfi_eq.h>

#endif /* _KFABRIC_KFABRIC_H */
