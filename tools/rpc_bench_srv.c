// SPDX-License-Identifier: MIT
/*
 * rdmx rpc bench: the servers. An RPC transport's server is an
 * rdmx_rpc_server of the bench's contract run on a thread of its own;
 * the TCP baseline's is rpc_bench_tcp.c's. Both answer the stats request
 * with this process's CPU time, the calls answered and (RPC) the server's
 * outbound work requests.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli.h"
#include "cmds.h"
#include "le.h"
#include "rpc_bench.h"

struct rb_server {
	rdmx_rpc_server *rpc;
	struct rb_tcp_srv *tcp;
	pthread_t t;
	bool running;
};

void rb_contract(uint64_t max, struct rdmx_rpc_method m[2])
{
	m[0] = (struct rdmx_rpc_method){ RB_ECHO, "echo", (uint32_t)max, (uint32_t)max,
		RDMX_RPC_IDEMPOTENT };
	m[1] = (struct rdmx_rpc_method){ RB_STATS, "stats", 0, RB_STATS_LEN,
		RDMX_RPC_IDEMPOTENT };
}

void rb_rpc_opts(const struct rb_cfg *cfg, const char *transport, struct rdmx_rpc_opts *o)
{
	rdmx_rpc_opts_init(o);
	o->transport = transport;
	o->protocol = cfg->protocol;
	o->window = (uint32_t)cfg->window;
	o->workers = (uint32_t)cfg->workers;
	o->timeout_ms = (int)cfg->timeout;
}

/* A timeval in nanoseconds. */
static uint64_t tv_ns(const struct timeval *tv)
{
	return (uint64_t)tv->tv_sec * 1000000000ull + (uint64_t)tv->tv_usec * 1000ull;
}

void rb_proc_cpu(struct rb_snap *s)
{
	struct rusage ru;

	s->user_ns = s->sys_ns = 0;
	if (getrusage(RUSAGE_SELF, &ru))
		return;
	s->user_ns = tv_ns(&ru.ru_utime);
	s->sys_ns = tv_ns(&ru.ru_stime);
}

void rb_snap_put(unsigned char *p, const struct rb_snap *s)
{
	le_put64(p, s->user_ns);
	le_put64(p + 8, s->sys_ns);
	le_put64(p + 16, s->calls);
	le_put64(p + 24, s->wrs);
	le_put64(p + 32, 0);
}

void rb_snap_get(const unsigned char *p, struct rb_snap *s)
{
	s->user_ns = le_get64(p);
	s->sys_ns = le_get64(p + 8);
	s->calls = le_get64(p + 16);
	s->wrs = le_get64(p + 24);
}

/* The echo method: the request back, byte for byte. */
static void on_echo(rdmx_rpc_req *req, void *arg)
{
	size_t len, cap;
	const void *in = rdmx_rpc_req_data(req, &len);
	void *out = rdmx_rpc_req_resp(req, &cap);

	(void)arg;
	memcpy(out, in, len <= cap ? len : cap);
	rdmx_rpc_respond(req, 0, len);
}

/* The stats method: CPU time, calls answered, outbound work requests. */
static void on_stats(rdmx_rpc_req *req, void *arg)
{
	struct rb_server *s = arg;
	struct rdmx_rpc_server_stats st;
	struct rb_snap snap;
	size_t cap;

	rdmx_rpc_server_stats(s->rpc, &st);
	rb_proc_cpu(&snap);
	snap.calls = st.calls;
	snap.wrs = st.work_requests;
	rb_snap_put(rdmx_rpc_req_resp(req, &cap), &snap);
	rdmx_rpc_respond(req, 0, RB_STATS_LEN);
}

/* The server's thread: rdmx_rpc_server_run until stopped. */
static void *serve_main(void *arg)
{
	struct rb_server *s = arg;

	rdmx_rpc_server_run(s->rpc);
	return NULL;
}

/* An rdmx RPC server of @transport, running on its own thread. */
static int rpc_start(rdmx_ctx *ctx, const struct rb_cfg *cfg, const char *transport,
		     const char *addr, uint16_t port, struct rb_server *s)
{
	struct rdmx_listener_opts lo;
	struct rdmx_rpc_method m[2];
	struct rdmx_rpc_opts o;
	int rc;

	rb_contract(cfg->max_size, m);
	rb_rpc_opts(cfg, transport, &o);
	rc = rdmx_rpc_server_create(ctx, addr, port, m, 2, &o, &s->rpc);
	if (rc) {
		fprintf(stderr, "rdmx rpc bench: %s server: %s (%s)\n", transport,
			rdmx_strerror(rc), rdmx_last_error());
		return EXIT_FAIL;
	}
	cli_lab_caps(&lo); /* rfp's and herd's slots count in max_mem */
	rc = rdmx_rpc_server_set_listener_opts(s->rpc, &lo);
	if (rc) {
		fprintf(stderr, "rdmx rpc bench: %s server: %s\n", transport, rdmx_last_error());
		rdmx_rpc_server_destroy(s->rpc);
		return EXIT_FAIL;
	}
	rdmx_rpc_server_handle(s->rpc, RB_ECHO, on_echo, NULL);
	rdmx_rpc_server_handle(s->rpc, RB_STATS, on_stats, s);
	if (pthread_create(&s->t, NULL, serve_main, s)) {
		fprintf(stderr, "rdmx rpc bench: %s server: no thread\n", transport);
		rdmx_rpc_server_destroy(s->rpc);
		return EXIT_FAIL;
	}
	s->running = true;
	return 0;
}

int rb_server_start(rdmx_ctx *ctx, const struct rb_cfg *cfg, const char *transport,
		    const char *addr, uint16_t port, struct rb_server **out)
{
	struct rb_server *s = calloc(1, sizeof(*s));
	char err[512];
	int rc;

	if (!s) {
		fprintf(stderr, "rdmx rpc bench: out of memory\n");
		return EXIT_FAIL;
	}
	if (strcmp(transport, RB_TCP)) {
		rc = rpc_start(ctx, cfg, transport, addr, port, s);
	} else {
		rc = rb_tcp_srv_start(addr, port, cfg->max_size, (int)cfg->timeout, &s->tcp,
				      err, sizeof(err));
		if (rc)
			fprintf(stderr, "rdmx rpc bench: tcp server: %s\n", err);
	}
	if (rc) {
		free(s);
		return EXIT_FAIL;
	}
	*out = s;
	return 0;
}

uint16_t rb_server_port(const struct rb_server *s)
{
	return s->tcp ? rb_tcp_srv_port(s->tcp) : rdmx_rpc_server_port(s->rpc);
}

void rb_server_stop(struct rb_server *s)
{
	if (!s)
		return;
	if (s->tcp)
		rb_tcp_srv_stop(s->tcp);
	if (s->running) {
		rdmx_rpc_server_stop(s->rpc);
		pthread_join(s->t, NULL);
		rdmx_rpc_server_destroy(s->rpc);
	}
	free(s);
}
