/* SPDX-License-Identifier: MIT */
/*
 * KV's RDMA door never waits on one client (issue 24 §2), on the fake
 * fabric: a raw RPC client that floods GETs and never takes a response
 * while a KV client keeps working (its ops bounded by a 2 s timeout, below
 * the server's 5 s; the slowest printed as a figure); read door
 * connections that hold a grant with no RPC client of their host are
 * closed after the door's hello_ms, those with one stay.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <rdmx/kv.h>
#include <rdmx/rpc.h>

#include "kv/kv_rdma.h"
#include "rpc_common.h" /* raw_frame; WAIT_MS */

#define OP_MS 2000     /* a benign op's bound: below the RPC server's 5 s */
#define HELLO_MS 100   /* the door's deadlines in these tests */

struct kvs {
	rdmx_ctx *ctx;
	rdmx_kv_server *s;
	pthread_t t;
	int rc;
};

static void *kvs_main(void *arg)
{
	struct kvs *v = arg;

	v->rc = rdmx_kv_server_run(v->s);
	return NULL;
}

static void kvs_start(struct kvs *v)
{
	struct rdmx_kv_server_opts o;
	struct rdmx_ctx_opts co;

	rdmx_kv_server_opts_init(&o);
	o.capacity = 64;
	o.memory = 1 << 20;
	o.inline_max = 64;
	o.memcached_port = -1;
	o.rdma_port = 0;
	o.hello_ms = HELLO_MS;
	memset(v, 0, sizeof(*v));
	rdmx_ctx_opts_init(&co);
	co.fabric = th_fabric();
	assert_int_equal(rdmx_ctx_create(&v->ctx, &co), 0);
	o.rdma_addr = th_addr();
	o.ctx = v->ctx;
	if (rdmx_kv_server_create(&o, &v->s))
		fprintf(stderr, "kv server: %s\n", rdmx_last_error());
	assert_non_null(v->s);
	assert_int_equal(pthread_create(&v->t, NULL, kvs_main, v), 0);
}

static void kvs_stop(struct kvs *v)
{
	rdmx_kv_server_stop(v->s);
	pthread_join(v->t, NULL);
	assert_int_equal(v->rc, 0);
	rdmx_kv_server_destroy(v->s);
	rdmx_ctx_destroy(v->ctx);
}

static uint16_t rpc_port(struct kvs *v)
{
	return (uint16_t)rdmx_kv_server_rdma_port(v->s);
}

/* ------------------------------------------------------- a stuck client */

/* A raw RPC connection to the door that said the KV contract's hello. */
static rdmx_conn *raw_client(struct kvs *v)
{
	unsigned char hello[RPC_HELLO_LEN];
	struct rdmx_conn_opts co;
	struct rpc_contract k;
	struct rdmx_msg m;
	rdmx_conn *raw;

	assert_int_equal(rdmx__rpc_contract_load(&k, rdmx__kv_contract, KV_NMETHODS), 0);
	rdmx_conn_opts_init(&co);
	co.max_msg_size = (uint32_t)rdmx__rpc_frame_max(&k);
	co.send_depth = co.recv_depth = 16;
	assert_int_equal(rdmx_dial(v->ctx, th_addr(), rpc_port(v), &co, &raw), 0);
	rdmx__rpc_hello_put(hello, &k);
	rdmx__rpc_contract_free(&k);
	assert_int_equal(raw_frame(raw, &(struct rpc_hdr){ .kind = RPC_HELLO,
					.len = RPC_HELLO_LEN }, hello), 0);
	assert_int_equal(rdmx_recv(raw, &m, WAIT_MS), 0); /* HELLO_OK */
	rdmx_msg_release(raw, &m);
	return raw;
}

/* GETs of key "k" (misses) on @raw until the server stops taking them. */
static void get_flood(rdmx_conn *raw)
{
	uint8_t req[KV_REQ_HDR + 1];

	rdmx__kv_req_put(req, &(struct kv_req){ .klen = 1 });
	req[KV_REQ_HDR] = 'k';
	for (uint64_t i = 0; i < 200; i++)
		if (raw_frame(raw, &(struct rpc_hdr){ .kind = RPC_REQ, .method = KV_M_GET,
				.len = sizeof(req), .call = (i + 1) << RPC_SLOT_BITS | (i % 64) },
				req))
			break;
}

static rdmx_kv_client *kv_dial(struct kvs *v, enum rdmx_kv_get_mode mode, int ms)
{
	struct rdmx_kv_client_opts o;
	rdmx_kv_client *c = NULL;
	int rc;

	rdmx_kv_client_opts_init(&o);
	o.get_mode = mode;
	o.timeout_ms = ms;
	rc = rdmx_kv_client_create(v->ctx, th_addr(), rpc_port(v), &o, &c);

	if (rc)
		fprintf(stderr, "kv dial: %s\n", rdmx_last_error());
	assert_int_equal(rc, 0);
	return c;
}

