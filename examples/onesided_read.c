/* SPDX-License-Identifier: MIT */
/*
 * onesided_read: a server exports a table of records read-only; the
 * client fetches one record with an RDMA READ, without the server's CPU.
 * This is how a key-value store serves GETs: the server ships a region
 * descriptor once, then clients read what they need.
 *
 *   sandbox/run -- build/bin/example_onesided_read      # on rxe
 *   build/bin/example_onesided_read 127.0.0.1 fake      # in-process fake
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <rdmx/rdmx.h>

#define NREC 64
#define REC_LEN 64

static rdmx_listener *lis;
static rdmx_ctx *ctx;
static char table[NREC][REC_LEN];

/* Export the table and send its descriptor; wait until the client leaves. */
static void *server(void *arg)
{
	size_t dlen = RDMX_REGION_DESC_LEN;
	struct rdmx_msg m;
	rdmx_conn *c;
	rdmx_mr *mr = NULL;
	int rc = rdmx_accept(lis, 10000, &c);

	(void)arg;
	if (rc) {
		fprintf(stderr, "accept: %s (%s)\n", rdmx_strerror(rc), rdmx_listener_error(lis));
		return NULL;
	}
	for (int i = 0; i < NREC; i++)
		snprintf(table[i], REC_LEN, "record %d: the value of key %d", i, i);
	rc = rdmx_mr_reg(ctx, table, sizeof(table), RDMX_ACCESS_REMOTE_READ, &mr);
	if (!rc)
		rc = rdmx_msg_alloc(c, RDMX_REGION_DESC_LEN, &m, 1000);
	if (!rc && !(rc = rdmx_mr_export(c, mr, 0, sizeof(table),
					 RDMX_ACCESS_REMOTE_READ, m.data, &dlen))) {
		m.len = dlen;
		rc = rdmx_send(c, &m);
	}
	if (rc)
		fprintf(stderr, "server: %s (%s)\n", rdmx_strerror(rc), rdmx_conn_error(c));
	rdmx_recv(c, &m, 10000); /* returns when the client leaves */
	rdmx_conn_close(c);
	rdmx_mr_dereg(mr);
	return NULL;
}

/* READ record @key of the imported region into registered memory. */
static int get(rdmx_conn *c, rdmx_region *r, int key)
{
	char *buf = rdmx_alloc(ctx, REC_LEN);
	rdmx_token tok;
	rdmx_mr *mr;
	size_t off;
	int rc = buf ? rdmx_alloc_mr(ctx, buf, &mr, &off) : -ENOMEM;

	if (!rc)
		rc = rdmx_read(c, r, (size_t)key * REC_LEN, mr, off, REC_LEN, &tok);
	if (!rc)
		rc = rdmx_wait(c, tok, 10000);
	if (!rc)
		printf("client read: %.*s\n", REC_LEN, buf);
	rdmx_free(ctx, buf);
	return rc;
}

static int client(const char *addr, const struct rdmx_conn_opts *o)
{
	rdmx_region *r = NULL;
	struct rdmx_msg m;
	rdmx_conn *c;
	int rc = rdmx_dial(ctx, addr, rdmx_listener_port(lis), o, &c);

	if (rc) {
		fprintf(stderr, "dial: %s (%s)\n", rdmx_strerror(rc), rdmx_last_error());
		return rc;
	}
	rc = rdmx_recv(c, &m, 10000);
	if (!rc) {
		rc = rdmx_region_import(c, m.data, m.len, &r);
		rdmx_msg_release(c, &m);
	}
	if (!rc)
		rc = get(c, r, 42);
	if (rc)
		fprintf(stderr, "client: %s (%s)\n", rdmx_strerror(rc), rdmx_conn_error(c));
	rdmx_region_free(r);
	rdmx_conn_close(c);
	return rc;
}

int main(int argc, char **argv)
{
	struct rdmx_ctx_opts co = { .fabric = argc > 2 ? argv[2] : NULL };
	struct rdmx_conn_opts o;
	char addr[64];
	pthread_t t;
	int rc;

	rdmx_conn_opts_init(&o);
	rc = argc > 1 ? (snprintf(addr, sizeof(addr), "%s", argv[1]), 0)
		      : rdmx_pick_address(NULL, -1, addr, sizeof(addr));
	if (!rc)
		rc = rdmx_ctx_create(&ctx, &co);
	if (!rc && (rc = rdmx_listen(ctx, addr, 0, &o, &lis)))
		rdmx_ctx_destroy(ctx);
	if (rc) {
		fprintf(stderr, "onesided_read: %s (%s)\n", rdmx_strerror(rc), rdmx_last_error());
		return 1;
	}
	pthread_create(&t, NULL, server, NULL);
	rc = client(addr, &o);
	pthread_join(t, NULL);
	rdmx_listener_destroy(lis);
	rdmx_ctx_destroy(ctx);
	return rc ? 1 : 0;
}
