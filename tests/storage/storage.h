/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kfi_test_storage.ko's shared parts: the wire format of the NVMe-oF-shaped
 * pair, its queues and requests, and what each file of the module offers.
 */
#ifndef KFI_TEST_STORAGE_H
#define KFI_TEST_STORAGE_H

#include <kunit/test.h>
#include <linux/bvec.h>
#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/timer.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <kfabric/kfabric.h>

#define PORT "7540"
#define WAIT_MS 20000
#define NQ 8			/* queues (connections) */
#define QD 32			/* requests in flight per queue */
#define TQ (2 * QD)		/* command buffers the target posts */
#define ROUNDS 3		/* requests per slot */
#define MAX_SEGS KFI_MR_MAP_SEGS_MAX
#define SMALL_PAGES 16		/* pages of a slot; slot 0 has MAX_SEGS */
#define SMALL_SEG 256		/* segment bytes of a slot but 0 */
#define BIG_LEN (MAX_SEGS * PAGE_SIZE)

enum { OP_WRITE = 1, OP_READ, OP_HANG };
#define CMD_MAGIC 0x6b666e76	/* "kfnv" */

/* What the initiator sends; the target copies it before reposting. */
struct cmd {
	u32 magic;
	u16 slot;
	u16 op;
	u32 len;
	u32 pad;
	u64 addr, key, seed;
};

struct resp {
	u16 slot;
	u16 pad;
	s32 status;		/* 0, or the target's negative errno */
	u64 seed;
};

/* A completion context names its request and what completed. */
enum { CTX_CMD, CTX_RESP };
struct ctx {
	struct ireq *r;
	int kind;
};

struct iq;

/* One request slot of the initiator. */
struct ireq {
	struct iq *q;
	u16 slot;
	struct kfid_mr *mr;
	struct page **pages;
	unsigned int npages, seg_len;
	struct bio_vec bvec[MAX_SEGS];
	unsigned int nsegs, len;
	u16 op;
	u64 seed, addr, key, last_key;
	int round;
	int pending;		/* completions before the slot is done */
	int busy_tries;		/* kfi_mr_unmap() calls that got -EBUSY */
	struct cmd cmd;
	struct resp resp;
	struct ctx cmd_ctx, resp_ctx;
	struct list_head node;	/* on iq->done */
};

/* One queue: an initiator endpoint and its target endpoint. */
struct iq {
	int id;
	struct kfid_ep *iep, *tep;
	struct kfid_cq *icq, *tcq;
	struct ireq req[QD];
	spinlock_t lock;	/* protects done and retry */
	struct list_head done;
	struct list_head retry;	/* unmapped -EBUSY: tried again later */
	struct work_struct start, bh;	/* on system_bh_wq: first submissions;
					 * completions and the next ones */
	struct task_struct *ithread, *tthread;
	/* target: commands waiting for the RMA engine, in arrival order */
	struct cmd tcmd[TQ];
	struct resp tresp[TQ];
	u8 fifo[TQ];
	unsigned int fifo_head, fifo_len;
	int cur, rma_left, rma_status;	/* the command whose RMA runs */
	void *tbuf;
};

/* The whole run; its counters are written from softirq and threads. */
struct run {
	struct kfi_info *src, *dst;
	struct kfid_fabric *fabric;
	struct kfid_domain *domain;
	struct kfid_eq *eq;
	struct kfid_pep *pep;
	struct iq q[NQ];
	atomic_t errors, ios, finished, not_softirq, stale_keys, unmap_busy;
	atomic64_t bytes, map_ns, unmap_ns, maps, map_segs;
	struct completion all_done;
	char first_error[128];
	spinlock_t err_lock;	/* protects first_error */
};

extern struct run *stor_run;

/* storage_run.c: the run's objects and connections (process context). */
void stor_fail(const char *what, long v);
int stor_run_open(void);
void stor_threads_stop(struct iq *q);
void stor_run_close(struct kunit *test);

/* storage_initiator.c: requests, submitted and completed in softirq. */
u8 stor_pat(u64 seed, u32 off);
void *stor_seg_addr(const struct bio_vec *bv);
void stor_layout(struct ireq *r);
int stor_submit(struct ireq *r, u16 op);
void stor_iq_bh(struct work_struct *w);
void stor_iq_start_bh(struct work_struct *w);
int stor_ithread(void *arg);

/* storage_target.c: the target's thread and its RMA engine. */
ssize_t stor_next_entry(struct kfid_cq *cq, struct kfi_cq_tagged_entry *e,
			struct kfi_cq_err_entry *err, int ms);
int stor_tthread(void *arg);

#endif /* KFI_TEST_STORAGE_H */
