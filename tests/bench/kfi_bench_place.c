// SPDX-License-Identifier: GPL-2.0
/*
 * Room and placement for the fan-out run's endpoints (fanout.rs), all in
 * one guest. A kfi_sockets RDM endpoint keeps two work items running on
 * the system's long-running workqueue for as long as it is open (its
 * acceptor and its dispatcher), and that queue runs at most max_active of
 * them per CPU at once: the ones queued beyond wait, and an endpoint whose
 * acceptor waits never answers a peer. The run raises the queue's limit to
 * the most the kernel allows for as long as its endpoints are open, and
 * opens its endpoints on every CPU in turn, since a work item runs on the
 * CPU that queued it. Process context.
 */
#include <linux/cpumask.h>
#include <linux/sched.h>
#include <linux/workqueue.h>

int kfi_bench_long_room(void);
void kfi_bench_long_reset(void);
int kfi_bench_move_to(unsigned int nth);
void kfi_bench_move_back(void);
unsigned int kfi_bench_cpus(void);

/* Raises system_long_wq's limit; the work items it may run per CPU. */
int kfi_bench_long_room(void)
{
	workqueue_set_max_active(system_long_wq, WQ_MAX_ACTIVE);
	return WQ_MAX_ACTIVE;
}

/* Its default again (system_long_wq is made with the default). */
void kfi_bench_long_reset(void)
{
	workqueue_set_max_active(system_long_wq, WQ_DFL_ACTIVE);
}

/* Moves the calling task to the online CPU @nth modulo their number. */
int kfi_bench_move_to(unsigned int nth)
{
	unsigned int n = num_online_cpus();
	unsigned int cpu;

	if (!n)
		return -EINVAL;
	cpu = cpumask_nth(nth % n, cpu_online_mask);
	if (cpu >= nr_cpu_ids)
		return -EINVAL;
	return set_cpus_allowed_ptr(current, cpumask_of(cpu));
}

/*
 * Lets the calling task run on every CPU again (the module is loaded by
 * an insmod that may run anywhere).
 */
void kfi_bench_move_back(void)
{
	set_cpus_allowed_ptr(current, cpu_possible_mask);
}

/* The online CPUs. */
unsigned int kfi_bench_cpus(void)
{
	return num_online_cpus();
}
