// SPDX-License-Identifier: GPL-2.0
/*
 * What a benchmark run costs beyond its time (cost.rs): the CPU time all
 * CPUs spent in the kernel, in softirq and in hard interrupts, the TCP
 * counters nstat would show (retransmitted segments, delayed ACKs) of
 * the initial network namespace, and the guest's context switches. Read
 * before and after each run; the difference is the run's. Process
 * context (reading the context switches opens a file).
 */
#include <linux/kernel_stat.h>
#include <linux/cpumask.h>
#include <linux/fs.h>
#include <linux/slab.h>
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
	u64 ctxt;	/* context switches of all CPUs */
	u64 have_ctxt;	/* 1 if ctxt could be read */
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

/* The most of /proc/stat read for its 'ctxt' line. */
#define STAT_MAX (1 << 20)

/*
 * The guest's context switches: the 'ctxt' line of /proc/stat, the sum of
 * every CPU's count (nr_context_switches(), which modules cannot call).
 * Read in pieces, so the length of the lines before it (the interrupt
 * counts) does not matter. 0 when it cannot be read.
 */
static int read_ctxt(u64 *out)
{
	static const char key[] = "\nctxt ";
	struct file *f;
	char *buf;
	loff_t pos = 0;
	/* Bytes of `key` matched; the file's start counts as a newline. */
	size_t matched = 1;
	bool digits = false;
	u64 v = 0;
	int ret = -ENOENT;

	f = filp_open("/proc/stat", O_RDONLY, 0);
	if (IS_ERR(f))
		return PTR_ERR(f);
	buf = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!buf) {
		filp_close(f, NULL);
		return -ENOMEM;
	}
	while (pos < STAT_MAX && ret == -ENOENT) {
		ssize_t n = kernel_read(f, buf, PAGE_SIZE, &pos);
		ssize_t i;

		if (n <= 0) {
			ret = n < 0 ? n : -ENOENT;
			break;
		}
		for (i = 0; i < n; i++) {
			char ch = buf[i];

			if (matched == sizeof(key) - 1) {
				if (ch >= '0' && ch <= '9') {
					if (v > (U64_MAX - 9) / 10) {
						ret = -EOVERFLOW;
						break;
					}
					v = v * 10 + (ch - '0');
					digits = true;
					continue;
				}
				ret = digits ? 0 : -EINVAL;
				break;
			}
			if (ch == key[matched])
				matched++;
			else
				matched = ch == '\n' ? 1 : 0;
		}
	}
	/* The number ends the file. */
	if (ret == -ENOENT && matched == sizeof(key) - 1 && digits)
		ret = 0;
	kfree(buf);
	filp_close(f, NULL);
	if (!ret)
		*out = v;
	return ret;
}

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
	c->have_ctxt = !read_ctxt(&c->ctxt);
}
