// SPDX-License-Identifier: GPL-2.0
/*
 * The guest's memory counters for the fan-out run (mem.rs): what the
 * kernel has in slab caches (kmalloc'd large buffers included: they are
 * accounted as unreclaimable slab), in free pages, in kernel stacks and in
 * vmalloc areas. Each global counter is read with the per-CPU deltas not
 * folded into it yet, and the free pages with those parked on the per-CPU
 * page lists, so that a difference of two readings is not off by the
 * counters' per-CPU slack (up to a few hundred pages a CPU). Racy by
 * nature: a reading while others allocate is a snapshot, not a sum at one
 * instant. Any context (reads only).
 */
#include <linux/cpumask.h>
#include <linux/mm.h>
#include <linux/mmzone.h>
#include <linux/nodemask.h>
#include <linux/percpu.h>
#include <linux/vmstat.h>

/* Keep in step with `Mem` in mem.rs. All in bytes. */
struct kfi_bench_mem {
	s64 slab;	/* reclaimable + unreclaimable slab */
	s64 free;	/* free pages, per-CPU lists included */
	s64 stack;	/* kernel stacks */
	s64 vmalloc;	/* vmalloc'd pages (stacks are among them) */
};

void kfi_bench_mem_read(struct kfi_bench_mem *m);

/* A node counter of @pgdat in pages, its per-CPU deltas added. */
static s64 node_pages(struct pglist_data *pgdat, enum node_stat_item item)
{
	s64 v = atomic_long_read(&pgdat->vm_stat[item]);
	int cpu;

	for_each_online_cpu(cpu)
		v += READ_ONCE(per_cpu_ptr(pgdat->per_cpu_nodestats, cpu)->vm_node_stat_diff[item]);
	return v;
}

/* Free pages of @zone: the counter, its per-CPU deltas, the per-CPU lists. */
static s64 zone_free(struct zone *zone)
{
	s64 v = atomic_long_read(&zone->vm_stat[NR_FREE_PAGES]);
	int cpu;

	for_each_online_cpu(cpu) {
		v += READ_ONCE(per_cpu_ptr(zone->per_cpu_zonestats, cpu)->vm_stat_diff[NR_FREE_PAGES]);
		v += READ_ONCE(per_cpu_ptr(zone->per_cpu_pageset, cpu)->count);
	}
	return v;
}

void kfi_bench_mem_read(struct kfi_bench_mem *m)
{
	s64 slab = 0, free = 0, stack_kb = 0, vmalloc = 0;
	int nid, z;

	for_each_online_node(nid) {
		struct pglist_data *pgdat = NODE_DATA(nid);

		slab += node_pages(pgdat, NR_SLAB_RECLAIMABLE_B) +
			node_pages(pgdat, NR_SLAB_UNRECLAIMABLE_B);
		stack_kb += node_pages(pgdat, NR_KERNEL_STACK_KB);
		vmalloc += node_pages(pgdat, NR_VMALLOC);
		for (z = 0; z < MAX_NR_ZONES; z++) {
			struct zone *zone = &pgdat->node_zones[z];

			if (populated_zone(zone))
				free += zone_free(zone);
		}
	}
	m->slab = slab * PAGE_SIZE;
	m->free = free * PAGE_SIZE;
	m->stack = stack_kb * 1024;
	m->vmalloc = vmalloc * PAGE_SIZE;
}
