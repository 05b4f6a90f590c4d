/* SPDX-License-Identifier: MIT */
/*
 * The wait step (wait.c) every blocking call takes, for the core's wait
 * loops and for a room's own (rpc's transports): a loop polls what it
 * waits for and, on an empty poll, takes one step; the bound is a
 * deadline (clock.h). Also the two checks such a loop of its own makes
 * between steps: a connection's peer (live.c) and a listener told that
 * its poller parked (event.c).
 */
#ifndef RDMX_CORE_WAIT_H
#define RDMX_CORE_WAIT_H

#include <rdmx/rdmx.h>

#include "clock.h"

/* Fill @o's wait_mode and spin_us left at their defaults from @ctx. */
void rdmx__wait_resolve(const rdmx_ctx *ctx, struct rdmx_conn_opts *o);

/*
 * rdmx__wait_idle - the wait step: call once per empty poll of a wait
 * loop. Spins or yields as the deadline's mode says. Returns 1 when the
 * caller should run its slow checks (peer, deadline, shutdown): every
 * RDMX__WAIT_CHECK_EVERY spins, and every time once the wait parks;
 * then, unless a check ends the wait, the caller calls rdmx__wait_park()
 * (outside its locks), which sleeps once the wait is past its spinning.
 */
#define RDMX__WAIT_CHECK_EVERY 256u
int rdmx__wait_idle(struct rdmx__deadline *d);
void rdmx__wait_park(struct rdmx__deadline *d);

/*
 * rdmx__conn_wait - rdmx__wait_idle() for a wait on one connection, in
 * the connection's wait mode, with its checks. Returns 0 to keep polling,
 * -EAGAIN (no message formatted: rdmx__again) for a zero timeout,
 * -ETIMEDOUT, or the error the connection went down with.
 */
int rdmx__conn_wait(rdmx_conn *c, struct rdmx__deadline *d);

/* live.c: down with -ECONNRESET if the peer disconnected; else its
 * down_rc or 0. */
int rdmx__conn_check_peer(rdmx_conn *c);

/* event.c: a caller that polls @lis with no wait (rdmx_listener_next,
 * timeout 0) in an idle loop of its own (rpc herd) has just parked: its
 * next poll looks for a connection request first, as after a park of the
 * listener's own. Without it such a poll looks every 64th time only. */
void rdmx__listener_parked(rdmx_listener *lis);

#endif /* RDMX_CORE_WAIT_H */
