/* SPDX-License-Identifier: MIT */
/*
 * The public data path: each call takes the connection's lock, checks
 * what every protocol would, dispatches to the connection's protocol and
 * counts what went through. rdmx_send_mr copies a registered range into
 * a message; rdmx_send_mr_tok sends from it where the protocol can.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "conn.h"
#include "errors.h"
#include "group.h"
#include "mem.h"
#include "msg.h"
#include "protocol.h"
#include "recvvec.h"
#include "token.h"


/*
 * The data-path calls hold c->lock for their whole run, so a connection's
 * calls never overlap (the threading contract in rdmx.h); the listener's
 * member poll only tries the lock.
 */
static int msg_alloc_locked(rdmx_conn *c, size_t size, struct rdmx_msg *m,
			    int timeout_ms)
{
	int rc = rdmx__conn_usable(c);

	if (rc)
		return rc;
	if (!m)
		return rdmx__fail(-EINVAL, "rdmx_msg_alloc: msg is NULL");
	if (size > c->max_msg)
		return rdmx__fail(-EMSGSIZE,
				  "message of %zu bytes exceeds the connection's maximum of %u",
				  size, c->max_msg);
	return c->data_ops->msg_alloc(c, size, m, timeout_ms);
}

int rdmx_msg_alloc(rdmx_conn *c, size_t size, struct rdmx_msg *m,
		   int timeout_ms)
{
	int rc;

	if (!c)
		return rdmx__fail(-EINVAL, "connection is NULL");
	pthread_mutex_lock(&c->lock);
	rc = rdmx__conn_keep(c, msg_alloc_locked(c, size, m, timeout_ms));
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* What every send checks first: the connection usable, @m there and
 * within its buffer and the connection's maximum. Inline, as the
 * counting below: they are on every message's path (bench/profile-burst:
 * a call of its own cost send_recv 24 instructions a message). */
RDMX__HOT int send_check(rdmx_conn *c, const struct rdmx_msg *m)
{
	int rc = rdmx__conn_usable(c);

	if (rc)
		return rc;
	if (!m)
		return rdmx__fail(-EINVAL, "rdmx_send: msg is NULL");
	if (m->len > m->cap || m->len > c->max_msg)
		return rdmx__fail(-EMSGSIZE,
				  "message of %zu bytes exceeds its buffer of %zu bytes",
				  m->len, m->cap);
	return 0;
}

/* The send's outcome @rc, kept; a send that succeeded is counted, and
 * its count is its sequence, the token (under c->lock). */
RDMX__HOT int send_counted(rdmx_conn *c, int rc, size_t len, rdmx_token *tok)
{
	rc = rdmx__conn_keep(c, rc);
	if (!rc) {
		uint64_t seq = RDMX__COUNT(c, msgs_sent, 1) + 1;

		if (tok)
			*tok = rdmx__tok_make(c, seq);
		RDMX__COUNT(c, bytes_sent, len);
	}
	return rc;
}

static int send_locked(rdmx_conn *c, struct rdmx_msg *m, unsigned flags)
{
	int rc = send_check(c, m);

	if (rc)
		return rc;
	if (flags & RDMX_SEND_MORE)
		return c->data_ops->send_more(c, m);
	return c->data_ops->send(c, m);
}

int rdmx_send_flags(rdmx_conn *c, struct rdmx_msg *m, unsigned flags,
		    rdmx_token *tok)
{
	int rc;

	if (!c)
		return rdmx__fail(-EINVAL, "connection is NULL");
	if (flags & ~(unsigned)RDMX_SEND_MORE)
		return rdmx__fail(-EINVAL, "rdmx_send_flags: unknown flags %#x",
				  flags & ~(unsigned)RDMX_SEND_MORE);
	size_t len = m ? m->len : 0; /* the handle is spent once sent */

	pthread_mutex_lock(&c->lock);
	rc = send_counted(c, send_locked(c, m, flags), len, tok);
	pthread_mutex_unlock(&c->lock);
	return rc;
}


int rdmx_send_tok(rdmx_conn *c, struct rdmx_msg *m, rdmx_token *tok)
{
	return rdmx_send_flags(c, m, 0, tok);
}

int rdmx_send(rdmx_conn *c, struct rdmx_msg *m)
{
	return rdmx_send_flags(c, m, 0, NULL);
}

