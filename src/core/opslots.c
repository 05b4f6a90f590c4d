/* SPDX-License-Identifier: MIT */
/*
 * The slots of the one-sided operations in flight (struct rdmx__os in
 * conn.h): taken when an operation is posted (onesided.c), completed when
 * whoever polls the send CQ finds its completion (rdmx__poll_cq and
 * rdmx__live_reap, live.c), read back and freed by rdmx_wait. A token is
 * the slot's generation and index; an error completion takes the
 * connection down like any other.
 */
#include <errno.h>
#include <stdio.h>

#include "conn.h"
#include "errors.h"
#include "fabric.h"
#include "opslots.h"

#define OS_POSTED 1
#define OS_DONE 2

void rdmx__os_init(rdmx_conn *c)
{
	pthread_mutex_init(&c->os.lock, NULL);
}

void rdmx__os_fini(rdmx_conn *c)
{
	pthread_mutex_destroy(&c->os.lock);
}

const char *rdmx__os_op_name(int op)
{
	switch (op) {
	case RDMX__OP_READ: return "READ";
	case RDMX__OP_WRITE: return "WRITE";
	case RDMX__OP_FETCH_ADD: return "FETCH_ADD";
	case RDMX__OP_CMP_SWAP: return "CMP_SWAP";
	case RDMX__OP_BIND_MW: return "memory window bind";
	default: return "operation";
	}
}

void rdmx__os_done(rdmx_conn *c, const struct rdmx__wc *wc)
{
	unsigned slot = (unsigned)(wc->wr_id & 0xff);
	int rc = 0;

	if (slot >= RDMX__OS_WRS)
		return;
	if (wc->status != RDMX__WC_OK) {
		char what[32];

		snprintf(what, sizeof(what), "one-sided %s", rdmx__os_op_name(c->os.op[slot]));
		rc = rdmx__conn_wc_error(c, wc, what);
	}
	pthread_mutex_lock(&c->os.lock);
	if (c->os.state[slot] == OS_POSTED) {
		c->os.state[slot] = OS_DONE;
		c->os.rc[slot] = rc;
	}
	pthread_mutex_unlock(&c->os.lock);
}

int rdmx__os_take(rdmx_conn *c, int op)
{
	int slot = -1;

	pthread_mutex_lock(&c->os.lock);
	for (unsigned i = 0; i < RDMX__OS_WRS; i++) {
		if (c->os.state[i])
			continue;
		c->os.state[i] = OS_POSTED;
		c->os.op[i] = (uint8_t)op;
		c->os.gen[i] = (c->os.gen[i] + 1) & 0xffffffu;
		if (!c->os.gen[i])
			c->os.gen[i] = 1;
		slot = (int)i;
		break;
	}
	pthread_mutex_unlock(&c->os.lock);
	if (slot >= 0)
		return slot;
	return rdmx__fail(-ENOBUFS, "%u one-sided operations outstanding: "
			  "rdmx_wait() for one first", RDMX__OS_WRS);
}

void rdmx__os_put(rdmx_conn *c, unsigned slot)
{
	pthread_mutex_lock(&c->os.lock);
	c->os.state[slot] = 0;
	pthread_mutex_unlock(&c->os.lock);
}

int rdmx__os_slot(rdmx_conn *c, rdmx_token tok)
{
	unsigned slot = (unsigned)(tok & 0xff);
	int ok;

	if (slot >= RDMX__OS_WRS)
		return rdmx__fail(-EINVAL, "token 0x%llx is not one of this connection's",
				  (unsigned long long)tok);
	pthread_mutex_lock(&c->os.lock);
	ok = c->os.state[slot] && c->os.gen[slot] == (uint32_t)(tok >> 8);
	pthread_mutex_unlock(&c->os.lock);
	if (!ok)
		return rdmx__fail(-EINVAL, "token 0x%llx is not outstanding on this "
				  "connection (waited already?)", (unsigned long long)tok);
	return (int)slot;
}

int rdmx__os_result(rdmx_conn *c, unsigned slot)
{
	int rc = 1;

	pthread_mutex_lock(&c->os.lock);
	if (c->os.state[slot] == OS_DONE) {
		rc = c->os.rc[slot];
		c->os.state[slot] = 0;
	}
	pthread_mutex_unlock(&c->os.lock);
	return rc;
}
