/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kfabric completion queues, event queues and counters, and the util
 * implementations kfabric.ko provides so that providers need not write
 * their own. Included by <kfabric/kfabric.h>.
 *
 * Two ways to learn of completions and events: poll (kfi_cq_read(),
 * kfi_eq_read(), kfi_cntr_read()), or wait (kfi_cq_sread(), kfi_eq_sread(),
 * kfi_cntr_wait(); process context, interruptible), or be called: a handler
 * given at open runs after each new entry, in the provider's completion
 * context (softirq or process; never sleep in it), the way ib_cq users get
 * their callbacks.
 */
#ifndef _KFABRIC_KFI_EQ_H
#define _KFABRIC_KFI_EQ_H

struct kfid_cq;
struct kfid_eq;
struct kfid_cntr;

/* Returned by the read calls when an error entry waits at the head of the
 * queue: fetch it with kfi_cq_readerr() / kfi_eq_readerr(). */
#define KFI_EAVAIL EIO

/**
 * enum kfi_cq_format - what one completion entry holds
 * @KFI_CQ_FORMAT_UNSPEC: the provider's choice (KFI_CQ_FORMAT_CONTEXT)
 * @KFI_CQ_FORMAT_CONTEXT: struct kfi_cq_entry
 * @KFI_CQ_FORMAT_MSG: struct kfi_cq_msg_entry
 * @KFI_CQ_FORMAT_DATA: struct kfi_cq_data_entry
 * @KFI_CQ_FORMAT_TAGGED: struct kfi_cq_tagged_entry
 */
enum kfi_cq_format {
	KFI_CQ_FORMAT_UNSPEC,
	KFI_CQ_FORMAT_CONTEXT,
	KFI_CQ_FORMAT_MSG,
	KFI_CQ_FORMAT_DATA,
	KFI_CQ_FORMAT_TAGGED,
};

struct kfi_cq_entry {
	void *op_context;
};

struct kfi_cq_msg_entry {
	void *op_context;
	u64 flags;
	size_t len;
};

struct kfi_cq_data_entry {
	void *op_context;
	u64 flags;
	size_t len;
	void *buf;
	u64 data;
};

struct kfi_cq_tagged_entry {
	void *op_context;
	u64 flags;
	size_t len;
	void *buf;
	u64 data;
	u64 tag;
};

/**
 * struct kfi_cq_err_entry - a failed operation
 * @op_context: the operation's context
 * @flags: the operation (KFI_SEND, KFI_RECV, KFI_RMA | KFI_WRITE, ...)
 * @len: bytes transferred
 * @buf: receive buffer, if any
 * @data: remote CQ data, if any
 * @tag: tag, if any
 * @olen: bytes that did not fit (truncated receives)
 * @err: the error, a positive errno (ECANCELED, EMSGSIZE, EACCES, ...)
 * @prov_errno: provider-specific error code
 * @err_data: provider-specific data, or NULL
 * @err_data_size: its size
 */
struct kfi_cq_err_entry {
	void *op_context;
	u64 flags;
	size_t len;
	void *buf;
	u64 data;
	u64 tag;
	size_t olen;
	int err;
	int prov_errno;
	void *err_data;
	size_t err_data_size;
};

typedef void (*kfi_comp_handler)(struct kfid_cq *cq, void *context);

/**
 * struct kfi_cq_attr - completion queue attributes
 * @size: entries the queue holds
 * @flags: reserved, 0
 * @format: enum kfi_cq_format
 * @comp_handler: called after each new entry, or NULL
 */
struct kfi_cq_attr {
	size_t size;
	u64 flags;
	u32 format;
	kfi_comp_handler comp_handler;
};

/**
 * struct kfi_ops_cq - a completion queue's operations
 * @size: sizeof(struct kfi_ops_cq) as the queue was built
 * @read: up to @count entries; their number, -EAGAIN when empty,
 *	-KFI_EAVAIL when an error entry waits
 * @readerr: the error entry at the head
 * @sread: as @read, waiting up to @timeout ms (negative: forever)
 * @signal: wakes the waiters of @sread (they return -ECANCELED)
 */
struct kfi_ops_cq {
	size_t size;
	ssize_t (*read)(struct kfid_cq *cq, void *buf, size_t count);
	ssize_t (*readerr)(struct kfid_cq *cq, struct kfi_cq_err_entry *buf,
			   u64 flags);
	ssize_t (*sread)(struct kfid_cq *cq, void *buf, size_t count,
			 const void *cond, int timeout);
	int (*signal)(struct kfid_cq *cq);
};

/**
 * struct kfid_cq - a completion queue
 * @fid: the object header (fclass KFI_CLASS_CQ)
 * @ops: the queue's operations
 */
struct kfid_cq {
	struct kfid fid;
	const struct kfi_ops_cq *ops;
};

/* Event queue events. */
enum kfi_eq_event {
	KFI_NOTIFY,
	KFI_CONNREQ,
	KFI_CONNECTED,
	KFI_SHUTDOWN,
	KFI_MR_COMPLETE,
	KFI_AV_COMPLETE,
};

