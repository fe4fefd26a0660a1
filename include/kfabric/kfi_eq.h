/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kfabric completion queues, event queues and counters. Included by
 * <kfabric/kfabric.h>. The util implementations kfabric.ko offers providers
 * are in <kfabric/kfi_provider.h>.
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

/* Ops tables: defined for providers in <kfabric/kfi_provider.h>. */
struct kfi_ops_cq;
struct kfi_ops_eq;
struct kfi_ops_cntr;
struct kfid_cq;
struct kfid_eq;
struct kfid_cntr;

/* Returned (negated) by the read calls when an error entry waits at the
 * head of the queue: fetch it with kfi_cq_readerr() / kfi_eq_readerr().
 * Above every errno value, so it never stands for a real I/O error. */
#define KFI_EAVAIL 259
/* kfi_enable(): the endpoint lacks a bound EQ, CQ or AV (libfabric's
 * values, above every errno like KFI_EAVAIL). */
#define KFI_ENOEQ 261
#define KFI_ENOCQ 263
#define KFI_ENOAV 267

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
 * kfi_cntr_wait() sleep (process context only). The read calls return the
 * number of entries (CQ) or bytes (EQ) read, or -EAGAIN when the queue is
 * empty, or -KFI_EAVAIL when an error entry waits at its head. The readerr
 * calls take that entry and return 1 (one entry read), or -EAGAIN when no
 * error entry waits; its err field is a positive errno. */
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

#endif /* _KFABRIC_KFI_EQ_H */
