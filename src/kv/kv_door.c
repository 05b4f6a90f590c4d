/* SPDX-License-Identifier: MIT */
/*
 * rdmx KV's RDMA door (wire formats in kv_rdma.h): an rdmx RPC server
 * with the KV methods on the store the memcached front door uses, and the
 * read door, an rdmx listener that grants each client the table and slab
 * regions (registered here, remote read only) for its GETs by READ.
 *
 * Threads: rdmx_kv_server_run() starts two (the RPC loop, whose one
 * worker runs the handlers, and the read door's loop) and joins them
 * after a stop. The store takes its writer lock for every change, so the
 * front door and the handlers share it safely; the get handler's reader
 * is used by the one worker only.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/admit.h"
#include "core/clock.h"
#include "core/errors.h"
#include "core/wire.h"
#include "kv/kv_door.h"
#include "kv/kv_internal.h"
#include "kv/kv_rdma.h"
#include "rpc/rpc_int.h"

#define CHECK_MS 100     /* the read door's look at its grants' RPC clients
			  * (each look is O(connections^2): a few a second),
			  * and the bound on noticing a stop */
#define HELLO_MS 5000    /* rdmx_kv_server_opts.hello_ms's default */

const struct rdmx_rpc_method rdmx__kv_contract[KV_NMETHODS] = {
	{ KV_M_GET, "kv.get", KV_REQ_HDR + RDMX_KV_KEY_MAX,
	  KV_GET_HDR + RDMX_KV_RPC_VALUE_MAX, RDMX_RPC_IDEMPOTENT },
	{ KV_M_PUT, "kv.put", KV_REQ_MAX, 8, 0 },
	{ KV_M_DEL, "kv.del", KV_REQ_HDR + RDMX_KV_KEY_MAX, 8, 0 },
	{ KV_M_LAYOUT, "kv.layout", KV_REQ_HDR, KV_LAYOUT_LEN, RDMX_RPC_IDEMPOTENT },
};

/* A read door connection: its grant is matched with an RPC client of its
 * host (conns_check). */
struct door_conn {
	rdmx_conn *c;
	char peer[64];
	int64_t alone_ms;              /* since when it has none (0: it has) */
};

struct rdmx__kv_door {
	struct rdmx__kv *kv;
	rdmx_ctx *ctx;
	rdmx_rpc_server *rpc;
	rdmx_listener *lis;
	rdmx_mr *table_mr, *slab_mr;
	struct rdmx__kv_reader reader; /* the get handler's */
	struct door_conn *conns;       /* read door connections */
	size_t n_conns, cap_conns;
	int hello_ms;                  /* a grant without an RPC client, at most */
	int64_t check_ms;              /* the read door's next look */
	pthread_t rpc_t, door_t;
	bool running;
	atomic_int stop;
	int rpc_rc;
};

const char *rdmx__kv_last(char *buf, size_t n)
{
	snprintf(buf, n, "%s", rdmx_last_error());
	return buf;
}

/* ------------------------------------------------------------ wire */

void rdmx__kv_req_put(uint8_t *b, const struct kv_req *r)
{
	memset(b, 0, KV_REQ_HDR);
	b[0] = r->mode;
	rdmx__put_u16(b + 2, r->klen);
	rdmx__put_u32(b + 4, r->flags);
	rdmx__put_u32(b + 8, r->vlen);
	rdmx__put_u32(b + 12, (uint32_t)r->exptime);
	rdmx__put_u64(b + 16, r->cas);
}

int rdmx__kv_req_get(const uint8_t *in, size_t n, struct kv_req *r)
{
	uint8_t b[KV_REQ_HDR];

	if (n < KV_REQ_HDR)
		return -EPROTO;
	memcpy(b, in, sizeof(b)); /* peer-written: read once */
	*r = (struct kv_req){ .mode = b[0], .klen = rdmx__get_u16(b + 2),
			      .flags = rdmx__get_u32(b + 4),
			      .vlen = rdmx__get_u32(b + 8),
			      .exptime = (int32_t)rdmx__get_u32(b + 12),
			      .cas = rdmx__get_u64(b + 16) };
	if (b[1] || !r->klen || r->klen > RDMX_KV_KEY_MAX ||
	    r->vlen > RDMX_KV_RPC_VALUE_MAX || n != KV_REQ_HDR + r->klen + r->vlen)
		return -EPROTO;
	return 0;
}

