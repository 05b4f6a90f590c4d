/* SPDX-License-Identifier: MIT */
/*
 * One-sided operations on a peer's exported memory: RDMA READ, WRITE,
 * FETCH_ADD and CMP_SWAP, with a completion token each.
 *
 * Descriptor (rdmx_mr_export -> the application's message -> the peer's
 * rdmx_region_import), RDMX_REGION_DESC_LEN bytes, little-endian:
 *   off size field
 *     0  u32  magic 0x52584452 ("RDXR")
 *     4  u8   version (1)
 *     5  u8   access: enum rdmx_access bits, at least one
 *     6  u16  reserved, 0
 *     8  u64  address of the first byte
 *    16  u64  length, > 0, address + length must not wrap
 *    24  u32  rkey
 *    28  u32  reserved, 0
 * The importer copies the bytes once into a local buffer, checks that
 * copy and keeps only what it decoded.
 *
 * Posting: every operation is checked against the region and the local
 * registration before anything is posted, so a bad offset is -EINVAL and
 * never a QP in error. The work request is signaled with wr_id
 * RDMX__OS_WRID(slot) and takes one of RDMX__OS_WRS send-queue slots the
 * core reserves beside the protocol's (rdmx__qp_make). Its
 * completion arrives on the protocol's send CQ: whoever polls it
 * (rdmx__poll_cq in the protocol, rdmx__live_reap here) hands it to
 * rdmx__os_done(), so the protocols' own completion accounting never sees
 * it. An error completion takes the connection down like any other.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "errors.h"
#include "fabric.h"
#include "live.h"
#include "mem.h"
#include "mw.h"
#include "onesided.h"
#include "opslots.h"
#include "post.h"
#include "protocol.h"
#include "token.h"
#include "wait.h"
#include "waitset.h"
#include "wire.h"

#define DESC_MAGIC 0x52584452u
#define DESC_VERSION 1
#define OP_MAX_LEN (UINT32_C(1) << 31) /* an RC message's limit */
/* rdmx_mr_export's wait for its window bind's local completion: a work
 * request behind whatever the connection has posted, normally done in
 * microseconds; a server's accept path may make it (the KV read door). */
#define EXPORT_BIND_MS 200

struct rdmx_region {
	rdmx_conn *conn;         /* imported on */
	uint64_t addr;
	uint64_t len;
	uint32_t rkey;
	unsigned access;
};

#define ACCESS_KNOWN (RDMX_ACCESS_REMOTE_READ | RDMX_ACCESS_REMOTE_WRITE | \
		      RDMX_ACCESS_REMOTE_ATOMIC)

/* ------------------------------------------------------- export, import */

static void desc_put(uint8_t *b, uint64_t addr, uint64_t len, uint32_t rkey, unsigned access)
{
	memset(b, 0, RDMX_REGION_DESC_LEN);
	rdmx__put_u32(b, DESC_MAGIC);
	b[4] = DESC_VERSION;
	b[5] = (uint8_t)access;
	rdmx__put_u64(b + 8, addr);
	rdmx__put_u64(b + 16, len);
	rdmx__put_u32(b + 24, rkey);
}

/* The checks of rdmx_mr_export's arguments. */
static int export_check(rdmx_conn *conn, rdmx_mr *mr, size_t off, size_t len,
			unsigned access, size_t buflen)
{
	if (!len || !access || (access & ~(unsigned)ACCESS_KNOWN))
		return rdmx__failo(&conn->err, -EINVAL, "rdmx_mr_export: a non-empty "
				   "range and known remote access bits are required (access 0x%x)",
				   access);
	if (access & ~rdmx__mr_access(mr))
		return rdmx__failo(&conn->err, -EACCES, "rdmx_mr_export: access 0x%x "
				   "is not granted by the registration (0x%x)",
				   access, rdmx__mr_access(mr));
	if (buflen < RDMX_REGION_DESC_LEN)
		return rdmx__failo(&conn->err, -ENOSPC, "rdmx_mr_export: %zu bytes of "
				   "room, a descriptor takes %d", buflen, RDMX_REGION_DESC_LEN);
	return rdmx__conn_keep(conn, rdmx__mr_range(mr, off, len));
}

