/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kfabric provider interface: the whole contract between a provider module
 * and kfabric.ko, in one place. The ULP headers (<kfabric/kfabric.h> and
 * what it includes) declare the objects and the kfi_* calls; this one adds
 * what only providers use: registration, every ops table, the util queues
 * kfabric.ko implements for providers, and helpers.
 *
 * A provider fills a struct kfi_provider, registers it from its module_init
 * and deregisters it from its module_exit. kfabric.ko takes a reference on
 * @owner for every object the provider creates, so the module cannot be
 * unloaded while an object of it is open.
 */
#ifndef _KFABRIC_KFI_PROVIDER_H
#define _KFABRIC_KFI_PROVIDER_H

#include <kfabric/kfabric.h>

struct module;

/**
 * struct kfi_provider - a provider's registration
 * @name: unique provider name, at most KFI_NAME_MAX - 1 characters
 * @version: the provider's own version, KFI_VERSION(major, minor)
 * @owner: the module that implements the provider (THIS_MODULE); pinned by
 *	every open object of the provider
 * @getinfo: lists what the provider offers for @node/@service/@flags; the
 *	entries are made with kfi_allocinfo() and linked through @next. The
 *	core filters them by @hints afterwards, so a provider may return more
 *	than matches (it may use @hints to skip work). Returns 0 or -ENODATA
 *	(nothing), -ENOMEM, ...; may be NULL (the provider lists nothing).
 * @fabric: opens a fabric; may be NULL (kfi_fabric() then fails with
 *	-ENOSYS).
 *
 * The callbacks are called in process context with the provider pinned.
 */
struct kfi_provider {
	const char *name;
	u32 version;
	struct module *owner;
	int (*getinfo)(u32 version, const char *node, const char *service,
		       u64 flags, const struct kfi_info *hints,
		       struct kfi_info **info);
	int (*fabric)(const struct kfi_fabric_attr *attr,
		      struct kfid_fabric **fabric, void *context);
};

/**
 * kfi_provider_register() - make a provider available
 * @version: KFI_API_VERSION as the provider was built
 * @prov: the provider; must stay valid until deregistered
 *
 * The major version must equal kfabric.ko's and the minor version must not
 * be newer than kfabric.ko's.
 *
 * Context: process context; may sleep.
 * Return: 0; -EINVAL on a NULL or unnamed provider, a name that is too long,
 * a provider in a module whose @owner is not set (its objects pin the
 * module through it), or an API version kfabric.ko does not serve; -EEXIST
 * when a provider of that name is registered already.
 */
int kfi_provider_register(u32 version, struct kfi_provider *prov);

/**
 * kfi_provider_deregister() - withdraw a provider
 * @prov: a provider passed to kfi_provider_register()
 *
 * Refused while any object of the provider is open, or while a call into
 * it (kfi_fabric()) is in flight: each holds a reference on the provider.
 *
 * Context: process context; may sleep.
 * Return: 0; -EINVAL on NULL; -ENOENT when @prov is not registered; -EBUSY
 * while objects of the provider are open.
 */
int kfi_provider_deregister(struct kfi_provider *prov);


/*
 * The ops tables a provider fills. Every table starts with its size as the
 * provider was built; kfabric.ko treats a slot beyond it, or NULL, as "not
 * implemented" (-ENOSYS). kfabric.ko checks the arguments of every kfi_*
 * call before it calls a slot (see Documentation/api.rst, "Data
 * transfer"), so a provider sees open objects of the right class and
 * well-formed buffer lists.
 */

/* ---- Every object: its common operations; fabrics. ---- */

/**
 * struct kfi_ops - operations every object has
 * @size: sizeof(struct kfi_ops) as the provider was built; the core never
 *	calls a slot beyond it
 * @close: releases the object; called by kfi_close() in process context
 * @bind: associates another object with this one (kfi_ep_bind(), ...)
 * @control: object-specific commands (kfi_control(), kfi_enable())
 */