void rdmx__kv_layout_put(uint8_t *b, const struct kv_layout_wire *l)
{
	memset(b, 0, KV_LAYOUT_LEN);
	rdmx__put_u32(b, l->version);
	rdmx__put_u32(b + 4, l->len);
	rdmx__put_u32(b + 8, l->format);
	rdmx__put_u32(b + 12, l->hash_id);
	rdmx__put_u64(b + 16, l->seed);
	rdmx__put_u64(b + 24, l->buckets);
	rdmx__put_u32(b + 32, l->entry_size);
	rdmx__put_u32(b + 36, l->inline_max);
	rdmx__put_u64(b + 40, l->slab_size);
	rdmx__put_u64(b + 48, l->table_len);
	rdmx__put_u32(b + 56, l->probe_max);
	rdmx__put_u16(b + 60, l->read_port);
}

void rdmx__kv_layout_get(const uint8_t *b, struct kv_layout_wire *l)
{
	*l = (struct kv_layout_wire){
		.version = rdmx__get_u32(b), .len = rdmx__get_u32(b + 4),
		.format = rdmx__get_u32(b + 8), .hash_id = rdmx__get_u32(b + 12),
		.seed = rdmx__get_u64(b + 16), .buckets = rdmx__get_u64(b + 24),
		.entry_size = rdmx__get_u32(b + 32), .inline_max = rdmx__get_u32(b + 36),
		.slab_size = rdmx__get_u64(b + 40), .table_len = rdmx__get_u64(b + 48),
		.probe_max = rdmx__get_u32(b + 56), .read_port = rdmx__get_u16(b + 60),
	};
}

/* -------------------------------------------------------- handlers */

/* The request's header and a private copy of key and value (@buf, KV_REQ_MAX). */
static int req_load(rdmx_rpc_req *req, struct kv_req *r, uint8_t *buf)
{
	size_t n;
	const uint8_t *in = rdmx_rpc_req_data(req, &n);
	int rc = rdmx__kv_req_get(in, n, r);

	if (!rc)
		memcpy(buf, in + KV_REQ_HDR, r->klen + (size_t)r->vlen);
	return rc;
}

static void on_get(rdmx_rpc_req *req, void *arg)
{
	struct rdmx__kv_door *d = arg;
	uint8_t key[KV_REQ_HDR + RDMX_KV_KEY_MAX], *out;
	struct kv_req r;
	size_t cap;
	int rc = req_load(req, &r, key);

	if (!rc && (r.vlen || r.exptime))
		rc = -EPROTO;
	if (!rc)
		rc = rdmx__kv_get(d->kv, &d->reader, key, r.klen);
	out = rdmx_rpc_req_resp(req, &cap);
	if (!rc && d->reader.hit.value_len > cap - KV_GET_HDR)
		rc = -EMSGSIZE;
	if (rc) {
		rdmx_rpc_respond(req, rc, 0);
		return;
	}
	rdmx__put_u32(out, d->reader.hit.flags);
	rdmx__put_u32(out + 4, d->reader.hit.value_len);
	rdmx__put_u64(out + 8, d->reader.hit.cas);
	memcpy(out + KV_GET_HDR, d->reader.value, d->reader.hit.value_len);
	rdmx_rpc_respond(req, 0, KV_GET_HDR + d->reader.hit.value_len);
}

static const enum rdmx__kv_mode put_modes[] = {
	[RDMX_KV_SET] = RDMX__KV_SET, [RDMX_KV_ADD] = RDMX__KV_ADD,
	[RDMX_KV_REPLACE] = RDMX__KV_REPLACE, [KV_MODE_CAS] = RDMX__KV_CAS,
};

