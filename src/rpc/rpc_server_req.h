/* SPDX-License-Identifier: MIT */
/*
 * The RPC server's requests and workers (rpc_server_req.c), for the run
 * thread's file (rpc_server.c).
 */
#ifndef RDMX_RPC_SERVER_REQ_H
#define RDMX_RPC_SERVER_REQ_H

#include "rpc/rpc_int.h"

/* Has the client left or failed? (A worker may fail it: resp_failed.) */
bool rdmx__rpc_sc_is_gone(struct rdmx_rpc_server *s, struct rpc_sconn *sc);
/* Fail @sc's client for @rc (its message names the connection): counted
 * as dropped, the server's error; closed once nothing is pending. */
void rdmx__rpc_sc_fail(struct rdmx_rpc_server *s, struct rpc_sconn *sc, int rc);
/* A request frame of a ready connection: handed to its worker (0), or
 * -errno (a malformed one: the caller fails the connection). */
int rdmx__rpc_on_request(struct rdmx_rpc_server *s, struct rpc_sconn *sc,
			 const struct rpc_hdr *h, struct rpc_rx *rx);
void rdmx__rpc_req_spares_init(struct rdmx_rpc_server *s);
void rdmx__rpc_req_spares_free(struct rdmx_rpc_server *s);
int rdmx__rpc_workers_start(struct rdmx_rpc_server *s);
void rdmx__rpc_workers_stop(struct rdmx_rpc_server *s);
void rdmx__rpc_drop_outstanding(struct rdmx_rpc_server *s);

#endif
