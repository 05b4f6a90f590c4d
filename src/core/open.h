/* SPDX-License-Identifier: MIT */
/*
 * A connection made and freed (open.c): what rdmx_dial and rdmx_accept
 * share.
 */
#ifndef RDMX_CORE_OPEN_H
#define RDMX_CORE_OPEN_H

#include <stddef.h>
#include <stdint.h>
#include <rdmx/rdmx.h>

struct rdmx_protocol_ops;

/* Copy @in (or the defaults) to @out, check it, find its protocol:
 * 0, or -EINVAL with a message. */
int rdmx__opts_load(const struct rdmx_conn_opts *in, struct rdmx_conn_opts *out,
		    const struct rdmx_protocol_ops **proto);
/* A new connection of @proto with options @o (loaded), not yet set up;
 * NULL when out of memory. */
rdmx_conn *rdmx__conn_new(rdmx_ctx *ctx, const struct rdmx_conn_opts *o,
			  const struct rdmx_protocol_ops *proto);
/* The protocol's checks with the connection's max_msg, then its setup(). */
int rdmx__conn_setup(rdmx_conn *c);
/* Free everything; the QP goes first (with the ep), then the protocol's
 * state (if @did_setup). */
void rdmx__conn_free(rdmx_conn *c, int did_setup);
/* This side's hello (with @flags) into @buf: its length, or -errno. */
int rdmx__hello_build(rdmx_conn *c, uint16_t flags, uint8_t *buf, size_t cap);

#endif /* RDMX_CORE_OPEN_H */
