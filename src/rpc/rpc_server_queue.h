/* SPDX-License-Identifier: MIT */
/*
 * A server connection's bounded queue of frames it could not take yet
 * (rpc_server_queue.c), for the run thread's file (rpc_server.c) and the
 * responders' (rpc_server_req.c).
 */
#ifndef RDMX_RPC_SERVER_QUEUE_H
#define RDMX_RPC_SERVER_QUEUE_H

#include "rpc/rpc_int.h"

/* The queue's byte bound against @s's contract (s->o loaded, s->k too):
 * 0 by default 16 MiB, or one frame of the contract's largest where that
 * is more; -EINVAL with a message when queue_bytes was set below one
 * frame (the first response a busy connection queued would drop it). */
int rdmx__rpc_queue_bounds(struct rdmx_rpc_server *s);
/* Send @h and its @h->len bytes at @payload on @sc now, or queue a copy
 * when the connection cannot take it now (no wait, any thread): 0, or
 * -errno with a message naming the connection (its queue overflowed or
 * the connection failed: the client is to be dropped). */
int rdmx__rpc_sc_send(struct rdmx_rpc_server *s, struct rpc_sconn *sc,
		      const struct rpc_hdr *h, const void *payload);
/* Send what @sc has queued while it takes it (the run thread, @now_ms
 * the one clock's): 0 (nothing left), 1 (some left, still moving within
 * drop_ms), or -errno with a message naming the connection (its queue
 * made no progress for drop_ms, or it failed: the client is to be
 * dropped). */
int rdmx__rpc_sc_drain(struct rdmx_rpc_server *s, struct rpc_sconn *sc, int64_t now_ms);
/* Free what @sc still has queued (its connection is being closed). */
void rdmx__rpc_sc_queue_free(struct rdmx_rpc_server *s, struct rpc_sconn *sc);
/* "connection #N (peer)" in @buf: how every message names a connection. */
const char *rdmx__rpc_sc_name(const struct rpc_sconn *sc, char *buf, size_t n);

#endif
