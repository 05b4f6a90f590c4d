/* SPDX-License-Identifier: MIT */
/*
 * What test_rpc's files share (test_rpc.c, rpc_rfp_tests.c,
 * rpc_herd_tests.c): the contract, a server on its own thread with its
 * handlers, clients of it, the bounded waits on its stats; and the cases
 * of the transport files, listed in test_rpc.c's main.
 */
#ifndef RDMX_TESTS_RPC_COMMON_H
#define RDMX_TESTS_RPC_COMMON_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <rdmx/rpc.h>

#include "harness.h"
#include "rpc/rpc_int.h"

#define M_ECHO 1
#define M_FAIL 2
#define M_HOLD 3
#define M_NONE 4    /* in the contract, no handler */
#define MAX_ECHO 4096
#define HOLD_N 8
#define WAIT_MS 20000

/* The methods M_ECHO, M_FAIL, M_HOLD and M_NONE. */
extern const struct rdmx_rpc_method contract[4];
#define NMETHODS (sizeof(contract) / sizeof(contract[0]))

/* Held requests of M_HOLD, answered by the test thread. */
struct holder {
	pthread_mutex_t lock;
	rdmx_rpc_req *req[64];
	int n;
};

struct srv {
	rdmx_ctx *ctx;
	rdmx_rpc_server *s;
	pthread_t t;
	int rc;
	struct holder hold;
};

/* The server's timeout (its waits for a send buffer): a case may shorten it. */
extern int srv_timeout_ms;
/* Its drop deadline (a client whose responses stay queued) and hello
 * deadline: 0, the defaults. */
extern int srv_drop_ms, srv_hello_ms;

/* The server's window (rfp and herd: slots per client), default 64. */
extern uint32_t srv_window;
/* A case's call count: a fifth on a real device. */
uint64_t calls(uint64_t n);
/* Options of RPC_TRANSPORT / RPC_PROTOCOL, timeout WAIT_MS. */
void opts(struct rdmx_rpc_opts *o);
/* A server of the contract on @workers workers, run on its own thread. */
void srv_start(struct srv *v, unsigned workers);
void srv_stop(struct srv *v);
/* A client of @v with the methods @m (@n of them): NULL and *@rc on error. */
rdmx_rpc_client *dial(struct srv *v, const struct rdmx_rpc_method *m, size_t n,
		      uint32_t window, int *rc);
/* A client of @v with the contract; fails the test if it cannot. */
rdmx_rpc_client *dial_ok(struct srv *v, uint32_t window);
/* Wait (bounded) until @open clients are open and @min_calls served. */
int stats_wait(struct srv *v, uint64_t open, uint64_t min_calls);
/* Wait (bounded) until the server dropped @n peers for malformed frames. */
int bad_wait(struct srv *v, uint64_t n);
/* Wait (bounded) until @n requests of M_HOLD are held. */
int held(struct holder *h, int n);
/* One echo call of @n bytes with the pattern of @seq, checked. */
void echo_once(rdmx_rpc_client *c, size_t n, uint64_t seq);
/* The same within @timeout_ms; its round trip in ms. */
double echo_within(rdmx_rpc_client *c, size_t n, uint64_t seq, int timeout_ms);
/* The server's work requests since @s0 once they reach @want (bounded). */
uint64_t wrs_wait(struct srv *v, const struct rdmx_rpc_server_stats *s0,
		  uint64_t want);

/* A frame @h with @h->len payload bytes sent on a raw connection. */
int raw_frame(rdmx_conn *raw, const struct rpc_hdr *h, const void *payload);
/* A raw rdmx connection to @v (transport msg, send_recv), no hello yet. */
rdmx_conn *raw_dial(struct srv *v);
/* Send the contract's hello on @raw and take the HELLO_OK. */
void raw_hello(rdmx_conn *raw);

/* Servers that never wait on one client (rpc_queue_tests.c). */
void t_stuck_reader(void **state);
void t_stuck_reader_inline(void **state);
void t_hello_deadline(void **state);
void t_rfp_round_robin(void **state);
void t_queue_bytes(void **state);

/* Transport rfp's cases (rpc_rfp_tests.c). */
void t_rfp_fetch_push(void **state);
void t_rfp_push_flood(void **state);
void t_rfp_client_mem(void **state);
void t_rfp_torn(void **state);
void t_rfp_torn_garbage(void **state);
void t_rfp_idle_cpu(void **state);
void t_rfp_read_only(void **state);
void t_rfp_cross(void **state);

/* Admission's cases (rpc_admit_tests.c). */
void t_admit_mem(void **state);
void t_admit_window(void **state);
/* Transport herd's cases (rpc_herd_tests.c). */
void t_herd_counts(void **state);
void t_herd_hostile(void **state);
void t_herd_setup(void **state);
void t_herd_spoof(void **state);
void t_herd_flood(void **state);
void t_herd_window(void **state);
void t_herd_reflect(void **state);
void t_herd_cross(void **state);
void t_herd_stale(void **state);
void t_herd_dial_idle(void **state);

#endif /* RDMX_TESTS_RPC_COMMON_H */
