/* SPDX-License-Identifier: MIT */
/*
 * hello: the smallest complete rdmx program. A listener and a dialer in one
 * process (two threads) exchange one message each way.
 *
 *   sandbox/run -- build/bin/example_hello            # address from the device
 *   build/bin/example_hello 10.0.0.1 [protocol]       # on a machine with RDMA
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <rdmx/rdmx.h>

static rdmx_listener *lis;

static void *server(void *arg)
{
	struct rdmx_msg m;
	rdmx_conn *c;
	int rc = rdmx_accept(lis, 10000, &c);

	(void)arg;
	if (rc) {
		fprintf(stderr, "accept: %s (%s)\n", rdmx_strerror(rc), rdmx_listener_error(lis));
		return NULL;
	}
	if (!rdmx_recv(c, &m, 10000)) {
		printf("server got: %.*s\n", (int)m.len, (const char *)m.data);
		rdmx_msg_release(c, &m);
	}
	if (!rdmx_msg_alloc(c, 64, &m, 1000)) {
		m.len = (size_t)snprintf(m.data, m.cap, "hello back over %s", rdmx_conn_protocol(c));
		rdmx_send(c, &m);
		rdmx_flush(c, 1000);
	}
	rdmx_recv(c, &m, 10000); /* returns when the client leaves */
	rdmx_conn_close(c);
	return NULL;
}

static int client(rdmx_ctx *ctx, const char *addr, const struct rdmx_conn_opts *o)
{
	struct rdmx_msg m;
	rdmx_conn *c;
	int rc = rdmx_dial(ctx, addr, rdmx_listener_port(lis), o, &c);

	if (rc) {
		fprintf(stderr, "dial: %s (%s)\n", rdmx_strerror(rc), rdmx_last_error());
		return rc;
	}
	rc = rdmx_msg_alloc(c, 64, &m, 1000);
	if (!rc) {
		m.len = (size_t)snprintf(m.data, m.cap, "hello from the client");
		rc = rdmx_send(c, &m);
	}
	if (!rc)
		rc = rdmx_recv(c, &m, 10000);
	if (!rc) {
		printf("client got: %.*s\n", (int)m.len, (const char *)m.data);
		rdmx_msg_release(c, &m);
	} else {
		fprintf(stderr, "client: %s (%s)\n", rdmx_strerror(rc), rdmx_conn_error(c));
	}
	rdmx_conn_close(c);
	return rc;
}

int main(int argc, char **argv)
{
	struct rdmx_conn_opts o;
	char addr[64];
	rdmx_ctx *ctx;
	pthread_t t;
	int rc;

	rdmx_conn_opts_init(&o);
	if (argc > 2)
		o.protocol = argv[2];
	rc = argc > 1 ? (snprintf(addr, sizeof(addr), "%s", argv[1]), 0)
		      : rdmx_pick_address(NULL, -1, addr, sizeof(addr));
	if (!rc)
		rc = rdmx_ctx_create(&ctx, NULL);
	if (!rc && (rc = rdmx_listen(ctx, addr, 0, &o, &lis)))
		rdmx_ctx_destroy(ctx);
	if (rc) {
		fprintf(stderr, "hello: %s (%s)\n", rdmx_strerror(rc), rdmx_last_error());
		return 1;
	}
	pthread_create(&t, NULL, server, NULL);
	rc = client(ctx, addr, &o);
	pthread_join(t, NULL);
	rdmx_listener_destroy(lis);
	rdmx_ctx_destroy(ctx);
	return rc ? 1 : 0;
}
