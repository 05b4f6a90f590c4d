/* SPDX-License-Identifier: MIT */
/*
 * Waits on a connection or a listener group: the wait step with the
 * connection's checks, and the sleeps on its wait set (waitset.c).
 */
#ifndef RDMX_CORE_WAITSET_H
#define RDMX_CORE_WAITSET_H

#include <rdmx/rdmx.h>

#include "conn.h"
#include "fabric.h"
#include "wait.h"

/*
 * rdmx__conn_wait - rdmx__wait_idle() for a wait on one connection, in
 * the connection's wait mode, with its checks. Returns 0 to keep polling,
 * -EAGAIN (no message formatted: rdmx__again) for a zero timeout,
 * -ETIMEDOUT, or the error the connection went down with.
 */
int rdmx__conn_wait(rdmx_conn *c, struct rdmx__deadline *d);

/*
 * rdmx__recv_idle - the end of a receive loop's turn that found nothing:
 * the connection's error once it is down (after the poll that follows
 * the wait that found the peer gone, so everything the peer wrote before
 * it left is delivered first), else one rdmx__conn_wait() step. Returns 0
 * to poll again, or -errno.
 */
static inline int rdmx__recv_idle(rdmx_conn *c, struct rdmx__deadline *d)
{
	int rc;

	if (c->state == RDMX__CONN_DOWN)
		return rdmx__fail(c->down_rc, "%s", c->err.msg);
	rc = rdmx__conn_wait(c, d);
	return c->state == RDMX__CONN_DOWN ? 0 : rc;
}

/*
 * waitset.c. rdmx__conn_watch: in setup(), a CQ @c's waits depend on;
 * RDMX__WATCH_RECV if its receives complete there. rdmx__conn_park: the
 * park of rdmx__conn_wait (sleeps on the watched CQs and the rdma_cm
 * channel, or a timed park). rdmx__conn_once: a zero-timeout poll found
 * nothing: 0 to poll once more (the CQs were armed only now, for
 * rdmx_conn_fd's user), else -EAGAIN. rdmx__lis_watch: a pending
 * handshake's rdma_cm channel joins (@on) or leaves the listener's fd.
 * The backstop bounds every sleep on a wait set (tests raise it).
 */
#define RDMX__WAIT_BACKSTOP_MS 100
extern int rdmx__wait_backstop_ms;
void rdmx__ws_init(struct rdmx__waitset *w);
void rdmx__ws_fini(struct rdmx__waitset *w);
void rdmx__conn_watch(rdmx_conn *c, struct rdmx__cq *cq, unsigned flags);
void rdmx__conn_park(rdmx_conn *c, struct rdmx__deadline *d);
int rdmx__conn_once(rdmx_conn *c);
void rdmx__lis_watch(rdmx_listener *lis, rdmx_conn *c, int on);
/*
 * Listener-level sleeps (waitset.c): rdmx__group_park is the park of a
 * wait on every member of @g at once (rdmx_listener_recv; with @fd the
 * listener's rdmx__lis_park_fd, rdmx_listener_next: connection requests
 * and handshakes too). It arms each member's wait set as rdmx__conn_park
 * does (CQs, sleep_announce) and sleeps on @g's epoll set of them, bounded
 * by the deadline and the backstop; a member that cannot wake a sleep (no
 * receive CQ: timed parks) makes it a timed park, a member another thread
 * holds bounds it to a millisecond. The caller has run its checks.
 * rdmx__group_arm: one member's part (1: poll again, 0: armed, -EBUSY:
 * held elsewhere, -errno: cannot sleep), rdmx__group_rest its end after
 * the sleep; rdmx__group_unwatch: @c leaves the set (no cursor holds it);
 * rdmx__group_kick: wake every sleeper (shutdown), for good.
 */
void rdmx__group_park(struct rdmx__group *g, int fd, struct rdmx__deadline *d);
/* A sleep's bound: what is left of @d, at most the backstop. */
int rdmx__wait_sleep_bound_ms(struct rdmx__deadline *d);
int rdmx__group_fd(struct rdmx__group *g);
int rdmx__group_arm(struct rdmx__group *g, rdmx_conn *c);
void rdmx__group_rest(rdmx_conn *c);
void rdmx__group_unwatch(struct rdmx__group *g, rdmx_conn *c);
void rdmx__group_kick(struct rdmx__group *g);
void rdmx__group_ws_fini(struct rdmx__group *g);
int rdmx__lis_park_fd(rdmx_listener *lis);
/* Wake @c's sleeping wait: what it waits for came by another path (srq:
 * another connection's poll of the shared CQ queued @c a message). */
void rdmx__conn_kick(rdmx_conn *c);

#endif /* RDMX_CORE_WAITSET_H */
