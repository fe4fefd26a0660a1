/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kfabric provider interface: what a provider module hands to kfabric.ko.
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
 * or an API version kfabric.ko does not serve; -EEXIST when a provider of
 * that name is registered already.
 */
int kfi_provider_register(u32 version, struct kfi_provider *prov);

/**
 * kfi_provider_deregister() - withdraw a provider
 * @prov: a provider passed to kfi_provider_register()
 *
 * Refused while any object of the provider is open; waits for calls into
 * the provider that are in flight (kfi_fabric()) to return.
 *
 * Context: process context; may sleep.
 * Return: 0; -EINVAL on NULL; -ENOENT when @prov is not registered; -EBUSY
 * while objects of the provider are open.
 */
int kfi_provider_deregister(struct kfi_provider *prov);

#endif /* _KFABRIC_KFI_PROVIDER_H */
