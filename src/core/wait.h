/* SPDX-License-Identifier: MIT */
/*
 * The wait step (wait.c) every blocking call takes, for the core's wait
 * loops and for a room's own (rpc's transports): a loop polls what it
 * waits for and, on an empty poll, takes one step; the bound is a
 * deadline (clock.h). The step with a connection's checks is
 * rdmx__conn_wait (waitset.h); the checks a loop of its own makes between
 * steps are its modules': a connection's peer, rdmx__conn_check_peer
 * (live.h), and a listener told that its poller parked,
 * rdmx__listener_parked (event.h).
 */
#ifndef RDMX_CORE_WAIT_H
#define RDMX_CORE_WAIT_H

#include "clock.h"

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

#endif /* RDMX_CORE_WAIT_H */
