// SPDX-License-Identifier: GPL-2.0
/*
 * What a benchmark run costs beyond its time (cost.rs): the CPU time all
 * CPUs spent in the kernel, in softirq and in hard interrupts, and the
 * TCP counters nstat would show (retransmitted segments, delayed ACKs) of
 * the initial network namespace. Read before and after each run; the
 * difference is the run's.
 */
#include <linux/kernel_stat.h>
#include <linux/cpumask.h>
#include <net/ip.h>
#include <net/net_namespace.h>
#include <net/snmp.h>
#include <net/tcp.h>

/* Keep in step with `Cost` in cost.rs. */
struct kfi_bench_cost {
	u64 sys_ns;	/* system + softirq + irq time, all CPUs */
	u64 softirq_ns;	/* of which softirq */
	u64 retrans;	/* TCP segments retransmitted */
	u64 delacks;	/* delayed ACKs sent */
};

void kfi_bench_cost_read(struct kfi_bench_cost *c);

/* snmp_fold_field() is not exported: the same sum, over every CPU. */
#define fold(mib, field) ({						\
	u64 sum = 0;							\
	int i;								\
	for_each_possible_cpu(i)					\
		sum += READ_ONCE(per_cpu_ptr(mib, i)->mibs[field]);	\
	sum;								\
})

void kfi_bench_cost_read(struct kfi_bench_cost *c)
{
	struct kernel_cpustat kcs;
	int cpu;

	memset(c, 0, sizeof(*c));
	for_each_online_cpu(cpu) {
		kcpustat_cpu_fetch(&kcs, cpu);
		c->sys_ns += kcs.cpustat[CPUTIME_SYSTEM] + kcs.cpustat[CPUTIME_SOFTIRQ] +
			     kcs.cpustat[CPUTIME_IRQ];
		c->softirq_ns += kcs.cpustat[CPUTIME_SOFTIRQ];
	}
	c->retrans = fold(init_net.mib.tcp_statistics, TCP_MIB_RETRANSSEGS);
	c->delacks = fold(init_net.mib.net_statistics, LINUX_MIB_DELAYEDACKS);
}