struct kfi_ops {
	size_t size;
	int (*close)(struct kfid *fid);
	int (*bind)(struct kfid *fid, struct kfid *bfid, u64 flags);
	int (*control)(struct kfid *fid, int command, void *arg);
};

/**
 * struct kfi_ops_fabric - a fabric's operations
 * @size: sizeof(struct kfi_ops_fabric) as the provider was built
 * @domain: opens a domain (kfi_domain())
 * @passive_ep: opens a passive endpoint (kfi_passive_ep())
 * @eq_open: opens an event queue (kfi_eq_open()); providers usually pass
 *	kfi_util_eq_open() here
 */
struct kfi_ops_fabric {
	size_t size;
	int (*domain)(struct kfid_fabric *fabric, struct kfi_info *info,
		      struct kfid_domain **domain, void *context);
	int (*passive_ep)(struct kfid_fabric *fabric, struct kfi_info *info,
			  struct kfid_pep **pep, void *context);
	int (*eq_open)(struct kfid_fabric *fabric, struct kfi_eq_attr *attr,
		       struct kfid_eq **eq, void *context);
};


/* ---- Domains, memory regions, address vectors. ---- */

/**
 * struct kfi_ops_mr - memory registration of a domain
 * @size: sizeof(struct kfi_ops_mr) as the provider was built
 * @regattr: registers the buffers of @attr; @flags may hold KFI_RMA_PMEM
 * @alloc: makes an unmapped region for per-I/O mapping (kfi_mr_alloc());
 *	process context
 * @map: maps the checked buffers of @map into a region of @alloc with a
 *	fresh key, stored in @mr->key (kfi_mr_map()); any context but hard
 *	interrupt, must not sleep or allocate
 * @unmap: invalidates the mapping (kfi_mr_unmap()); same context rules
 *
 * A provider sets &struct kfid_mr.ops of its regions to this table.
 */
struct kfi_ops_mr {
	size_t size;
	int (*regattr)(struct kfid_domain *domain, const struct kfi_mr_attr *attr,
		       u64 flags, struct kfid_mr **mr);
	int (*alloc)(struct kfid_domain *domain, size_t max_segs, u64 access,
		     u64 flags, struct kfid_mr **mr);
	int (*map)(struct kfid_mr *mr, const struct kfi_mr_map *map);
	int (*unmap)(struct kfid_mr *mr);
};

/**
 * struct kfi_ops_domain - a domain's operations
 * @size: sizeof(struct kfi_ops_domain) as the provider was built
 * @av_open: opens an address vector
 * @cq_open: opens a completion queue; usually kfi_util_cq_open()
 * @endpoint: opens an active endpoint
 * @cntr_open: opens a counter; usually kfi_util_cntr_open()
 */
struct kfi_ops_domain {
	size_t size;
	int (*av_open)(struct kfid_domain *domain, struct kfi_av_attr *attr,
		       struct kfid_av **av, void *context);
	int (*cq_open)(struct kfid_domain *domain, struct kfi_cq_attr *attr,
		       struct kfid_cq **cq, void *context);
	int (*endpoint)(struct kfid_domain *domain, struct kfi_info *info,
			struct kfid_ep **ep, void *context);
	int (*cntr_open)(struct kfid_domain *domain, struct kfi_cntr_attr *attr,
			 struct kfid_cntr **cntr, void *context);
};

/**
 * struct kfi_ops_av - an address vector's operations
 * @size: sizeof(struct kfi_ops_av) as the provider was built
 * @insert: adds @count addresses of the domain's format
 * @insertsvc: adds the address of @node/@service
 * @remove: removes @count addresses
 * @lookup: copies the address of @fi_addr to @addr (at most *@addrlen bytes;
 *	*@addrlen is set to the full length)
 */
