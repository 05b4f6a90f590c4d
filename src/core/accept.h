/* SPDX-License-Identifier: MIT */
/*
 * Listening and accepting (accept.c): the steps rdmx_listener_next takes.
 */
#ifndef RDMX_CORE_ACCEPT_H
#define RDMX_CORE_ACCEPT_H

#include <rdmx/rdmx.h>

/* One step of rdmx_accept() that never waits: 0 with a connection that is
 * up in *@out, -EAGAIN (no message formatted) or an error. */
int rdmx__accept_step(rdmx_listener *lis, rdmx_conn **out);
/* @c, still pending, has shown it is established (a message came from
 * it): list it as up now. 0, -ENOENT (not pending) or an error. */
int rdmx__accept_promote(rdmx_listener *lis, rdmx_conn *c);

#endif /* RDMX_CORE_ACCEPT_H */