static void on_put(rdmx_rpc_req *req, void *arg)
{
	struct rdmx__kv_door *d = arg;
	static _Thread_local uint8_t buf[KV_REQ_MAX];
	struct kv_req r;
	uint64_t cas = 0;
	size_t cap;
	int rc = req_load(req, &r, buf);

	if (!rc && r.mode > KV_MODE_CAS)
		rc = -EPROTO;
	if (!rc) {
		struct rdmx__kv_put p = { .mode = put_modes[r.mode], .key = buf,
					  .klen = r.klen, .value = buf + r.klen,
					  .vlen = r.vlen, .flags = r.flags, .cas = r.cas,
					  .expiry = rdmx__kv_expiry(d->kv, r.exptime) };

		rc = rdmx__kv_store(d->kv, &p, &cas);
	}
	rdmx__put_u64(rdmx_rpc_req_resp(req, &cap), cas);
	rdmx_rpc_respond(req, rc, rc ? 0 : 8);
}

static void on_del(rdmx_rpc_req *req, void *arg)
{
	struct rdmx__kv_door *d = arg;
	uint8_t key[KV_REQ_HDR + RDMX_KV_KEY_MAX];
	struct kv_req r;
	int rc = req_load(req, &r, key);

	if (!rc && (r.vlen || r.exptime))
		rc = -EPROTO;
	if (!rc)
		rc = rdmx__kv_delete(d->kv, key, r.klen);
	rdmx_rpc_respond(req, rc, 0);
}

static void on_layout(rdmx_rpc_req *req, void *arg)
{
	struct rdmx__kv_door *d = arg;
	const struct rdmx__kv_layout *l = rdmx__kv_layout(d->kv);
	size_t cap, table_len;
	struct kv_layout_wire w = {
		.version = KV_LAYOUT_VERSION, .len = KV_LAYOUT_LEN,
		.format = RDMX__KV_FORMAT, .hash_id = RDMX__KV_HASH_MIX64,
		.seed = l->seed, .buckets = l->buckets, .entry_size = l->entry_size,
		.inline_max = l->inline_max, .slab_size = l->slab_size,
		.probe_max = RDMX__KV_PROBE_MAX, .read_port = rdmx_listener_port(d->lis),
	};

	rdmx__kv_table(d->kv, &table_len);
	w.table_len = table_len;
	rdmx__kv_layout_put(rdmx_rpc_req_resp(req, &cap), &w);
	rdmx_rpc_respond(req, 0, KV_LAYOUT_LEN);
}

/* ------------------------------------------------------ read door */

/* Export the table and the slab on @c and send the grant. */
static int grant(struct rdmx__kv_door *d, rdmx_conn *c)
{
	size_t len = RDMX_REGION_DESC_LEN, len2 = RDMX_REGION_DESC_LEN;
	struct rdmx_msg m;
	uint8_t *b;
	int rc = rdmx_msg_alloc(c, KV_GRANT_LEN, &m, 0); /* new: its buffers free */

	if (rc)
		return rc;
	b = m.data;
	memset(b, 0, KV_GRANT_LEN);
	rdmx__put_u32(b, KV_GRANT_MAGIC);
	rc = rdmx_mr_export(c, d->table_mr, 0, rdmx_mr_len(d->table_mr),
			    RDMX_ACCESS_REMOTE_READ, b + 8, &len);
	if (!rc)
		rc = rdmx_mr_export(c, d->slab_mr, 0, rdmx_mr_len(d->slab_mr),
				    RDMX_ACCESS_REMOTE_READ, b + 8 + len, &len2);
	if (rc) {
		rdmx_msg_release(c, &m);
		return rc;
	}
	m.len = KV_GRANT_LEN;
	return rdmx_send(c, &m);
}

static void conn_forget(struct rdmx__kv_door *d, rdmx_conn *c)
{
	for (size_t i = 0; i < d->n_conns; i++)
		if (d->conns[i].c == c) {
			d->conns[i] = d->conns[--d->n_conns];
			break;
		}
	rdmx_conn_close(c);
}