static int export_bind(rdmx_conn *c, void *addr, size_t len, int access,
		       int timeout_ms, struct rdmx__export *e);

/* A window on @m (@mr's registration on @c's domain, made for binds)
 * bound to @c's QP over @len bytes at @addr with @access, kept until @c
 * closes or @mr goes; its key in *@rkey. */
static int export_kept(rdmx_conn *c, rdmx_mr *mr, struct rdmx__mr *m, void *addr,
		       size_t len, unsigned access, uint32_t *rkey)
{
	struct rdmx__export e;
	int rc = rdmx__export_window(c->f, c->ep, m, &e);

	if (!rc)
		rc = export_bind(c, addr, len, rdmx__mr_rights(access), EXPORT_BIND_MS, &e);
	if (rc)
		return rc;
	rc = rdmx__export_keep(&c->exports, rdmx__mr_exports(mr), &e);
	if (rc)
		rdmx__export_revoke(&e);
	*rkey = e.rkey;
	return rc;
}

int rdmx_mr_export(rdmx_conn *conn, rdmx_mr *mr, size_t off, size_t len,
		   unsigned access, void *buf, size_t *buflen)
{
	char *addr;
	struct rdmx__mr *m;
	uint32_t rkey = 0;
	int rc;

	if (!conn || !mr || !buf || !buflen)
		return rdmx__fail(-EINVAL, "rdmx_mr_export: conn, mr, buf and buflen are required");
	rc = export_check(conn, mr, off, len, access, *buflen);
	if (rc)
		return rc;
	addr = (char *)rdmx_mr_addr(mr) + off;
	rc = rdmx__mr_bindable(conn, mr, &m);
	if (rc == 1) /* windows: one bound to this connection's QP */
		rc = export_kept(conn, mr, m, addr, len, access, &rkey);
	else if (!rc) /* none: the registration's key, its rights */
		rkey = m->rkey;
	if (rc)
		return rdmx__conn_keep(conn, rc);
	desc_put(buf, (uint64_t)(uintptr_t)addr, len, rkey, access);
	*buflen = RDMX_REGION_DESC_LEN;
	return 0;
}

/* Decode and check the local copy @b of a descriptor. */
static int desc_decode(const uint8_t *b, struct rdmx_region *r)
{
	if (rdmx__get_u32(b) != DESC_MAGIC)
		return rdmx__fail(-EPROTO, "not a region descriptor (magic 0x%08x)",
				  rdmx__get_u32(b));
	if (b[4] != DESC_VERSION)
		return rdmx__fail(-EPROTO, "region descriptor version %u, this rdmx "
				  "reads %u", b[4], DESC_VERSION);
	if (!b[5] || (b[5] & ~(unsigned)ACCESS_KNOWN) || rdmx__get_u16(b + 6) ||
	    rdmx__get_u32(b + 28))
		return rdmx__fail(-EPROTO, "region descriptor: bad access 0x%x or "
				  "reserved bits set", b[5]);
	r->access = b[5];
	r->addr = rdmx__get_u64(b + 8);
	r->len = rdmx__get_u64(b + 16);
	r->rkey = rdmx__get_u32(b + 24);
	if (!r->len || r->addr + r->len < r->addr)
		return rdmx__fail(-EPROTO, "region descriptor: length %llu at 0x%llx "
				  "is empty or wraps", (unsigned long long)r->len,
				  (unsigned long long)r->addr);
	return 0;
}

