/* SPDX-License-Identifier: MIT */
/*
 * Vector send (rdmx_sendv; issue 10): a burst of messages copied from
 * the caller's iovec, under one lock and one set of checks, posted as an
 * RDMX_SEND_MORE burst is (chained, packed, coalesced) and rung before
 * the call returns. The send side's twin of recvvec.c.
 *
 * A protocol that can place several messages cheaper than one at a time
 * sets the sendv hook of its ops table (send_recv and srq pack a run of
 * small messages straight from the iovec into one frame: no send slot,
 * handle or lock per message, sendpool.c); for the others the core loops
 * msg_alloc() / send_more() / send() under the one lock.
 *
 * Like writev(), it may send fewer than asked: a message that finds no
 * room within the timeout, or a connection that fails after some were
 * sent, ends the call with the count sent so far (the rest is the
 * caller's to send again, and the next call meets the cause). Messages
 * are checked against the connection's maximum before any is sent.
 */
#include <errno.h>
#include <string.h>

#include "core/conn.h"
#include "core/errors.h"
#include "core/protocol.h"
#include "core/sendvec.h"
#include "core/token.h"
#include "core/wait.h"

int rdmx__sendv_alloc(rdmx_conn *c, size_t len, struct rdmx_msg *m,
		      struct rdmx__deadline *d, int timeout_ms)
{
	int rc = c->data_ops->msg_alloc(c, len, m, 0);

	if (rc == -EAGAIN && timeout_ms) /* the clock only when it must wait */
		rc = c->data_ops->msg_alloc(c, len, m, timeout_ms < 0 ? -1 :
					 rdmx__deadline_left_ms(d));
	return rc;
}

/* One message of the generic loop: allocated, copied, sent; @more while
 * others follow. 0, or -errno with nothing sent. */
static int send_one(rdmx_conn *c, const struct iovec *v, int more,
		    struct rdmx__deadline *d, int timeout_ms)
{
	struct rdmx_msg m;
	int rc = rdmx__sendv_alloc(c, v->iov_len, &m, d, timeout_ms);

	if (rc)
		return rc;
	if (v->iov_len)
		memcpy(m.data, v->iov_base, v->iov_len);
	m.len = v->iov_len;
	rc = more ? c->data_ops->send_more(c, &m) : c->data_ops->send(c, &m);
	if (rc)
		c->data_ops->release(c, &m); /* still the sender's buffer */
	return rc;
}

/* The generic vector send (protocol.h): how many were sent, or -errno
 * for none. Each send is counted as it goes (a hold pool's slot takes the
 * send's sequence from the count, sendpool.h). */
int rdmx__default_sendv(rdmx_conn *c, const struct iovec *iov, int n,
			int timeout_ms)
{
	struct rdmx__deadline d;
	uint64_t done;
	int i, rc = 0;

	rdmx__deadline_start(&d, timeout_ms);
	for (i = 0; i < n; i++) {
		rc = send_one(c, &iov[i], i + 1 < n, &d, timeout_ms);
		if (rc)
			break;
		RDMX__COUNT(c, msgs_sent, 1);
	}
	/* ring what the last one held */
	if (i && i < n && c->data_ops->send_more != rdmx__default_send_more)
		c->data_ops->sends_done(c, &done);
	return i ? i : rc;
}

/* Every message present and within the connection's maximum. */
static int sendv_check(const rdmx_conn *c, const struct iovec *iov, int n,
		       uint64_t *bytes)
{
	*bytes = 0;
	for (int i = 0; i < n; i++) {
		if (!iov[i].iov_base && iov[i].iov_len)
			return rdmx__fail(-EINVAL, "rdmx_sendv: message %d has no bytes", i);
		if (iov[i].iov_len > c->max_msg)
			return rdmx__fail(-EMSGSIZE,
					  "rdmx_sendv: message %d of %zu bytes exceeds the connection's maximum of %u",
					  i, iov[i].iov_len, c->max_msg);
		*bytes += iov[i].iov_len;
	}
	return 0;
}

static int sendv_locked(rdmx_conn *c, const struct iovec *iov, int n,
			int timeout_ms, rdmx_token *tok)
{
	uint64_t bytes;
	int rc = rdmx__conn_usable(c);

	if (!rc)
		rc = sendv_check(c, iov, n, &bytes);
	if (rc)
		return rc;
	rc = c->data_ops->sendv(c, iov, n, timeout_ms);
	/* the default counted each as it went */
	if (rc > 0 && c->data_ops->sendv != rdmx__default_sendv)
		RDMX__COUNT(c, msgs_sent, (uint64_t)rc);
	if (rc <= 0)
		return rc;
	for (int i = rc; i < n; i++) /* the bytes of what was sent */
		bytes -= iov[i].iov_len;
	RDMX__COUNT(c, bytes_sent, bytes);
	if (tok)
		*tok = rdmx__tok_make(c, rdmx__sends(c));
	return rc;
}

int rdmx_sendv(rdmx_conn *c, const struct iovec *iov, int n, int timeout_ms,
	       rdmx_token *tok)
{
	int rc;

	if (!c || !iov || n < 1)
		return rdmx__fail(-EINVAL, "rdmx_sendv: connection, iov and n >= 1 are required");
	pthread_mutex_lock(&c->lock);
	rc = rdmx__conn_keep(c, sendv_locked(c, iov, n, timeout_ms, tok));
	pthread_mutex_unlock(&c->lock);
	return rc;
}
