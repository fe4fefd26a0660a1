// SPDX-License-Identifier: GPL-2.0
/*
 * kfi_holder.ko: a ULP that keeps kfabric objects open while it is loaded,
 * for the kselftest in tests/selftests/kfabric: a listening kfi_sockets
 * passive endpoint with its fabric, domain and event queue, opened at load
 * and closed at unload. While it is loaded, neither the provider module nor
 * kfabric.ko may be unloaded.
 */
#include <linux/module.h>
#include <kfabric/kfabric.h>

static char *provider = "sockets";
module_param(provider, charp, 0444);
MODULE_PARM_DESC(provider, "provider whose objects are held");
static char *service = "7530";
module_param(service, charp, 0444);
MODULE_PARM_DESC(service, "port the passive endpoint listens on");

static struct kfi_info *info;
static struct kfid_fabric *fabric;
static struct kfid_domain *domain;
static struct kfid_eq *eq;
static struct kfid_pep *pep;

static void holder_close(void)
{
	struct kfid *objs[] = {
		pep ? &pep->fid : NULL, eq ? &eq->fid : NULL,
		domain ? &domain->fid : NULL, fabric ? &fabric->fid : NULL,
	};
	int i, ret;

	for (i = 0; i < ARRAY_SIZE(objs); i++) {
		if (!objs[i])
			continue;
		ret = kfi_close(objs[i]);
		if (ret)
			pr_err("kfi_holder: closing an object failed: %d\n", ret);
	}
	kfi_freeinfo(info);
}

static int __init holder_init(void)
{
	struct kfi_eq_attr eq_attr = { .size = 8 };
	struct kfi_info *hints = kfi_allocinfo();
	int ret;

	if (!hints)
		return -ENOMEM;
	hints->fabric_attr->prov_name = provider;
	ret = kfi_getinfo(KFI_API_VERSION, "127.0.0.1", service, KFI_SOURCE, hints, &info);
	kfi_freeinfo(hints);
	if (!ret)
		ret = kfi_fabric(info->fabric_attr, &fabric, NULL);
	if (!ret)
		ret = kfi_domain(fabric, info, &domain, NULL);
	if (!ret)
		ret = kfi_eq_open(fabric, &eq_attr, &eq, NULL);
	if (!ret)
		ret = kfi_passive_ep(fabric, info, &pep, NULL);
	if (!ret)
		ret = kfi_pep_bind(pep, &eq->fid, 0);
	if (!ret)
		ret = kfi_listen(pep);
	if (ret) {
		pr_err("kfi_holder: opening the objects failed: %d (%s)\n", ret,
		       kfi_strerror(ret));
		holder_close();
		return ret;
	}
	pr_info("kfi_holder: holding a %s fabric, domain, EQ and listener\n", provider);
	return 0;
}

static void __exit holder_exit(void)
{
	holder_close();
}

module_init(holder_init);
module_exit(holder_exit);
MODULE_DESCRIPTION("kfabric selftest helper: holds provider objects while loaded");
MODULE_LICENSE("GPL");