int rdmx_region_import(rdmx_conn *conn, const void *buf, size_t len,
		       rdmx_region **out)
{
	uint8_t b[RDMX_REGION_DESC_LEN];
	struct rdmx_region r = { .conn = conn };
	int rc;

	if (!conn || !buf || !out)
		return rdmx__fail(-EINVAL, "rdmx_region_import: conn, buf and out are required");
	if (len != RDMX_REGION_DESC_LEN)
		return rdmx__failo(&conn->err, -EPROTO, "region descriptor of %zu bytes, "
				   "expected %d", len, RDMX_REGION_DESC_LEN);
	memcpy(b, buf, sizeof(b)); /* peer-written: read once */
	rc = desc_decode(b, &r);
	if (rc)
		return rdmx__conn_keep(conn, rc);
	*out = malloc(sizeof(**out));
	if (!*out)
		return rdmx__failo(&conn->err, -ENOMEM, "out of memory for a region");
	**out = r;
	return 0;
}

void rdmx_region_free(rdmx_region *region)
{
	free(region);
}

size_t rdmx_region_len(const rdmx_region *region)
{
	return region ? (size_t)region->len : 0;
}

/* ---------------------------------------------------------------- post */

/* Local checks of an operation needing @need on @len bytes at @roff of
 * @r, the local side at @off of @mr. */
static int op_check(rdmx_conn *c, const rdmx_region *r, size_t roff,
		    rdmx_mr *mr, size_t off, size_t len, unsigned need)
{
	if (!r || !mr)
		return rdmx__fail(-EINVAL, "a region and a local registration are required");
	if (r->conn != c)
		return rdmx__fail(-EINVAL, "the region was imported on another connection");
	if (!(r->access & need))
		return rdmx__fail(-EACCES, "the region was not exported for this "
				  "operation (access 0x%x, needs 0x%x)", r->access, need);
	if (!len || len > OP_MAX_LEN)
		return rdmx__fail(-EINVAL, "length %zu is not in 1..%u", len, OP_MAX_LEN);
	if (roff > r->len || len > r->len - roff)
		return rdmx__fail(-EINVAL, "range %zu+%zu is outside the region of %llu bytes",
				  roff, len, (unsigned long long)r->len);
	return rdmx__mr_range(mr, off, len);
}

static int atomic_check(rdmx_conn *c, const rdmx_region *r, size_t roff,
			rdmx_mr *mr, size_t off)
{
	int rc = op_check(c, r, roff, mr, off, 8, RDMX_ACCESS_REMOTE_ATOMIC);

	if (rc)
		return rc;
	if ((r->addr + roff) % 8 || ((uintptr_t)rdmx_mr_addr(mr) + off) % 8)
		return rdmx__fail(-EINVAL, "atomics need 8-byte aligned addresses "
				  "(remote 0x%llx, local %p)",
				  (unsigned long long)(r->addr + roff),
				  (void *)((char *)rdmx_mr_addr(mr) + off));
	return 0;
}

/* Post @wr (remote side filled) from @off of @mr (c->lock held). */
static int os_post(rdmx_conn *c, struct rdmx__wr *wr, rdmx_mr *mr, size_t off,
		   rdmx_token *tok)
{
	const struct rdmx__mr *m;
	int slot, rc;

	if (c->state == RDMX__CONN_DOWN)
		return rdmx__conn_check_peer(c);
	rc = rdmx__mr_on(c, mr, &m);
	if (rc)
		return rc;
	slot = rdmx__os_take(c, wr->op);
	if (slot < 0)
		return slot;
	wr->wr_id = RDMX__OS_WRID(slot);
	wr->flags = RDMX__WR_SIGNALED;
	wr->addr = (char *)m->addr + off;
	wr->lkey = m->lkey;
	rc = rdmx__post_send(c, wr, 1);
	if (rc) {
		rdmx__os_put(c, (unsigned)slot);
		return rc;
	}
	*tok = (uint64_t)c->os.gen[slot] << 8 | (unsigned)slot;
	RDMX__COUNT(c, onesided_ops, 1);
	RDMX__COUNT(c, onesided_bytes, wr->len);
	return 0;
}

/* Check (under c->lock) with @check's result and post. */
static int os_run(rdmx_conn *c, int check, struct rdmx__wr *wr, rdmx_mr *mr,
		  size_t off, rdmx_token *tok)
{
	int rc = check;

	if (!rc)
		rc = os_post(c, wr, mr, off, tok);
	return rdmx__conn_keep(c, rc);
}

