/* SPDX-License-Identifier: MIT */
/*
 * Listener groups: the connections accepted on one listener (group.c).
 */
#ifndef RDMX_CORE_GROUP_H
#define RDMX_CORE_GROUP_H

#include <rdmx/rdmx.h>

#include "conn.h"
#include "protocol.h"

/* -ESHUTDOWN with a message once the group's listener is shut down. */
int rdmx__group_shut(struct rdmx__group *g);

/* group.c: listener groups. */
int rdmx__group_create(const struct rdmx_protocol_ops *proto,
		       struct rdmx__group **out);
void rdmx__group_put(struct rdmx__group *g);
/* Take a reference for @c (before setup) / list it (once it is up). */
void rdmx__group_join(struct rdmx__group *g, rdmx_conn *c);
int rdmx__group_add(struct rdmx__group *g, rdmx_conn *c);
/* Unlist @c and wait until no listener cursor holds it (rdmx_conn_close,
 * first thing: after it the listener never touches @c). Idempotent. */
void rdmx__group_unlist(rdmx_conn *c);
/* rdmx__group_join() within the caps of @lo (0: uncapped), charging
 * @c->mem_charge bytes; -EAGAIN with a message saying which cap is full.
 * rdmx__group_leave() gives the share back. */
int rdmx__group_admit(struct rdmx__group *g, rdmx_conn *c,
		      const struct rdmx_listener_opts *lo);
/* Unlist @c and drop its reference (from conn_free). */
void rdmx__group_leave(rdmx_conn *c);
int rdmx__group_recv(struct rdmx__group *g, struct rdmx_msg *m,
		     int timeout_ms);
/* Look for a departed peer on every member not yet reported gone and
 * not held by another thread (trylock). */
void rdmx__group_check_peers(struct rdmx__group *g);

#endif /* RDMX_CORE_GROUP_H */
