/* SPDX-License-Identifier: MIT */
/*
 * echo_server: a many-client echo server that is one loop over
 * rdmx_listener_next() - new connections, messages from any of them, and
 * departures all come from that one call. To be self-contained it also
 * starts CLIENTS client threads in the same process; each sends ROUNDS
 * numbered messages, checks every echo, and leaves. The server ends when
 * all have left.
 *
 *   sandbox/run -- build/bin/example_echo_server                 # 3 clients
 *   build/bin/example_echo_server 10.0.0.1 [protocol [clients]]  # RDMA host
 *   build/bin/example_echo_server "" srq                         # srq, picked address
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmx/rdmx.h>

#define ROUNDS 100
#define WAIT_MS 10000

struct client {
	pthread_t t;
	rdmx_ctx *ctx;
	const char *addr;
	uint16_t port;
	const struct rdmx_conn_opts *o;
	int id, rc;
};

/* Echo @in back on its connection. */
static int echo(rdmx_conn *c, const struct rdmx_msg *in)
{
	struct rdmx_msg out;
	int rc = rdmx_msg_alloc(c, in->len, &out, WAIT_MS);

	if (rc)
		return rc;
	memcpy(out.data, in->data, in->len);
	out.len = in->len;
	return rdmx_send(c, &out);
}

static int serve(rdmx_listener *lis, int clients)
{
	struct rdmx_event ev;
	int left = 0, echoed = 0, rc = 0;

	while (left < clients && !(rc = rdmx_listener_next(lis, &ev, WAIT_MS))) {
		switch (ev.type) {
		case RDMX_EVENT_CONN:
			printf("server: a client connected (%s)\n", rdmx_conn_protocol(ev.conn));
			break;
		case RDMX_EVENT_MSG:
			rc = echo(ev.conn, &ev.msg);
			rdmx_msg_release(ev.conn, &ev.msg);
			echoed++;
			break;
		case RDMX_EVENT_CLOSED:
			rdmx_conn_close(ev.conn);
			left++;
			break;
		}
		if (rc)
			break;
	}
	if (rc)
		fprintf(stderr, "server: %s (%s)\n", rdmx_strerror(rc), rdmx_listener_error(lis));
	else
		printf("server: echoed %d messages for %d clients\n", echoed, clients);
	return rc;
}

static int round_trip(rdmx_conn *c, int id, int i)
{
	struct rdmx_msg m;
	char want[64];
	int rc = rdmx_msg_alloc(c, sizeof(want), &m, WAIT_MS);

	if (rc)
		return rc;
	m.len = (size_t)snprintf(m.data, m.cap, "client %d message %d", id, i) + 1;
	memcpy(want, m.data, m.len);
	rc = rdmx_send(c, &m);
	if (!rc)
		rc = rdmx_recv(c, &m, WAIT_MS);
	if (rc)
		return rc;
	if (strcmp(m.data, want))
		rc = -1;
	rdmx_msg_release(c, &m);
	return rc;
}

static void *client_main(void *arg)
{
	struct client *cl = arg;
	rdmx_conn *c;

	cl->rc = rdmx_dial(cl->ctx, cl->addr, cl->port, cl->o, &c);
	if (cl->rc) {
		fprintf(stderr, "client %d: dial: %s\n", cl->id, rdmx_last_error());
		return NULL;
	}
	for (int i = 0; i < ROUNDS && !cl->rc; i++)
		cl->rc = round_trip(c, cl->id, i);
	if (cl->rc)
		fprintf(stderr, "client %d: %s\n", cl->id, rdmx_conn_error(c));
	rdmx_conn_close(c);
	return NULL;
}

int main(int argc, char **argv)
{
	struct rdmx_conn_opts o;
	struct client *cl;
	rdmx_listener *lis;
	int n = argc > 3 ? atoi(argv[3]) : 3, rc, bad = 0;
	char addr[64];
	rdmx_ctx *ctx;

	rdmx_conn_opts_init(&o);
	if (argc > 2)
		o.protocol = argv[2];
	rc = argc > 1 && argv[1][0] ? (snprintf(addr, sizeof(addr), "%s", argv[1]), 0)
		      : rdmx_pick_address(NULL, -1, addr, sizeof(addr));
	if (!rc)
		rc = rdmx_ctx_create(&ctx, NULL);
	if (!rc && (rc = rdmx_listen(ctx, addr, 0, &o, &lis)))
		rdmx_ctx_destroy(ctx);
	if (rc || n < 1 || !(cl = calloc((size_t)n, sizeof(*cl)))) {
		fprintf(stderr, "echo_server: %s (%s)\n", rdmx_strerror(rc), rdmx_last_error());
		return 1;
	}
	for (int i = 0; i < n; i++) {
		cl[i] = (struct client){ .ctx = ctx, .addr = addr, .o = &o, .id = i,
					 .port = rdmx_listener_port(lis) };
		pthread_create(&cl[i].t, NULL, client_main, &cl[i]);
	}
	rc = serve(lis, n);
	if (rc)
		rdmx_listener_shutdown(lis); /* clients fail their waits and leave */
	for (int i = 0; i < n; i++) {
		pthread_join(cl[i].t, NULL);
		bad += cl[i].rc != 0;
	}
	free(cl);
	rdmx_listener_destroy(lis);
	rdmx_ctx_destroy(ctx);
	return rc || bad ? 1 : 0;
}