static int rw(rdmx_conn *c, int op, const rdmx_region *r, size_t roff,
	      rdmx_mr *mr, size_t off, size_t len, rdmx_token *tok)
{
	unsigned need = op == RDMX__OP_READ ? RDMX_ACCESS_REMOTE_READ
					    : RDMX_ACCESS_REMOTE_WRITE;
	struct rdmx__wr wr = { .op = op, .len = (uint32_t)len };
	int rc;

	if (!c || !tok)
		return rdmx__fail(-EINVAL, "connection and token are required");
	pthread_mutex_lock(&c->lock);
	rc = op_check(c, r, roff, mr, off, len, need);
	if (!rc) {
		wr.remote_addr = r->addr + roff;
		wr.rkey = r->rkey;
	}
	rc = os_run(c, rc, &wr, mr, off, tok);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int rdmx_read(rdmx_conn *conn, const rdmx_region *region, size_t roff,
	      rdmx_mr *mr, size_t off, size_t len, rdmx_token *tok)
{
	return rw(conn, RDMX__OP_READ, region, roff, mr, off, len, tok);
}

int rdmx_write(rdmx_conn *conn, const rdmx_region *region, size_t roff,
	       rdmx_mr *mr, size_t off, size_t len, rdmx_token *tok)
{
	return rw(conn, RDMX__OP_WRITE, region, roff, mr, off, len, tok);
}

static int atomic(rdmx_conn *c, struct rdmx__wr *wr, const rdmx_region *r,
		  size_t roff, rdmx_mr *mr, size_t off, rdmx_token *tok)
{
	int rc;

	if (!c || !tok)
		return rdmx__fail(-EINVAL, "connection and token are required");
	pthread_mutex_lock(&c->lock);
	rc = atomic_check(c, r, roff, mr, off);
	if (!rc) {
		wr->len = 8;
		wr->remote_addr = r->addr + roff;
		wr->rkey = r->rkey;
	}
	rc = os_run(c, rc, wr, mr, off, tok);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int rdmx_fetch_add(rdmx_conn *conn, const rdmx_region *region, size_t roff,
		   uint64_t add, rdmx_mr *mr, size_t off, rdmx_token *tok)
{
	struct rdmx__wr wr = { .op = RDMX__OP_FETCH_ADD, .add = add };

	return atomic(conn, &wr, region, roff, mr, off, tok);
}

int rdmx_cmp_swap(rdmx_conn *conn, const rdmx_region *region, size_t roff,
		  uint64_t compare, uint64_t swap, rdmx_mr *mr, size_t off,
		  rdmx_token *tok)
{
	struct rdmx__wr wr = { .op = RDMX__OP_CMP_SWAP, .compare = compare,
			       .swap = swap };

	return atomic(conn, &wr, region, roff, mr, off, tok);
}

/* ---------------------------------------------------------------- wait */

/* One poll: the protocol's completions go to the stash; a full stash is
 * the protocol's to drain (its flush polls through rdmx__poll_cq). */
static void os_poll(rdmx_conn *c)
{
	if (rdmx__live_reap(c) == -ENOBUFS)
		(void)c->data_ops->flush(c, 0);
}

static int wait_timeout(rdmx_conn *c, unsigned slot, int timeout_ms)
{
	char peer[64];

	if (c->f->addr_str(c->ep, 1, peer, sizeof(peer)))
		strcpy(peer, "?");
	return rdmx__fail(-ETIMEDOUT, "%s: one-sided %s on the connection to %s not completed "
			  "within %d ms", c->os.op[slot] == RDMX__OP_BIND_MW ?
			  "rdmx_mr_export" : "rdmx_wait", rdmx__os_op_name(c->os.op[slot]),
			  peer, timeout_ms);
}

static int wait_slot(rdmx_conn *c, unsigned slot, int timeout_ms)
{
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		rc = rdmx__os_result(c, slot);
		if (rc <= 0)
			return rc;
		os_poll(c);
		if (!timeout_ms) { /* a poll that finds nothing: no message */
			rc = rdmx__os_result(c, slot);
			return rc == 1 ? -EAGAIN : rc;
		}
		rc = rdmx__conn_wait(c, &d);
		if (rc == -ETIMEDOUT)
			return wait_timeout(c, slot, timeout_ms);
		if (rc) {
			rdmx__os_put(c, slot); /* the connection is down: spent */
			return rc;
		}
	}
}

int rdmx_wait(rdmx_conn *conn, rdmx_token tok, int timeout_ms)
{
	int slot, rc;

	if (!conn)
		return rdmx__fail(-EINVAL, "connection is NULL");
	pthread_mutex_lock(&conn->lock);
	if (RDMX__TOK_IS_SEND(tok)) { /* rdmx_send_tok(): token.c */
		rc = rdmx__send_wait(conn, tok, timeout_ms);
	} else {
		slot = rdmx__os_slot(conn, tok);
		rc = slot < 0 ? slot : wait_slot(conn, (unsigned)slot, timeout_ms);
	}
	if (rc != -EAGAIN)
		rc = rdmx__conn_keep(conn, rc);
	pthread_mutex_unlock(&conn->lock);
	return rc;
}

/* ------------------------------------------------ export to one connection */

/* Bind @mw to @c's QP: a one-sided operation's slot and completion, waited
 * for (c->lock held). */
static int conn_bind(rdmx_conn *c, struct rdmx__mw *mw, struct rdmx__mw_bind *b,
		     int timeout_ms)
{
	int slot, rc;

	if (c->state == RDMX__CONN_DOWN)
		return rdmx__conn_check_peer(c);
	slot = rdmx__os_take(c, RDMX__OP_BIND_MW);
	if (slot < 0)
		return slot;
	b->ep = c->ep;
	b->wr_id = RDMX__OS_WRID(slot);
	rc = c->f->mw_bind(mw, b);
	if (rc) {
		rdmx__os_put(c, (unsigned)slot);
		return rc;
	}
	return wait_slot(c, (unsigned)slot, timeout_ms);
}

static unsigned public_access(int access)
{
	return (access & RDMX__ACCESS_READ ? RDMX_ACCESS_REMOTE_READ : 0) |
	       (access & RDMX__ACCESS_WRITE ? RDMX_ACCESS_REMOTE_WRITE : 0) |
	       (access & RDMX__ACCESS_ATOMIC ? RDMX_ACCESS_REMOTE_ATOMIC : 0);
}

/* Bind @e's window (begun) to @c's QP over @len bytes at @addr with
 * @access, waiting up to @timeout_ms; revoked when it fails. A bind not
 * completed in time takes the connection down (its slot is not given
 * back while the device may still complete it). */
static int export_bind(rdmx_conn *c, void *addr, size_t len, int access,
		       int timeout_ms, struct rdmx__export *e)
{
	struct rdmx__mw_bind b = { .mr = e->under, .addr = addr, .len = len,
				   .access = access };
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = conn_bind(c, e->mw, &b, timeout_ms);
	if (rc == -ETIMEDOUT)
		rc = rdmx__conn_down(c, rc, "%s", rdmx_last_error());
	pthread_mutex_unlock(&c->lock);
	if (!rc)
		e->rkey = e->mw->rkey;
	else
		rdmx__export_revoke(e);
	return rc;
}

int rdmx__export_conn(rdmx_conn *c, void *addr, size_t len, int access, int timeout_ms,
		      struct rdmx__export *out, uint8_t desc[RDMX_REGION_DESC_LEN])
{
	int rc = rdmx__export_begin(c->f, c->ep, addr, len, access, out);

	if (!rc && out->how == RDMX__ISO_WINDOW)
		rc = export_bind(c, addr, len, access, timeout_ms, out);
	if (rc)
		return rdmx__conn_keep(c, rc);
	desc_put(desc, (uintptr_t)addr, len, out->rkey, public_access(access));
	return 0;
}