static void conn_keep(struct rdmx__kv_door *d, rdmx_conn *c)
{
	struct door_conn *dc;

	if (d->n_conns == d->cap_conns) {
		size_t cap = d->cap_conns ? 2 * d->cap_conns : 16;
		struct door_conn *p = realloc(d->conns, cap * sizeof(*p));

		if (!p) {
			rdmx_conn_close(c);
			return;
		}
		d->conns = p;
		d->cap_conns = cap;
	}
	dc = &d->conns[d->n_conns++];
	*dc = (struct door_conn){ .c = c };
	if (rdmx_conn_peer_addr(c, dc->peer, sizeof(dc->peer)))
		dc->peer[0] = 0;
	if (grant(d, c)) /* the client sees its read connection go */
		conn_forget(d, c);
}

/* Read door connections before @i from @host. */
static unsigned door_before(const struct rdmx__kv_door *d, size_t i, const char *host)
{
	unsigned k = 0;

	for (size_t j = 0; j < i; j++)
		k += !strcmp(rdmx__conn_peer_host(d->conns[j].c), host);
	return k;
}

/*
 * A grant is for an RPC client: a read door connection of a host is
 * matched while that host has more RPC clients connected (whose contract
 * matched) than read door connections before it. One that stays
 * unmatched for hello_ms (the client's RPC connection went, or never
 * came) is closed: it would hold the door's memory and a connection slot
 * with nothing to answer for it.
 */
static void conns_check(struct rdmx__kv_door *d)
{
	int64_t now = rdmx__now_ms();

	if (now < d->check_ms)
		return;
	d->check_ms = now + CHECK_MS;
	for (size_t i = 0; i < d->n_conns; i++) {
		struct door_conn *dc = &d->conns[i];
		const char *host = rdmx__conn_peer_host(dc->c);

		if (rdmx__rpc_server_clients_from(d->rpc, host) > door_before(d, i, host)) {
			dc->alone_ms = 0;
		} else if (!dc->alone_ms) {
			dc->alone_ms = now;
		} else if (now - dc->alone_ms >= d->hello_ms) {
			rdmx__fail(-ETIMEDOUT, "kv: read door connection %s held a grant with "
				   "no RPC client of its host for %d ms: closed",
				   dc->peer[0] ? dc->peer : "(peer unknown)", d->hello_ms);
			conn_forget(d, dc->c);
			i--; /* the last one took its place */
		}
	}
}

static void *door_main(void *arg)
{
	struct rdmx__kv_door *d = arg;
	struct rdmx_event ev;

	while (!atomic_load(&d->stop)) {
		int rc = rdmx_listener_next(d->lis, &ev, CHECK_MS);

		conns_check(d);
		if (rc == -ESHUTDOWN)
			break;
		if (rc)
			continue;
		if (ev.type == RDMX_EVENT_CONN)
			conn_keep(d, ev.conn);
		else if (ev.type == RDMX_EVENT_MSG) /* clients send nothing here */
			rdmx_msg_release(ev.conn, &ev.msg);
		else if (ev.type == RDMX_EVENT_CLOSED)
			conn_forget(d, ev.conn);
	}
	return NULL;
}

static void *rpc_main(void *arg)
{
	struct rdmx__kv_door *d = arg;

	d->rpc_rc = rdmx_rpc_server_run(d->rpc);
	return NULL;
}

/* ------------------------------------------------------- lifetime */

static int regions_reg(struct rdmx__kv_door *d)
{
	size_t tlen, slen;
	uint8_t *table = (uint8_t *)rdmx__kv_table(d->kv, &tlen);
	uint8_t *slab = (uint8_t *)rdmx__kv_slab(d->kv, &slen);
	char why[RDMX__ERRMSG_LEN];
	int rc = rdmx_mr_reg(d->ctx, table, tlen, RDMX_ACCESS_REMOTE_READ, &d->table_mr);

	/* The slab is allocated 64 bytes longer: never an empty registration. */
	if (!rc)
		rc = rdmx_mr_reg(d->ctx, slab, slen + 64, RDMX_ACCESS_REMOTE_READ,
				 &d->slab_mr);
	return rc ? rdmx__fail(rc, "kv: cannot register the table (%zu bytes) and "
			       "slab (%zu bytes): %s", tlen, slen, rdmx__kv_last(why, sizeof(why))) : 0;
}

