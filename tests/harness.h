/* SPDX-License-Identifier: MIT */
/*
 * Test harness shared by the unit (fake fabric) and integration (rxe) runs
 * of the same conformance tests: payload patterns, a connected pair of
 * endpoints in one process, and an echo server thread.
 */
#ifndef RDMX_TESTS_HARNESS_H
#define RDMX_TESTS_HARNESS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <rdmx/rdmx.h>

/* Fill @n bytes with the pattern of message @seq (seq in the first 8). */
void th_fill(void *buf, size_t n, uint64_t seq);
/* Offset of the first byte that differs from the pattern, or -1. */
long th_check(const void *buf, size_t n, uint64_t seq);
/* Deterministic pseudo-random numbers (splitmix64). */
uint64_t th_rand(uint64_t *state);

/* @protocol's options with messages up to @max_msg and @send_depth and
 * @recv_depth buffers (0: the default); the rest are the defaults. */
struct rdmx_conn_opts th_opts(const char *protocol, uint64_t max_msg, uint32_t send_depth,
			      uint32_t recv_depth);

/* Send @len bytes of message @seq's pattern (th_fill) on @c, waiting up to
 * @timeout_ms for a buffer. 0 or -errno. */
int th_send_seq(rdmx_conn *c, uint64_t seq, size_t len, int timeout_ms);

/* The fabric the tests run on ("fake" or "verbs") and the address to use:
 * RDMX_TEST_ADDR, else RDMX_SANDBOX_ADDR, else rdmx_pick_address(). */
const char *th_fabric(void);
const char *th_addr(void);

/* The protocols a test runs for, one a call, from *@i == 0: every rdmx
 * protocol, or only RDMX_TEST_PROTOCOL when that is set; NULL after the
 * last. */
const char *th_next_protocol(int *i);

struct th_pair {
	rdmx_ctx *ctx;
	rdmx_listener *lis;
	rdmx_conn *client;
	rdmx_conn *server;
};

/* Listen (port 0), dial and accept; both ends in this process. 0 or -errno. */
int th_pair_open(struct th_pair *p, const struct rdmx_conn_opts *server_opts,
		 const struct rdmx_conn_opts *client_opts);
void th_pair_close(struct th_pair *p);

/* An rdmx_accept() on a thread of its own, so that a test can dial (or
 * connect through the seam) meanwhile. Set lis (and timeout_ms, 0 meaning
 * 20 s), start, dial, then join: the accept's result, conn on success. */
struct th_acceptor {
	rdmx_listener *lis;
	int timeout_ms;
	rdmx_conn *conn;
	int rc;
	pthread_t t;
};
void th_accept_start(struct th_acceptor *a);
int th_accept_join(struct th_acceptor *a);

/* Echo every message on @conn back until the peer leaves. */
struct th_echo {
	pthread_t thread;
	rdmx_conn *conn;
	long echoed;
	int rc; /* why it stopped: -ECONNRESET is the normal end */
};
void th_echo_start(struct th_echo *e, rdmx_conn *conn);
int th_echo_join(struct th_echo *e);

/* A test's message count: @n, or @n / 20 when RDMX_TEST_QUICK is set
 * (valgrind runs: memory checking, not volume). */
uint64_t th_count(uint64_t n);

/* Milliseconds on the monotonic clock. */
double th_now_ms(void);

/* A run that hangs fails instead: after @seconds SIGALRM writes the
 * formatted message to stdout and the process exits with 1. A second call
 * re-arms it with a new message; th_watchdog(0, NULL) disarms it. */
void th_watchdog(unsigned seconds, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* RDMX_TESTS_HARNESS_H */