/**
 * struct kfi_eq_entry - a generic event
 * @fid: the object it is about
 * @context: that object's context
 * @data: event data
 */
struct kfi_eq_entry {
	struct kfid *fid;
	void *context;
	u64 data;
};

/**
 * struct kfi_eq_cm_entry - a connection event, followed by private data
 * @fid: the endpoint (KFI_CONNECTED, KFI_SHUTDOWN) or passive endpoint
 *	(KFI_CONNREQ)
 * @info: KFI_CONNREQ: the request's kfi_info (with @info->handle); the
 *	reader owns it and frees it with kfi_freeinfo()
 * @data: the peer's private data
 */
struct kfi_eq_cm_entry {
	struct kfid *fid;
	struct kfi_info *info;
	u8 data[];
};

/**
 * struct kfi_eq_err_entry - a failed asynchronous operation
 * @fid: the object it is about
 * @context: that object's context
 * @data: event data
 * @err: the error, a positive errno (ECONNREFUSED, ETIMEDOUT, ...)
 * @prov_errno: provider-specific code
 * @err_data: provider data (a reject's private data), or NULL
 * @err_data_size: its size
 */
struct kfi_eq_err_entry {
	struct kfid *fid;
	void *context;
	u64 data;
	int err;
	int prov_errno;
	void *err_data;
	size_t err_data_size;
};

typedef void (*kfi_event_handler)(struct kfid_eq *eq, void *context);

/**
 * struct kfi_eq_attr - event queue attributes
 * @size: events the queue holds
 * @flags: reserved, 0
 * @event_handler: called after each new event, or NULL
 */
struct kfi_eq_attr {
	size_t size;
	u64 flags;
	kfi_event_handler event_handler;
};

/* The most private data an EQ entry carries. */
#define KFI_EQ_DATA_MAX 256

/**
 * struct kfi_ops_eq - an event queue's operations
 * @size: sizeof(struct kfi_ops_eq) as the queue was built
 * @read: the next event: its size in bytes; -EAGAIN when empty,
 *	-KFI_EAVAIL when an error entry waits. KFI_PEEK in @flags leaves it.
 * @readerr: the error entry at the head
 * @write: queues an event (providers, or ULPs for their own use)
 * @sread: as @read, waiting up to @timeout ms
 */
struct kfi_ops_eq {
	size_t size;
	ssize_t (*read)(struct kfid_eq *eq, u32 *event, void *buf, size_t len,
			u64 flags);
	ssize_t (*readerr)(struct kfid_eq *eq, struct kfi_eq_err_entry *buf,
			   u64 flags);
	ssize_t (*write)(struct kfid_eq *eq, u32 event, const void *buf,
			 size_t len, u64 flags);
	ssize_t (*sread)(struct kfid_eq *eq, u32 *event, void *buf, size_t len,
			 int timeout, u64 flags);
};

#define KFI_PEEK (1ULL << 19)

/**
 * struct kfid_eq - an event queue
 * @fid: the object header (fclass KFI_CLASS_EQ)
 * @ops: the queue's operations
 */
struct kfid_eq {
	struct kfid fid;
	const struct kfi_ops_eq *ops;
};

/**
 * struct kfi_cntr_attr - counter attributes
 * @flags: reserved, 0
 */
struct kfi_cntr_attr {
	u64 flags;
};

/**
 * struct kfi_ops_cntr - a counter's operations
 * @size: sizeof(struct kfi_ops_cntr) as the counter was built
 * @read: the success count
 * @readerr: the error count
 * @add: adds to the success count
 * @set: sets the success count
 * @wait: waits until the success count reaches @threshold (-EIO when the
 *	error count changes meanwhile, -ETIMEDOUT after @timeout ms)
 * @adderr: adds to the error count
 * @seterr: sets the error count
 */
struct kfi_ops_cntr {
	size_t size;
	u64 (*read)(struct kfid_cntr *cntr);
	u64 (*readerr)(struct kfid_cntr *cntr);
	int (*add)(struct kfid_cntr *cntr, u64 value);
	int (*set)(struct kfid_cntr *cntr, u64 value);
	int (*wait)(struct kfid_cntr *cntr, u64 threshold, int timeout);
	int (*adderr)(struct kfid_cntr *cntr, u64 value);
	int (*seterr)(struct kfid_cntr *cntr, u64 value);
};

/**
 * struct kfid_cntr - a counter of completed operations
 * @fid: the object header (fclass KFI_CLASS_CNTR)
 * @ops: the counter's operations
 */
struct kfid_cntr {
	struct kfid fid;
	const struct kfi_ops_cntr *ops;
};

/* Opening: process context, may sleep. */
int kfi_cq_open(struct kfid_domain *domain, struct kfi_cq_attr *attr,
		struct kfid_cq **cq, void *context);
int kfi_eq_open(struct kfid_fabric *fabric, struct kfi_eq_attr *attr,
		struct kfid_eq **eq, void *context);