/* One PUT then GET by RPC of @i's value, checked: the slower's ms. */
static double put_get(rdmx_kv_client *c, int i)
{
	char key[16], val[32], out[32];
	size_t klen = (size_t)snprintf(key, sizeof(key), "key%d", i % 8), len = 0;
	size_t vlen = (size_t)snprintf(val, sizeof(val), "value %d", i);
	double t0 = th_now_ms(), t1;

	assert_int_equal(rdmx_kv_put(c, key, klen, val, vlen, 0, RDMX_KV_SET, NULL), 0);
	t1 = th_now_ms();
	assert_int_equal(rdmx_kv_get(c, key, klen, out, sizeof(out), &len, NULL, NULL), 0);
	assert_int_equal(len, vlen);
	assert_memory_equal(out, val, vlen);
	t0 = t1 - t0;
	t1 = th_now_ms() - t1;
	return t0 > t1 ? t0 : t1;
}

/* A client that takes no responses while a KV client works: the door's
 * handlers run in its RPC run thread, which must not wait on it. */
static void t_door_stuck_reader(void **state)
{
	rdmx_kv_client *c, *late;
	double slow = 0, dial_ms;
	rdmx_conn *raw;
	struct kvs v;

	(void)state;
	kvs_start(&v);
	c = kv_dial(&v, RDMX_KV_GET_RPC, OP_MS);
	raw = raw_client(&v);
	get_flood(raw);
	dial_ms = th_now_ms();
	late = kv_dial(&v, RDMX_KV_GET_AUTO, OP_MS);
	dial_ms = th_now_ms() - dial_ms;
	for (int i = 0; i < 40; i++) {
		double ms = put_get(i % 2 ? c : late, i);

		slow = ms > slow ? ms : slow;
	}
	printf("kv door: a client that takes no responses: a KV client's slowest of 80 ops "
	       "%.1f ms, a new dial %.1f ms (RPC server timeout 5000 ms)\n", slow, dial_ms);
	rdmx_conn_close(raw);
	rdmx_kv_client_destroy(late);
	rdmx_kv_client_destroy(c);
	kvs_stop(&v);
}

/* ------------------------------------------------------ read door grants */

/* The read door's port, from the layout method. */
static uint16_t read_port(rdmx_rpc_client *rc)
{
	uint8_t req[KV_REQ_HDR] = { 0 }, out[KV_LAYOUT_LEN];
	struct kv_layout_wire w;
	size_t len = 0;
	int status = 1;

	assert_int_equal(rdmx_rpc_call(rc, KV_M_LAYOUT, req, sizeof(req), out, sizeof(out),
				       &len, &status, WAIT_MS), 0);
	assert_int_equal(status, 0);
	assert_int_equal(len, KV_LAYOUT_LEN);
	rdmx__kv_layout_get(out, &w);
	return w.read_port;
}

/* A read door connection with its grant taken. */
static rdmx_conn *door_dial(struct kvs *v, uint16_t port)
{
	struct rdmx_conn_opts co;
	struct rdmx_msg m;
	rdmx_conn *c;

	rdmx_conn_opts_init(&co);
	co.max_msg_size = 4096;
	co.send_depth = co.recv_depth = 4;
	assert_int_equal(rdmx_dial(v->ctx, th_addr(), port, &co, &c), 0);
	assert_int_equal(rdmx_recv(c, &m, WAIT_MS), 0); /* the grant */
	rdmx_msg_release(c, &m);
	return c;
}

/* A grant is matched with an RPC client of its host: one beyond them is
 * closed after hello_ms, and the matched one once its RPC client goes. */
static void t_door_grant_alone(void **state)
{
	struct rdmx_rpc_opts ro;
	rdmx_rpc_client *rpc;
	rdmx_conn *a, *b;
	struct rdmx_msg m;
	uint16_t port;
	struct kvs v;

	(void)state;
	kvs_start(&v);
	rdmx_rpc_opts_init(&ro);
	ro.timeout_ms = WAIT_MS;
	assert_int_equal(rdmx_rpc_client_create(v.ctx, th_addr(), rpc_port(&v),
						rdmx__kv_contract, KV_NMETHODS, &ro, &rpc), 0);
	port = read_port(rpc);
	a = door_dial(&v, port);
	assert_int_equal(rdmx_recv(a, &m, 4 * HELLO_MS), -ETIMEDOUT); /* matched: kept */
	b = door_dial(&v, port);
	assert_int_equal(rdmx_recv(b, &m, WAIT_MS), -ECONNRESET);      /* one too many */
	assert_int_equal(rdmx_recv(a, &m, 2 * HELLO_MS), -ETIMEDOUT);
	rdmx_rpc_client_destroy(rpc);
	assert_int_equal(rdmx_recv(a, &m, WAIT_MS), -ECONNRESET);      /* its client went */
	printf("kv door: a read connection without an RPC client closed: %s\n",
	       rdmx_last_error());
	rdmx_conn_close(b);
	rdmx_conn_close(a);
	kvs_stop(&v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(t_door_stuck_reader),
		cmocka_unit_test(t_door_grant_alone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
