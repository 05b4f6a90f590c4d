/* SPDX-License-Identifier: MIT */
/*
 * Vector receive and release (rdmx_recv_many, rdmx_msg_release_many;
 * issue 10): one lock and one set of checks for a run of messages. A
 * protocol that can take or give back several messages cheaper than one
 * by one (one poll, one group lock) sets the recv_many/release_many hooks
 * of its ops table; for the others the core loops the single-message
 * ops under the one lock.
 *
 * An error met after the first message of a vector is not lost and does
 * not hide the messages before it: they are returned, and the error waits
 * in c->recv_later for the next receive call (rdmx_recv or this one).
 */
#include <errno.h>

#include "core/conn.h"
#include "core/errors.h"
#include "core/protocol.h"
#include "core/recvvec.h"

/* The generic vector receive (protocol.h): recv(), then recv() with
 * timeout 0 until it finds nothing (-EAGAIN) or fails. */
int rdmx__default_recv_many(rdmx_conn *c, struct rdmx_msg *m, int max,
			    int timeout_ms, int *later)
{
	int n = 1, rc = c->data_ops->recv(c, m, timeout_ms);

	if (rc)
		return rc;
	while (n < max && !(rc = c->data_ops->recv(c, &m[n], 0)))
		n++;
	if (rc && rc != -EAGAIN)
		*later = rc;
	return n;
}

int rdmx__recv_later(rdmx_conn *c)
{
	int rc = c->recv_later;

	c->recv_later = 0;
	return rdmx__fail(rc, "%s", c->err.msg);
}

static int recv_many_locked(rdmx_conn *c, struct rdmx_msg *m, int max,
			    int timeout_ms)
{
	int later = 0, n;

	if (c->recv_later)
		return rdmx__recv_later(c);
	n = c->data_ops->recv_many(c, m, max, timeout_ms, &later);
	if (n < 0)
		return rdmx__conn_keep(c, n);
	if (later) /* recorded now, its message read back when returned */
		c->recv_later = rdmx__conn_keep(c, later);
	return n;
}

int rdmx_recv_many(rdmx_conn *c, struct rdmx_msg *m, int max, int timeout_ms)
{
	uint64_t bytes = 0;
	int n;

	if (!c || !m || max < 1)
		return rdmx__fail(-EINVAL, "rdmx_recv_many: connection, msgs and max >= 1 are required");
	pthread_mutex_lock(&c->lock);
	n = recv_many_locked(c, m, max, timeout_ms);
	pthread_mutex_unlock(&c->lock);
	if (n <= 0)
		return n;
	for (int i = 0; i < n; i++)
		bytes += m[i].len;
	RDMX__COUNT(c, msgs_recv, n);
	RDMX__COUNT(c, bytes_recv, bytes);
	return n;
}

/* The generic vector release (protocol.h): every handle tried, the first
 * error kept. */
int rdmx__default_release_many(rdmx_conn *c, struct rdmx_msg *m, int n)
{
	int first = 0;

	for (int i = 0; i < n; i++) {
		int rc = c->data_ops->release(c, &m[i]);

		if (rc && !first)
			first = rc;
	}
	return first;
}

int rdmx_msg_release_many(rdmx_conn *c, struct rdmx_msg *m, int n)
{
	int rc;

	if (!c || !m || n < 0)
		return rdmx__fail(-EINVAL, "rdmx_msg_release_many: connection, msgs and n >= 0 are required");
	pthread_mutex_lock(&c->lock);
	rc = c->data_ops->release_many(c, m, n);
	rc = rdmx__conn_keep(c, rc);
	pthread_mutex_unlock(&c->lock);
	return rc;
}
