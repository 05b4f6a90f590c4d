// SPDX-License-Identifier: MIT
/* The echo servers' command line, listener and in-process clients. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "echo_clients.h"

int echo_reply(rdmx_conn *c, const struct rdmx_msg *in)
{
	struct rdmx_msg out;
	int rc = rdmx_msg_alloc(c, in->len, &out, WAIT_MS);

	if (rc)
		return rc;
	memcpy(out.data, in->data, in->len);
	out.len = in->len;
	return rdmx_send(c, &out);
}

/* Message @i of client @id there and back; the echo must be the same. */
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
		rc = -EBADMSG;
	rdmx_msg_release(c, &m);
	return rc;
}

static void *client_main(void *arg)
{
	struct echo_client *cl = arg;
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

int echo_run_open(struct echo_run *r, const char *name, int argc, char **argv)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->n = argc > 3 ? atoi(argv[3]) : 3;
	rdmx_conn_opts_init(&r->o);
	if (argc > 2)
		r->o.protocol = argv[2];
	rc = argc > 1 && argv[1][0] ? (snprintf(r->addr, sizeof(r->addr), "%s", argv[1]), 0)
		      : rdmx_pick_address(NULL, -1, r->addr, sizeof(r->addr));
	if (!rc)
		rc = rdmx_ctx_create(&r->ctx, NULL);
	if (!rc && (rc = rdmx_listen(r->ctx, r->addr, 0, &r->o, &r->lis)))
		rdmx_ctx_destroy(r->ctx);
	if (rc || r->n < 1 || !(r->cl = calloc((size_t)r->n, sizeof(*r->cl)))) {
		fprintf(stderr, "%s: %s (%s)\n", name, rdmx_strerror(rc), rdmx_last_error());
		if (!rc) {
			rdmx_listener_destroy(r->lis);
			rdmx_ctx_destroy(r->ctx);
		}
		return 1;
	}
	return 0;
}

void echo_clients_start(struct echo_run *r)
{
	for (int i = 0; i < r->n; i++) {
		r->cl[i] = (struct echo_client){ .ctx = r->ctx, .addr = r->addr, .o = &r->o,
						 .id = i, .port = rdmx_listener_port(r->lis) };
		pthread_create(&r->cl[i].t, NULL, client_main, &r->cl[i]);
	}
}

int echo_run_close(struct echo_run *r, int rc)
{
	int bad = 0;

	if (rc)
		rdmx_listener_shutdown(r->lis); /* clients fail their waits and leave */
	for (int i = 0; i < r->n; i++) {
		pthread_join(r->cl[i].t, NULL);
		bad += r->cl[i].rc != 0;
	}
	free(r->cl);
	rdmx_listener_destroy(r->lis);
	rdmx_ctx_destroy(r->ctx);
	return rc || bad ? 1 : 0;
}