struct kfi_ops_av {
	size_t size;
	int (*insert)(struct kfid_av *av, const void *addr, size_t count,
		      kfi_addr_t *fi_addr, u64 flags, void *context);
	int (*insertsvc)(struct kfid_av *av, const char *node, const char *service,
			 kfi_addr_t *fi_addr, u64 flags, void *context);
	int (*remove)(struct kfid_av *av, kfi_addr_t *fi_addr, size_t count,
		      u64 flags);
	int (*lookup)(struct kfid_av *av, kfi_addr_t fi_addr, void *addr,
		      size_t *addrlen);
};


/* ---- Endpoints: control, connection management, data transfer. ---- */

/**
 * struct kfi_ops_ep - endpoint control
 * @size: sizeof(struct kfi_ops_ep) as the provider was built
 * @cancel: cancels the queued operation with @context; it completes with
 *	-ECANCELED
 * @getopt: reads an option
 * @setopt: sets an option
 */
struct kfi_ops_ep {
	size_t size;
	int (*cancel)(struct kfid *fid, void *context);
	int (*getopt)(struct kfid *fid, int level, int optname, void *optval,
		      size_t *optlen);
	int (*setopt)(struct kfid *fid, int level, int optname,
		      const void *optval, size_t optlen);
};

/**
 * struct kfi_ops_cm - connection management
 * @size: sizeof(struct kfi_ops_cm) as the provider was built
 * @getname: the local address
 * @getpeer: the peer's address
 * @connect: starts connecting to @addr with private data @param
 * @listen: starts listening (passive endpoints)
 * @accept: accepts the connection request the endpoint was opened for
 * @reject: rejects connection request @handle with private data
 * @shutdown: ends the connection
 */
struct kfi_ops_cm {
	size_t size;
	int (*getname)(struct kfid *fid, void *addr, size_t *addrlen);
	int (*getpeer)(struct kfid_ep *ep, void *addr, size_t *addrlen);
	int (*connect)(struct kfid_ep *ep, const void *addr, const void *param,
		       size_t paramlen);
	int (*listen)(struct kfid_pep *pep);
	int (*accept)(struct kfid_ep *ep, const void *param, size_t paramlen);
	int (*reject)(struct kfid_pep *pep, struct kfid *handle,
		      const void *param, size_t paramlen);
	int (*shutdown)(struct kfid_ep *ep, u64 flags);
};

/**
 * struct kfi_ops_msg - messages
 * @size: sizeof(struct kfi_ops_msg) as the provider was built
 * @recvmsg: posts a receive
 * @sendmsg: posts a send (KFI_INJECT, KFI_REMOTE_CQ_DATA, completion levels)
 */
struct kfi_ops_msg {
	size_t size;
	int (*recvmsg)(struct kfid_ep *ep, const struct kfi_msg *msg, u64 flags);
	int (*sendmsg)(struct kfid_ep *ep, const struct kfi_msg *msg, u64 flags);
};

/**
 * struct kfi_ops_rma - remote memory access
 * @size: sizeof(struct kfi_ops_rma) as the provider was built
 * @readmsg: reads remote memory into the local buffers
 * @writemsg: writes the local buffers to remote memory
 */
struct kfi_ops_rma {
	size_t size;
	int (*readmsg)(struct kfid_ep *ep, const struct kfi_msg_rma *msg,
		       u64 flags);
	int (*writemsg)(struct kfid_ep *ep, const struct kfi_msg_rma *msg,
			u64 flags);
};

/**
 * struct kfi_ops_tagged - tagged messages
 * @size: sizeof(struct kfi_ops_tagged) as the provider was built
 * @recvmsg: posts a tagged receive
 * @sendmsg: posts a tagged send
 */
struct kfi_ops_tagged {
	size_t size;
	int (*recvmsg)(struct kfid_ep *ep, const struct kfi_msg_tagged *msg,
		       u64 flags);
	int (*sendmsg)(struct kfid_ep *ep, const struct kfi_msg_tagged *msg,
		       u64 flags);
};

