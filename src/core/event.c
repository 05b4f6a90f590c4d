/* SPDX-License-Identifier: MIT */
/*
 * rdmx_listener_next: one call that returns a server's next event - a new
 * connection, a message on any member, or a member whose peer is gone - so
 * a server is one loop. It interleaves the two things a listener waits for,
 * neither waiting: an accept step (rdmx__accept_step: handshakes in flight
 * and one new request) and a poll of the members (the group's receive with
 * a zero timeout). A busy listener looks for connections between every
 * ACCEPT_EVERY messages, so a stream of messages never starves a dialer;
 * an idle one after every check and park of the wait step, where it sleeps
 * on one epoll set (rdmx__lis_park_fd: its rdma_cm channel, its handshakes'
 * and every member's wait set), woken by whichever comes first.
 */
#include <errno.h>
#include <stdatomic.h>

#include "accept.h"
#include "conn.h"
#include "errors.h"
#include "event.h"
#include "group.h"
#include "msg.h"
#include "wait.h"
#include "waitset.h"

#define ACCEPT_EVERY 64  /* events between two looks at a busy listener */

/*
 * A connection is announced before its first event: on a shared receive
 * queue (srq) a dialer's first message can arrive before the handshake's
 * last step reaches the listener; the message proves the connection up
 * (as IB's communication-established event does), so it is promoted, its
 * CONN event returned and the message held for the next call.
 */
static void announce_first(rdmx_listener *lis, struct rdmx_event *ev)
{
	if (atomic_load_explicit(&ev->conn->state, memory_order_acquire) != RDMX__CONN_SETUP ||
	    rdmx__accept_promote(lis, ev->conn))
		return;
	lis->held_ev = *ev;
	lis->held = 1;
	ev->type = RDMX_EVENT_CONN;
}

/* A message or a member gone: 0 with @ev filled, -EAGAIN for nothing. */
static int next_msg(rdmx_listener *lis, struct rdmx_event *ev, int wait_ms)
{
	int rc = rdmx__group_recv(lis->group, &ev->msg, wait_ms);

	if (!rc || rc == -ECONNRESET) {
		ev->type = rc ? RDMX_EVENT_CLOSED : RDMX_EVENT_MSG;
		ev->conn = rdmx__msg_conn(&ev->msg);
		if (!rc) {
			RDMX__COUNT(ev->conn, msgs_recv, 1);
			RDMX__COUNT(ev->conn, bytes_recv, ev->msg.len);
		}
		announce_first(lis, ev);
		return 0;
	}
	if (rc == -EAGAIN || rc == -ETIMEDOUT || rc == -ENOTCONN)
		return -EAGAIN;
	return rc;
}

static int next_once(rdmx_listener *lis, struct rdmx_event *ev, int wait_ms)
{
	rdmx_conn *c;
	int rc;

	if (lis->held) {
		*ev = lis->held_ev;
		lis->held = 0;
		return 0;
	}
	if (lis->next_polls++ % ACCEPT_EVERY == 0) {
		rc = rdmx__accept_step(lis, &c);
		if (!rc) {
			ev->type = RDMX_EVENT_CONN;
			ev->conn = c;
			return 0;
		}
		if (rc != -EAGAIN)
			return rc;
	}
	return next_msg(lis, ev, wait_ms);
}

/* The checks of an idle turn: members' peers, shutdown, the deadline. */
static int next_checks(rdmx_listener *lis, struct rdmx__deadline *d, int timeout_ms)
{
	int rc;

	rdmx__group_check_peers(lis->group);
	rc = rdmx__group_shut(lis->group);
	if (rc)
		return rc;
	if (!d->forever && !rdmx__deadline_left_ms(d))
		return rdmx__fail(-ETIMEDOUT, "no connection, message or departure within %d ms",
				  timeout_ms);
	return 0;
}

/*
 * Poll both things a listener waits for without waiting (the accept step
 * every ACCEPT_EVERY turns, the members every turn); when the wait step
 * says so, run the checks and park on the listener's park fd: its
 * rdma_cm channel, its handshakes' and every member's wait set.
 */
static int next_wait(rdmx_listener *lis, struct rdmx_event *ev, int timeout_ms)
{
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	rdmx__deadline_mode(&d, lis->group->wait_mode, lis->group->spin_us);
	rc = rdmx__group_shut(lis->group);
	while (!rc) {
		rc = next_once(lis, ev, 0);
		if (rc != -EAGAIN)
			return rc;
		if (d.once)
			return rdmx__again();
		rc = 0;
		if (!rdmx__wait_idle(&d))
			continue;
		lis->next_polls = 0; /* after a check or a park: connections first */
		rc = next_checks(lis, &d, timeout_ms);
		if (!rc)
			rdmx__group_park(lis->group, rdmx__lis_park_fd(lis), &d);
	}
	return rc;
}

void rdmx__listener_parked(rdmx_listener *lis)
{
	lis->next_polls = 0;
}

int rdmx_listener_next(rdmx_listener *lis, struct rdmx_event *ev, int timeout_ms)
{
	int rc;

	if (!lis || !ev)
		return rdmx__fail(-EINVAL, "rdmx_listener_next: listener and event are required");
	__atomic_add_fetch(&lis->waiters, 1, __ATOMIC_ACQ_REL);
	rc = next_wait(lis, ev, timeout_ms);
	if (rc && rc != -ESHUTDOWN) /* see accept_wait() */
		rdmx__keep(&lis->err, rc);
	__atomic_sub_fetch(&lis->waiters, 1, __ATOMIC_ACQ_REL);
	return rc;
}
