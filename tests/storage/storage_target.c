// SPDX-License-Identifier: GPL-2.0
/*
 * kfi_test_storage.ko: the target. A thread per queue takes commands in
 * arrival order, runs one RMA at a time (in two halves) and answers each
 * with a tagged response.
 */
#include "storage.h"

/* Waits for the next entry of @cq; 1, or a negative errno (an error
 * entry is read into @err and gives -KFI_EAVAIL). */
ssize_t stor_next_entry(struct kfid_cq *cq, struct kfi_cq_tagged_entry *e,
			  struct kfi_cq_err_entry *err, int ms)
{
	ssize_t n = kfi_cq_sread(cq, e, 1, NULL, ms);

	if (n == -KFI_EAVAIL && kfi_cq_readerr(cq, err, 0) != 1)
		return -EIO;
	return n;
}

/* Starts the RMA of command @c, in two accesses of halves; 0 or -errno. */
static int target_rma_start(struct iq *q, const struct cmd *c)
{
	u32 half = c->len / 2, i;
	int ret;

	if (c->len > BIG_LEN || c->len < 2 || (c->op != OP_READ && c->op != OP_WRITE))
		return -EMSGSIZE;
	q->rma_status = 0;
	if (c->op == OP_WRITE) {
		memset(q->tbuf, 0, c->len);
		ret = kfi_read(q->tep, q->tbuf, half, NULL, 0, c->addr, c->key, q->tbuf);
		if (!ret)
			q->rma_left++;
		if (!ret)
			ret = kfi_read(q->tep, q->tbuf + half, c->len - half, NULL, 0,
				       c->addr + half, c->key, q->tbuf + half);
	} else {
		for (i = 0; i < c->len; i++)
			((u8 *)q->tbuf)[i] = stor_pat(c->seed, i);
		ret = kfi_write(q->tep, q->tbuf, half, NULL, 0, c->addr, c->key, q->tbuf);
		if (!ret)
			q->rma_left++;
		if (!ret)
			ret = kfi_write(q->tep, q->tbuf + half, c->len - half, NULL, 0,
					c->addr + half, c->key, q->tbuf + half);
	}
	if (!ret)
		q->rma_left++;
	return ret;
}

/* Answers command @i with @status (its RMA done or refused). */
static void target_respond(struct iq *q, int i, int status)
{
	const struct cmd *c = &q->tcmd[i];
	u32 k;

	if (!status && c->op == OP_WRITE)
		for (k = 0; k < c->len; k++)
			if (((u8 *)q->tbuf)[k] != stor_pat(c->seed, k)) {
				status = -EBADMSG;
				break;
			}
	q->tresp[i] = (struct resp){ .slot = c->slot, .seed = c->seed, .status = status };
	if (kfi_tsend(q->tep, &q->tresp[i], sizeof(q->tresp[i]), NULL, 0, c->slot, &q->tresp[i]))
		stor_fail("target response", i);
}

/* One completion of the target's CQ. */
static void target_entry(struct iq *q, void *ctx, ssize_t n, size_t len, int err)
{
	struct cmd *c = ctx;
	int i;

	if (ctx == q->tbuf || ctx == q->tbuf + q->tcmd[q->cur].len / 2) {
		if (n != 1 && !q->rma_status)
			q->rma_status = -err;
		if (--q->rma_left == 0)
			target_respond(q, q->cur, q->rma_status);
		return;
	}
	if (n != 1) {
		stor_fail("target completion error", -err);
		return;
	}
	if (ctx >= (void *)q->tresp && ctx < (void *)(q->tresp + TQ)) {
		/* A response sent: its command buffer takes the next. */
		i = (struct resp *)ctx - q->tresp;
		if (kfi_recv(q->tep, &q->tcmd[i], sizeof(q->tcmd[i]), NULL, 0, &q->tcmd[i]))
			stor_fail("target repost", i);
		return;
	}
	if (ctx < (void *)q->tcmd || ctx >= (void *)(q->tcmd + TQ) || len != sizeof(*c) ||
	    c->magic != CMD_MAGIC || c->slot >= QD) {
		stor_fail("target: bad command entry", (long)len);
		return;
	}
	i = c - q->tcmd;
	if (c->op == OP_HANG)
		return;		/* a hung controller: never answers */
	q->fifo[(q->fifo_head + q->fifo_len++) % TQ] = i;
}

/* The target thread of a queue: commands in arrival order, one RMA at a
 * time, while receives and sent responses keep being handled. */
int stor_tthread(void *arg)
{
	struct iq *q = arg;
	struct kfi_cq_tagged_entry e;
	struct kfi_cq_err_entry err;
	ssize_t n;
	int ret;

	while (!kthread_should_stop()) {
		while (!q->rma_left && q->fifo_len) {
			q->cur = q->fifo[q->fifo_head];
			q->fifo_head = (q->fifo_head + 1) % TQ;
			q->fifo_len--;
			ret = target_rma_start(q, &q->tcmd[q->cur]);
			/* A failed start leaves no access behind. */
			if (ret && q->rma_left == 0)
				target_respond(q, q->cur, ret);
			else if (ret)
				q->rma_status = ret;
		}
		n = stor_next_entry(q->tcq, &e, &err, 100);
		if (n == -EAGAIN || n == -ETIMEDOUT || n == -EINTR)
			continue;
		if (n == 1)
			target_entry(q, e.op_context, n, e.len, 0);
		else if (n == -KFI_EAVAIL)
			target_entry(q, err.op_context, n, err.len, err.err);
		else
			stor_fail("target sread", n);
	}
	return 0;
}