/**
 * struct kfi_ops_atomic - atomics
 * @size: sizeof(struct kfi_ops_atomic) as the provider was built
 * @writemsg: target = op(target, source)
 * @readwritemsg: as @writemsg, returning the old target in @resultv
 * @compwritemsg: compare-and-swap family, returning the old target
 * @writevalid: whether @writemsg supports (@datatype, @op); *@count: most
 *	elements in one operation
 * @readwritevalid: the same for @readwritemsg
 * @compwritevalid: the same for @compwritemsg
 */
struct kfi_ops_atomic {
	size_t size;
	int (*writemsg)(struct kfid_ep *ep, const struct kfi_msg_atomic *msg,
			u64 flags);
	int (*readwritemsg)(struct kfid_ep *ep, const struct kfi_msg_atomic *msg,
			    struct kfi_ioc *resultv, void **result_desc,
			    size_t result_count, u64 flags);
	int (*compwritemsg)(struct kfid_ep *ep, const struct kfi_msg_atomic *msg,
			    const struct kfi_ioc *comparev, void **compare_desc,
			    size_t compare_count, struct kfi_ioc *resultv,
			    void **result_desc, size_t result_count, u64 flags);
	int (*writevalid)(struct kfid_ep *ep, u32 datatype, u32 op,
			  size_t *count);
	int (*readwritevalid)(struct kfid_ep *ep, u32 datatype, u32 op,
			      size_t *count);
	int (*compwritevalid)(struct kfid_ep *ep, u32 datatype, u32 op,
			      size_t *count);
};


/* ---- Completion queues, event queues, counters. ---- */

/**
 * struct kfi_ops_cq - a completion queue's operations
 * @size: sizeof(struct kfi_ops_cq) as the queue was built
 * @read: up to @count entries; their number, -EAGAIN when empty,
 *	-KFI_EAVAIL when an error entry waits
 * @readerr: takes the error entry at the head: 1 (the one entry read),
 *	-EAGAIN when none waits
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
 * struct kfi_ops_eq - an event queue's operations
 * @size: sizeof(struct kfi_ops_eq) as the queue was built
 * @read: the next event: its size in bytes; -EAGAIN when empty,
 *	-KFI_EAVAIL when an error entry waits. KFI_PEEK in @flags leaves it.
 * @readerr: takes the error entry at the head: 1 (the one entry read),
 *	-EAGAIN when none waits
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
 * kfi_util_cq_expect() - a completion for a util CQ is about to be written
 * @cq: a CQ from kfi_util_cq_open(); NULL or another kfabric object is
 *	ignored
 *
 * Wakes the threads waiting in kfi_cq_sread() on @cq now, before the
 * provider places the data of a small operation and writes its completion,
 * so that their wakeup overlaps that work instead of following it. A
 * waiter that finds the queue still empty waits again, and the write wakes
 * it. Call it only when a completion follows at once (a small message
 * whose receive is taken): each call on a CQ that has waiters costs them a
 * wakeup. A CQ nobody waits on costs one read. Any context but hard
 * interrupt.
 */
void kfi_util_cq_expect(struct kfid_cq *cq);

/**
 * kfi_util_cq_hold() - hold back a util CQ's completion handler
 * @cq: a CQ from kfi_util_cq_open(); NULL or another kfabric object is
 *	ignored
 *
 * Until the matching kfi_util_cq_release(), completions written to @cq are
 * queued (and wake its waiters) as always, but the ULP's comp_handler is
 * not called for them: kfi_util_cq_release() calls it once for all of
 * them. A provider that writes completions under a lock its posting paths
 * take holds its CQs around that lock, so that a handler that posts again
 * (a receive reposted from its completion) does not find the lock held by
 * its own caller. Holds nest and may come from several threads at once;
 * the last release calls the handler if a completion came meanwhile (a
 * concurrent write may also call it: a handler may be called once more
 * than needed, never less). Any context but hard interrupt.
 */
