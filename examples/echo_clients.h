/* SPDX-License-Identifier: MIT */
/*
 * What the two echo servers (echo_server.c, echo_server_epoll.c) share
 * and is not the point of either: the command line, the listener, and
 * the CLIENTS client threads in the same process that each send ROUNDS
 * numbered messages, check every echo and leave (echo_clients.c).
 */
#ifndef RDMX_EXAMPLES_ECHO_CLIENTS_H
#define RDMX_EXAMPLES_ECHO_CLIENTS_H

#include <pthread.h>

#include <rdmx/rdmx.h>

#define ROUNDS 100
#define WAIT_MS 10000

struct echo_client {
	pthread_t t;
	rdmx_ctx *ctx;
	const char *addr;
	uint16_t port;
	const struct rdmx_conn_opts *o;
	int id, rc;
};

/* A run: argv is [ADDR ("": the one rdmx picks) [PROTOCOL [CLIENTS]]]. */
struct echo_run {
	struct rdmx_conn_opts o;
	char addr[64];
	rdmx_ctx *ctx;
	rdmx_listener *lis;
	int n;
	struct echo_client *cl;
};

/* The options, the address, a context and a listener on it from @argv;
 * 0, or 1 after saying why (prefixed @name) on stderr. */
int echo_run_open(struct echo_run *r, const char *name, int argc, char **argv);

/* Start the clients on their threads, dialing the listener. */
void echo_clients_start(struct echo_run *r);

/* Wait for the clients (@rc: the server failed; the listener is shut
 * down so that they leave), free everything; the exit status. */
int echo_run_close(struct echo_run *r, int rc);

/* Send @in back on its connection. 0 or -errno. */
int echo_reply(rdmx_conn *c, const struct rdmx_msg *in);

#endif /* RDMX_EXAMPLES_ECHO_CLIENTS_H */
