/* SPDX-License-Identifier: MIT */
/*
 * A listener's events (event.c): rdmx_listener_next, and what a room
 * above that polls a listener in an idle loop of its own tells it.
 */
#ifndef RDMX_CORE_EVENT_H
#define RDMX_CORE_EVENT_H

#include <rdmx/rdmx.h>

/* A caller that polls @lis with no wait (rdmx_listener_next, timeout 0)
 * in an idle loop of its own (rpc herd) has just parked: its next poll
 * looks for a connection request first, as after a park of the
 * listener's own. Without it such a poll looks every 64th time only. */
void rdmx__listener_parked(rdmx_listener *lis);

#endif /* RDMX_CORE_EVENT_H */
