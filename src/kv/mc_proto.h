/* SPDX-License-Identifier: MIT */
/*
 * The memcached ASCII protocol over the rdmx KV store: a parser and
 * executor with no sockets (mc_proto.c) over a session (mc_sess.h), its
 * output and the caps of its buffers below it (mc_out.h). The server
 * (mc_server.c) feeds a session the bytes a client sent and writes back
 * what the session put in its output buffer.
 */
#ifndef RDMX_KV_MC_PROTO_H
#define RDMX_KV_MC_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv/kv_internal.h"
#include "kv/mc_out.h"
#include "kv/mc_sess.h"

int rdmx__mc_sess_init(struct rdmx__mc_sess *s, struct rdmx__kv *kv,
		       struct rdmx__mc_counters *count, const char *version);
void rdmx__mc_sess_fini(struct rdmx__mc_sess *s);
size_t rdmx__mc_execute(struct rdmx__mc_sess *s, const uint8_t *in, size_t n);

#endif /* RDMX_KV_MC_PROTO_H */