int rdmx_flush(rdmx_conn *c, int timeout_ms)
{
	int rc;

	if (!c)
		return rdmx__fail(-EINVAL, "connection is NULL");
	pthread_mutex_lock(&c->lock);
	rc = rdmx__conn_usable(c);
	if (!rc)
		rc = c->data_ops->flush(c, timeout_ms);
	rc = rdmx__conn_keep(c, rc);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int rdmx_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms)
{
	int rc;

	if (!c || !m)
		return rdmx__fail(-EINVAL, "rdmx_recv: connection and msg are required");
	/* Messages that arrived before the peer left are still delivered,
	 * so the protocol is asked even when the connection is down. */
	pthread_mutex_lock(&c->lock);
	rc = c->recv_later ? rdmx__recv_later(c) :
			     rdmx__conn_keep(c, c->data_ops->recv(c, m, timeout_ms));
	pthread_mutex_unlock(&c->lock);
	if (!rc) {
		RDMX__COUNT(c, msgs_recv, 1);
		RDMX__COUNT(c, bytes_recv, m->len);
	}
	return rc;
}

int rdmx_msg_release(rdmx_conn *c, struct rdmx_msg *m)
{
	int rc;

	if (!c || !m)
		return rdmx__fail(-EINVAL, "rdmx_msg_release: connection and msg are required");
	pthread_mutex_lock(&c->lock);
	rc = rdmx__conn_keep(c, c->data_ops->release(c, m));
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int rdmx_listener_recv(rdmx_listener *lis, struct rdmx_msg *m, int timeout_ms)
{
	int rc;

	if (!lis || !m)
		return rdmx__fail(-EINVAL, "rdmx_listener_recv: listener and msg are required");
	__atomic_add_fetch(&lis->waiters, 1, __ATOMIC_ACQ_REL);
	rc = rdmx__group_shut(lis->group);
	if (!rc)
		rc = rdmx__group_recv(lis->group, m, timeout_ms);
	if (!rc) {
		RDMX__COUNT(rdmx_msg_conn(m), msgs_recv, 1);
		RDMX__COUNT(rdmx_msg_conn(m), bytes_recv, m->len);
	}
	if (rc != -ESHUTDOWN) /* see accept_wait() */
		rdmx__keep(&lis->err, rc);
	__atomic_sub_fetch(&lis->waiters, 1, __ATOMIC_ACQ_REL);
	return rc;
}

rdmx_conn *rdmx_msg_conn(const struct rdmx_msg *m)
{
	return m ? rdmx__msg_conn(m) : NULL;
}

/* rdmx_send_tok() of @m (from rdmx_msg_alloc on @c, m->len set) through
 * the protocol's send_from hook (which it must have): its bytes are
 * @from's, registered with @lkey. */
static int send_from(rdmx_conn *c, struct rdmx_msg *m, const void *from,
		     uint32_t lkey, rdmx_token *tok)
{
	size_t len = m->len;
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = send_check(c, m);
	if (!rc)
		rc = c->data_ops->send_from(c, m, from, lkey);
	rc = send_counted(c, rc, len, tok);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* ------------------------------------------- send from registered memory */

/* The copy: @len bytes at @off in @mr into a send buffer, sent. */
static int send_copy(rdmx_conn *conn, rdmx_mr *mr, size_t off, size_t len,
		     int timeout_ms, rdmx_token *tok)
{
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(conn, len, &m, timeout_ms);

	if (rc)
		return rc;
	memcpy(m.data, (const char *)rdmx_mr_addr(mr) + off, len);
	m.len = len;
	rc = rdmx_send_tok(conn, &m, tok);
	if (rc)
		rdmx_msg_release(conn, &m); /* the buffer stays ours: give it back */
	return rc;
}

int rdmx_send_mr(rdmx_conn *conn, rdmx_mr *mr, size_t off, size_t len,
		 int timeout_ms)
{
	int rc;

	if (!conn || !mr)
		return rdmx__fail(-EINVAL, "rdmx_send_mr: connection and mr are required");
	rc = rdmx__mr_range(mr, off, len);
	if (rc)
		return rdmx__conn_keep(conn, rc);
	return send_copy(conn, mr, off, len, timeout_ms, NULL);
}

int rdmx_send_mr_tok(rdmx_conn *conn, rdmx_mr *mr, size_t off, size_t len,
		     int timeout_ms, rdmx_token *tok)
{
	const struct rdmx__mr *reg;
	struct rdmx_msg m;
	int rc;

	if (!conn || !mr || !tok)
		return rdmx__fail(-EINVAL, "rdmx_send_mr_tok: connection, mr and tok are required");
	rc = rdmx__mr_range(mr, off, len);
	if (!rc && conn->data_ops->send_from == rdmx__default_send_from)
		/* the protocol frames: a copy */
		return send_copy(conn, mr, off, len, timeout_ms, tok);
	if (!rc)
		rc = rdmx__mr_on(conn, mr, &reg);
	if (rc)
		return rdmx__conn_keep(conn, rc);
	rc = rdmx_msg_alloc(conn, len, &m, timeout_ms);
	if (rc)
		return rc;
	m.len = len;
	rc = send_from(conn, &m, (const char *)rdmx_mr_addr(mr) + off, reg->lkey, tok);
	if (rc)
		rdmx_msg_release(conn, &m); /* nothing was posted */
	return rc;
}