void kfi_util_cq_hold(struct kfid_cq *cq);

/**
 * kfi_util_cq_release() - end a kfi_util_cq_hold()
 * @cq: as given to kfi_util_cq_hold()
 *
 * Any context but hard interrupt; call it with no lock held that the
 * comp_handler's calls into the provider may take. A release without a
 * hold is a provider bug: it is ignored, with a warning.
 */
void kfi_util_cq_release(struct kfid_cq *cq);

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
 * Return: 0; -ENOSPC when the EQ is full: the event is lost and the EQ
 * reports an -EOVERFLOW error entry (its fid NULL) once the events queued
 * before are read, so the ULP learns of it.
 */
int kfi_util_eq_write_err(struct kfid_eq *eq,
			  const struct kfi_eq_err_entry *err);

/**
 * kfi_util_eq_write_cm() - a provider's connection event on a util EQ
 * @eq: an EQ from kfi_util_eq_open()
 * @event: KFI_CONNREQ, KFI_CONNECTED, KFI_SHUTDOWN, ...
 * @buf: the event: a struct kfi_eq_cm_entry followed by private data
 * @len: its bytes (at most the entry plus KFI_EQ_DATA_MAX)
 *
 * Unlike kfi_eq_write(), which only copies a ULP's bytes, a KFI_CONNREQ
 * queued here hands its @info to the EQ: the EQ frees it if it is still
 * queued when the EQ closes, and a read without KFI_PEEK hands it to the
 * reader (who passes it to kfi_endpoint() or kfi_reject() and then
 * kfi_freeinfo()). On failure @info stays the caller's.
 *
 * A KFI_CONNREQ is refused with -ENOSPC once half the EQ's entries
 * (rounded up) are in use, by events of any kind, and that is not
 * reported as an overflow (the provider refuses the peer's request, so
 * nothing is lost): half of the EQ (rounded down; nothing on an EQ of 1)
 * is kept for the events of connections already made, on an EQ they
 * share with the passive endpoint.
 *
 * Context: any but hard interrupt.
 * Return: 0; -EINVAL on a bad EQ or length; -ENOSPC when the EQ is full
 * (reported to the ULP as for kfi_util_eq_write_err()), or half full for
 * a KFI_CONNREQ (not reported).
 */
int kfi_util_eq_write_cm(struct kfid_eq *eq, u32 event, const void *buf,
			 size_t len);

struct scatterlist;
struct page;

/**
 * kfi_sg_entry() - where the bytes of one scatterlist entry are
 * @sg: an entry of a ULP's scatterlist (struct kfi_msg.msg_sgl or a
 *	region's); chained lists are followed
 * @page: set to the entry's page
 * @offset: set to the offset of its bytes in @page
 * @len: set to their length
 *
 * Lets kfabric.ko and providers walk a scatterlist without the inline
 * helpers of <linux/scatterlist.h>: a provider maps (@page, @offset, @len)
 * to a kernel address, a DMA address or a device's segment.
 *
 * Context: any.
 * Return: the next entry (as sg_next()), NULL after the last.
 */
struct scatterlist *kfi_sg_entry(struct scatterlist *sg, struct page **page,
				 unsigned int *offset, unsigned int *len);

/**
 * kfi_page_address() - the kernel address of a page's bytes
 * @page: a page of a ULP's bio_vec or scatterlist (from kfi_sg_entry())
 *
 * For a provider that copies (kfi_sockets): the bytes of a segment
 * (@page, offset, len) start at the returned address plus offset. Pages
 * of a ULP's buffer are lowmem, which is every page on 64-bit, the only
 * kind kfabric builds for; a highmem page that is not mapped gives NULL.
 *
 * Context: any.
 * Return: the address, or NULL.
 */
void *kfi_page_address(struct page *page);

#endif /* _KFABRIC_KFI_PROVIDER_H */
