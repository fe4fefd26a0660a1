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

/**
 * enum kfi_fclass - the class of an object, the first field of its kfid
 * @KFI_CLASS_UNSPEC: not a valid object
 * @KFI_CLASS_FABRIC: a fabric (struct kfid_fabric)
 * @KFI_CLASS_MAX: number of classes
 */
enum kfi_fclass {
	KFI_CLASS_UNSPEC,
	KFI_CLASS_FABRIC,
	KFI_CLASS_MAX,
};

struct kfid;
struct kfi_provider;

/**
 * struct kfi_ops - operations every object has
 * @size: sizeof(struct kfi_ops) as the provider was built; the core never
 *	calls a slot beyond it
 * @close: releases the object; called by kfi_close() in process context
 */
struct kfi_ops {
	size_t size;
	int (*close)(struct kfid *fid);
};

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
 * struct kfi_fabric_attr - what a fabric is
 * @name: the fabric's name
 * @prov_name: the provider that serves it
 * @prov_version: the provider's version, KFI_VERSION(major, minor)
 * @api_version: the kfabric API version the provider was built against
 */
struct kfi_fabric_attr {
	const char *name;
	const char *prov_name;
	u32 prov_version;
	u32 api_version;
};

/**
 * struct kfid_fabric - a fabric: the provider's view of one network
 * @fid: the object header (fclass KFI_CLASS_FABRIC)
 * @api_version: the API version the fabric was opened with
 */
struct kfid_fabric {
	struct kfid fid;
	u32 api_version;
};

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
 * Releases the object and the provider reference it held. After a
 * successful close the object must not be used again.
 *
 * Context: process context; may sleep.
 * Return: 0; -EINVAL on NULL or an object that is not open; or the
 * provider's error, in which case the object stays open.
 */
int kfi_close(struct kfid *fid);

/**
 * kfi_strerror() - a short text for a kfabric error code
 * @errnum: a negative errno value as returned by the kfi_* calls
 *
 * Context: any.
 * Return: a static string; never NULL.
 */
const char *kfi_strerror(int errnum);

#endif /* _KFABRIC_KFABRIC_H */