static int rpc_open(struct rdmx__kv_door *d, const struct rdmx_kv_server_opts *o)
{
	static const rdmx_rpc_handler fns[KV_NMETHODS] = { on_get, on_put, on_del,
							   on_layout };
	struct rdmx_rpc_opts ro;
	int rc;

	rdmx_rpc_opts_init(&ro);
	if (o->transport)
		ro.transport = o->transport;
	if (o->protocol)
		ro.protocol = o->protocol;
	/* Handlers run in rdmx_rpc_server_run's thread: the get handler's
	 * reader is one thread's, and a request is not handed to a worker
	 * (the hand-off was ~6 ms of a 7 ms GET by RPC under emulation). */
	ro.workers = 0;
	ro.hello_ms = d->hello_ms;
	rc = rdmx_rpc_server_create(d->ctx, o->rdma_addr, (uint16_t)o->rdma_port,
				    rdmx__kv_contract, KV_NMETHODS, &ro, &d->rpc);
	for (int i = 0; !rc && i < KV_NMETHODS; i++)
		rc = rdmx_rpc_server_handle(d->rpc, rdmx__kv_contract[i].id, fns[i], d);
	if (!rc && o->rpc_caps)
		rc = rdmx_rpc_server_set_listener_opts(d->rpc, o->rpc_caps);
	return rc;
}

/* The RDMA door of @kv as @o says (o->ctx set): registered, listening. */
int rdmx__kv_door_open(struct rdmx__kv *kv, const struct rdmx_kv_server_opts *o,
		       struct rdmx__kv_door **out)
{
	struct rdmx__kv_door *d = calloc(1, sizeof(*d));
	int rc;

	if (!d)
		return rdmx__fail(-ENOMEM, "kv: no memory for the RDMA door");
	d->kv = kv;
	d->ctx = o->ctx;
	d->hello_ms = o->hello_ms > 0 ? o->hello_ms : HELLO_MS;
	rc = rdmx__kv_reader_init(kv, &d->reader);
	if (!rc)
		rc = regions_reg(d);
	if (!rc)
		rc = rpc_open(d, o);
	if (!rc)
		rc = rdmx_listen(d->ctx, o->rdma_addr, 0, NULL, &d->lis);
	if (!rc && o->read_caps)
		rc = rdmx_listener_set_opts(d->lis, o->read_caps);
	if (rc)
		goto close_door;
	*out = d;
	return 0;
close_door:
	rdmx__kv_door_close(d);
	return rc;
}

int rdmx__kv_door_port(const struct rdmx__kv_door *d)
{
	return rdmx_rpc_server_port(d->rpc);
}

/* Start the door's two threads. */
int rdmx__kv_door_start(struct rdmx__kv_door *d)
{
	atomic_store(&d->stop, 0);
	if (pthread_create(&d->rpc_t, NULL, rpc_main, d))
		return rdmx__fail(-EAGAIN, "kv: cannot start the RPC thread");
	if (pthread_create(&d->door_t, NULL, door_main, d)) {
		rdmx_rpc_server_stop(d->rpc);
		pthread_join(d->rpc_t, NULL);
		return rdmx__fail(-EAGAIN, "kv: cannot start the read door thread");
	}
	d->running = true;
	return 0;
}

/* Stop and join the door's threads: the RPC loop's result. */
int rdmx__kv_door_stop(struct rdmx__kv_door *d)
{
	if (!d->running)
		return 0;
	atomic_store(&d->stop, 1);
	rdmx_rpc_server_stop(d->rpc);
	pthread_join(d->rpc_t, NULL);
	pthread_join(d->door_t, NULL);
	d->running = false;
	return d->rpc_rc;
}

void rdmx__kv_door_close(struct rdmx__kv_door *d)
{
	if (!d)
		return;
	rdmx__kv_door_stop(d);
	if (d->lis)
		rdmx_listener_destroy(d->lis);
	while (d->n_conns)
		conn_forget(d, d->conns[d->n_conns - 1].c);
	free(d->conns);
	if (d->rpc)
		rdmx_rpc_server_destroy(d->rpc);
	if (d->slab_mr)
		rdmx_mr_dereg(d->slab_mr);
	if (d->table_mr)
		rdmx_mr_dereg(d->table_mr);
	rdmx__kv_reader_fini(&d->reader);
	free(d);
}
