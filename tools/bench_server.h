/* SPDX-License-Identifier: MIT */
/* rdmx bench: the server side (bench_server.c). */
#ifndef RDMX_TOOLS_BENCH_SERVER_H
#define RDMX_TOOLS_BENCH_SERVER_H

#include "bench_ep.h"

struct bench_server_cfg {
	const char *addr;	/* rdmx listeners; NULL: any address */
	const char *tcp_addr;	/* the tcp listener; NULL: any address */
	uint16_t port;		/* base port; 0: ephemeral ports */
	int n_protos;
	const char *const *protos;
	struct rdmx_conn_opts copts;
	size_t max_msg;		/* tcp: the largest message taken */
	bool until_shutdown;	/* run until a client sends SHUTDOWN */
	bool verbose;		/* a line per connection served */
	bool single_receiver;	/* one thread serves each rdmx listener */
};

struct bench_server;

/** bench_proto_port - the port protocol @name listens on under @base. */
uint16_t bench_proto_port(uint16_t base, const char *name);

/**
 * bench_server_start - listen for every protocol and start accepting. A
 * protocol whose listener fails is reported on stderr and left out
 * (bench_server_port() gives 0 for it); fails only if none listens.
 */
int bench_server_start(rdmx_ctx *ctx, const struct bench_server_cfg *cfg,
		       struct bench_server **out);

/** bench_server_port - the port @proto listens on; 0 if it does not. */
uint16_t bench_server_port(const struct bench_server *s, const char *proto);

/** bench_server_print - "listening on ADDR: proto port N, ..." */
void bench_server_print(const struct bench_server *s, FILE *f);

/**
 * bench_server_stop - until_shutdown: wait for a client's SHUTDOWN and for
 * its connections to end; else stop accepting now. Waits for the workers
 * (they end when their client disconnects), frees @s and returns the number
 * of connections that failed.
 */
int bench_server_stop(struct bench_server *s);

#endif /* RDMX_TOOLS_BENCH_SERVER_H */