int kfi_cntr_open(struct kfid_domain *domain, struct kfi_cntr_attr *attr,
		  struct kfid_cntr **cntr, void *context);

/* Reading and writing: any context but hard interrupt; the s-variants and
 * kfi_cntr_wait() sleep (process context only). */
ssize_t kfi_cq_read(struct kfid_cq *cq, void *buf, size_t count);
ssize_t kfi_cq_readerr(struct kfid_cq *cq, struct kfi_cq_err_entry *buf,
		       u64 flags);
ssize_t kfi_cq_sread(struct kfid_cq *cq, void *buf, size_t count,
		     const void *cond, int timeout);
int kfi_cq_signal(struct kfid_cq *cq);
ssize_t kfi_eq_read(struct kfid_eq *eq, u32 *event, void *buf, size_t len,
		    u64 flags);
ssize_t kfi_eq_readerr(struct kfid_eq *eq, struct kfi_eq_err_entry *buf,
		       u64 flags);
ssize_t kfi_eq_write(struct kfid_eq *eq, u32 event, const void *buf,
		     size_t len, u64 flags);
ssize_t kfi_eq_sread(struct kfid_eq *eq, u32 *event, void *buf, size_t len,
		     int timeout, u64 flags);
u64 kfi_cntr_read(struct kfid_cntr *cntr);
u64 kfi_cntr_readerr(struct kfid_cntr *cntr);
int kfi_cntr_add(struct kfid_cntr *cntr, u64 value);
int kfi_cntr_set(struct kfid_cntr *cntr, u64 value);
int kfi_cntr_adderr(struct kfid_cntr *cntr, u64 value);
int kfi_cntr_seterr(struct kfid_cntr *cntr, u64 value);
int kfi_cntr_wait(struct kfid_cntr *cntr, u64 threshold, int timeout);

/* The seed's names for reading an error entry. */
static inline ssize_t kfi_cq_error(struct kfid_cq *cq,
				   struct kfi_cq_err_entry *buf)
{
	return kfi_cq_readerr(cq, buf, 0);
}

static inline ssize_t kfi_eq_error(struct kfid_eq *eq,
				   struct kfi_eq_err_entry *buf)
{
	return kfi_eq_readerr(eq, buf, 0);
}

/*
 * Util implementations for providers (process context, may sleep): a
 * domain's cq_open may simply call kfi_util_cq_open(), a fabric's eq_open
 * kfi_util_eq_open(), a domain's cntr_open kfi_util_cntr_open(). The
 * provider then reports with the calls below, from any context but hard
 * interrupt.
 */
int kfi_util_cq_open(struct kfid_domain *domain, struct kfi_cq_attr *attr,
		     struct kfid_cq **cq, void *context);
int kfi_util_eq_open(struct kfid_fabric *fabric, struct kfi_eq_attr *attr,
		     struct kfid_eq **eq, void *context);
int kfi_util_cntr_open(struct kfid_domain *domain, struct kfi_cntr_attr *attr,
		       struct kfid_cntr **cntr, void *context);
/*
 * A domain's av_open may call kfi_util_av_open() when its addresses are
 * socket addresses (sockaddr_in, sockaddr_in6): kfi_addr_t values are
 * indexes in insert order; kfi_av_lookup() works from any context but hard
 * interrupt; kfi_av_insertsvc() is not supported (-ENOSYS).
 */
int kfi_util_av_open(struct kfid_domain *domain, struct kfi_av_attr *attr,
		     struct kfid_av **av, void *context);

/**
 * kfi_util_cq_write() - report a completion to a util CQ
 * @cq: a CQ from kfi_util_cq_open()
 * @entry: the completion, in the tagged layout (the CQ keeps what its format
 *	holds)
 *
 * Return: 0; -ENOSPC when the queue is full: the completion is lost and the
 * queue reports an -EOVERFLOW error entry next, so the ULP learns of it.
 */
int kfi_util_cq_write(struct kfid_cq *cq, const struct kfi_cq_tagged_entry *entry);

/**
 * kfi_util_cq_write_err() - report a failed operation to a util CQ
 * @cq: a CQ from kfi_util_cq_open()
 * @err: the error entry; @err->err_data is copied (at most
 *	KFI_EQ_DATA_MAX bytes)
 *
 * Return: 0 or -ENOSPC as kfi_util_cq_write().
 */
int kfi_util_cq_write_err(struct kfid_cq *cq,
			  const struct kfi_cq_err_entry *err);

/**
 * kfi_util_eq_write_err() - report a failed asynchronous operation to a
 * util EQ
 * @eq: an EQ from kfi_util_eq_open()
 * @err: the error entry; @err->err_data is copied (at most
 *	KFI_EQ_DATA_MAX bytes)
 *
 * Return: 0 or -ENOSPC.
 */
int kfi_util_eq_write_err(struct kfid_eq *eq,
			  const struct kfi_eq_err_entry *err);

#endif /* _KFABRIC_KFI_EQ_H */
