/* SPDX-License-Identifier: MIT */
/*
 * rdmx KV client (include/rdmx/kv.h; wire formats in kv_rdma.h): put, cas
 * and del by RPC; get by RPC or by one-sided RDMA READ of the table.
 *
 * GET by READ: hash the key as the server does (the layout names the
 * hash, its seed and the sizes, checked against this build's), READ the
 * home entry into a private registered buffer and let
 * rdmx__kv_entry_check() judge that copy (even version, checksum, the key
 * byte for byte). Another key's entry: READ the next slot, at most the
 * layout's probe length. An out-of-line value: a second READ of the slab
 * bytes, checked against the verified entry's value checksum. A torn copy
 * (a PUT in progress, or a slab chunk reused since) starts the lookup
 * again, at most RDMX__KV_RETRIES times; then the get method answers.
 * Retries and fallbacks are counted.
 *
 * A lost server (a call or a READ that fails on its connection, or times
 * out) closes both connections and forgets the layout and the regions;
 * that call returns the error naming the server, and the next call dials
 * again (as memcached clients do: libmemcached and pymemcache reconnect on
 * the next command). A restarted server has new regions, rkeys and maybe
 * sizes: they are learned again, so a READ never uses the old ones.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/errors.h"
#include "core/wire.h"
#include "kv/kv_door.h"
#include "kv/kv_internal.h"
#include "kv/kv_opts.h"
#include "kv/kv_rdma.h"

struct rdmx_kv_client {
	rdmx_ctx *ctx;
	struct rdmx_kv_client_opts o;
	char *addr;                   /* the server, for redials and messages */
	uint16_t port;
	rdmx_rpc_client *rpc;         /* NULL: lost, the next call dials */
	uint8_t *req, *resp;          /* RPC buffers: KV_REQ_MAX, get's max_resp */
	/* The read side (NULL in RDMX_KV_GET_RPC mode). */
	rdmx_conn *rconn;
	rdmx_region *table, *slab;
	struct rdmx__kv_layout l;
	uint64_t probe;
	uint8_t *ebuf, *vbuf;         /* rdmx_alloc: an entry, a value */
	size_t vcap;
	rdmx_mr *emr, *vmr;
	size_t eoff, voff;
	struct rdmx_kv_client_stats st;
	struct rdmx__err err;
};

static int cfail(struct rdmx_kv_client *c, int rc, const char *what)
{
	char why[RDMX__ERRMSG_LEN];

	return rdmx__failo(&c->err, rc, "kv client: %s: %s", what,
			   rdmx__kv_last(why, sizeof(why)));
}

static void conn_close(struct rdmx_kv_client *c);

/*
 * The server is lost (@rc from @what, @why): both connections closed, the
 * next call dials again. The error names the server.
 */
static int lost(struct rdmx_kv_client *c, int rc, const char *what, const char *why)
{
	if (rc == -EAGAIN)
		rc = -ETIMEDOUT; /* never "read again" to a caller's retry loop */
	rdmx__failo(&c->err, rc, "kv client: server %s:%u: %s: %s (the next call "
		    "connects again)", c->addr, c->port, what, why);
	conn_close(c);
	return rc;
}

/* ------------------------------------------------------------- RPC */

/* One call of @m with the header @r, @key and @val; the response in c->resp. */
static int call(struct rdmx_kv_client *c, uint16_t m, const struct kv_req *r,
		const void *key, const void *val, size_t *rlen)
{
	size_t n = KV_REQ_HDR + r->klen + (size_t)r->vlen;
	int status = 0, rc;

	rdmx__kv_req_put(c->req, r);
	memcpy(c->req + KV_REQ_HDR, key, r->klen);
	if (r->vlen)
		memcpy(c->req + KV_REQ_HDR + r->klen, val, r->vlen);
	rc = rdmx_rpc_call(c->rpc, m, c->req, n, c->resp,
			   KV_GET_HDR + RDMX_KV_RPC_VALUE_MAX, rlen, &status,
			   c->o.timeout_ms);
	if (rc == -EMSGSIZE)
		return rdmx__failo(&c->err, rc, "kv client: call %s: %s",
				   rdmx__kv_contract[m - 1].name,
				   rdmx_rpc_client_error(c->rpc));
	if (rc)
		return lost(c, rc, rdmx__kv_contract[m - 1].name,
			    rdmx_rpc_client_error(c->rpc));
	return status;
}

static int key_ok(struct rdmx_kv_client *c, size_t klen)
{
	if (!klen || klen > RDMX_KV_KEY_MAX)
		return rdmx__failo(&c->err, -EINVAL, "kv client: a key of %zu bytes "
				   "(1..%d)", klen, RDMX_KV_KEY_MAX);
	return 0;
}

/* The value of a get response (@n bytes in c->resp, read once) out. */
static int get_out(struct rdmx_kv_client *c, size_t n, void *buf, size_t cap,
		   size_t *len, uint32_t *flags, uint64_t *cas)
{
	uint32_t vlen;

	if (n < KV_GET_HDR)
		return rdmx__failo(&c->err, -EPROTO, "kv client: get response of %zu bytes", n);
	vlen = rdmx__get_u32(c->resp + 4);
	if (vlen != n - KV_GET_HDR)
		return rdmx__failo(&c->err, -EPROTO, "kv client: get response says %u "
				   "value bytes in %zu", vlen, n);
	if (len)
		*len = vlen;
	if (flags)
		*flags = rdmx__get_u32(c->resp);
	if (cas)
		*cas = rdmx__get_u64(c->resp + 8);
	if (vlen > cap)
		return -EMSGSIZE;
	if (vlen) /* buf may be NULL with cap 0 */
		memcpy(buf, c->resp + KV_GET_HDR, vlen);
	return 0;
}

static int get_rpc(struct rdmx_kv_client *c, const void *key, size_t klen,
		   void *buf, size_t cap, size_t *len, uint32_t *flags, uint64_t *cas)
{
	struct kv_req r = { .klen = (uint16_t)klen };
	size_t n = 0;
	int rc = call(c, KV_M_GET, &r, key, NULL, &n);

	c->st.gets_rpc++;
	return rc ? rc : get_out(c, n, buf, cap, len, flags, cas);
}

/* ------------------------------------------------------------ READ */

/* READ @len bytes at @roff of @reg into @mr at @off and wait (bounded). */
static int read_wait(struct rdmx_kv_client *c, const rdmx_region *reg, size_t roff,
		     rdmx_mr *mr, size_t off, size_t len)
{
	rdmx_token tok;
	int rc = rdmx_read(c->rconn, reg, roff, mr, off, len, &tok);

	c->st.reads++;
	if (!rc)
		rc = rdmx_wait(c->rconn, tok, c->o.timeout_ms);
	if (rc) {
		char what[64];

		snprintf(what, sizeof(what), "READ of %zu bytes of its %s", len,
			 reg == c->table ? "table" : "slab");
		return lost(c, rc, what, rdmx_conn_error(c->rconn));
	}
	return 0;
}

static int vbuf_room(struct rdmx_kv_client *c, size_t n)
{
	if (c->vbuf && n <= c->vcap)
		return 0;
	rdmx_free(c->ctx, c->vbuf);
	c->vcap = n < 4096 ? 4096 : n;
	c->vbuf = rdmx_alloc(c->ctx, c->vcap);
	if (!c->vbuf)
		return cfail(c, -ENOMEM, "value buffer");
	return rdmx_alloc_mr(c->ctx, c->vbuf, &c->vmr, &c->voff);
}

/* The value of the verified entry @h (copy in c->ebuf) into c->vbuf: 0 or -EAGAIN. */
static int read_value(struct rdmx_kv_client *c, const struct rdmx__kv_ehdr *h)
{
	int rc = vbuf_room(c, h->value_len);

	if (rc)
		return rc;
	if (h->ool_off == RDMX__KV_INLINE) {
		memcpy(c->vbuf, c->ebuf + RDMX__KV_EHDR + RDMX__KV_KEY_SLOT, h->value_len);
		return 0;
	}
	if (h->value_len) {
		rc = read_wait(c, c->slab, h->ool_off, c->vmr, c->voff, h->value_len);
		if (rc)
			return rc;
	}
	return rdmx__kv_ool_check(&c->l, h, c->vbuf) ? 0 : -EAGAIN;
}

/*
 * One lookup by READs: 0 hit (header in @h, value in c->vbuf), -EMSGSIZE a
 * hit whose value is longer than @cap (header in @h, the value not read:
 * its length is the server's word, up to 4 GiB, and a value buffer of
 * that size would be allocated and registered for nothing), -ENOENT,
 * -EAGAIN torn, or the error.
 */
static int lookup_once(struct rdmx_kv_client *c, const void *key, size_t klen,
		       uint64_t now, size_t cap, struct rdmx__kv_ehdr *h)
{
	uint64_t b = rdmx__kv_bucket(&c->l, key, klen);

	for (uint64_t i = 0; i < c->probe; i++) {
		uint64_t off = rdmx__kv_slot_offset(&c->l, (b + i) % c->l.buckets);
		int rc = read_wait(c, c->table, off, c->emr, c->eoff, c->l.entry_size);

		if (rc)
			return rc;
		switch (rdmx__kv_entry_check(&c->l, c->ebuf, key, klen, now, h)) {
		case RDMX__KV_V_TORN:
			return -EAGAIN;
		case RDMX__KV_V_OTHER:
			continue;
		case RDMX__KV_V_HIT:
			return h->value_len > cap ? -EMSGSIZE : read_value(c, h);
		case RDMX__KV_V_EMPTY:
		case RDMX__KV_V_EXPIRED:
			return -ENOENT;
		}
	}
	return -ENOENT;
}

static int get_read(struct rdmx_kv_client *c, const void *key, size_t klen,
		    void *buf, size_t cap, size_t *len, uint32_t *flags, uint64_t *cas)
{
	uint64_t now_s = (uint64_t)(rdmx__wall_ns() / 1000000000); /* the store's clock */
	struct rdmx__kv_ehdr h;
	int rc = -EAGAIN;

	for (int i = 0; i < RDMX__KV_RETRIES && rc == -EAGAIN; i++) {
		rc = lookup_once(c, key, klen, now_s, cap, &h);
		if (rc == -EAGAIN)
			c->st.retries++;
	}
	if (rc == -EAGAIN) {
		c->st.fallbacks++;
		return get_rpc(c, key, klen, buf, cap, len, flags, cas);
	}
	c->st.gets_read++;
	if (rc && rc != -EMSGSIZE)
		return rc;
	if (len)
		*len = h.value_len;
	if (flags)
		*flags = h.flags;
	if (cas)
		*cas = h.cas;
	if (h.value_len > cap)
		return -EMSGSIZE;
	if (h.value_len) /* buf may be NULL with cap 0 */
		memcpy(buf, c->vbuf, h.value_len);
	return 0;
}

/* ------------------------------------------------------- connect */

/* The layout (a response of @n bytes in c->resp) checked into c->l. */
static int layout_check(struct rdmx_kv_client *c, size_t n, struct kv_layout_wire *w)
{
	uint8_t b[KV_LAYOUT_LEN];

	if (n != KV_LAYOUT_LEN)
		return rdmx__failo(&c->err, -EPROTO, "kv client: layout of %zu bytes, "
				   "this client reads %u", n, KV_LAYOUT_LEN);
	memcpy(b, c->resp, sizeof(b));
	rdmx__kv_layout_get(b, w);
	if (w->version != KV_LAYOUT_VERSION || w->len != KV_LAYOUT_LEN ||
	    w->format != RDMX__KV_FORMAT || w->hash_id != RDMX__KV_HASH_MIX64)
		return rdmx__failo(&c->err, -EPROTO, "kv client: layout version %u "
				   "(entry format %u, hash %u); this client reads %u (%u, %u)",
				   w->version, w->format, w->hash_id, KV_LAYOUT_VERSION,
				   RDMX__KV_FORMAT, RDMX__KV_HASH_MIX64);
	if (!rdmx__kv_layout_sizes_ok(w->buckets, w->entry_size, w->inline_max,
				      w->table_len) ||
	    !w->probe_max || w->probe_max > 4096)
		return rdmx__failo(&c->err, -EPROTO, "kv client: layout sizes do not "
				   "add up (%llu buckets of %u bytes, table %llu bytes)",
				   (unsigned long long)w->buckets, w->entry_size,
				   (unsigned long long)w->table_len);
	c->l = (struct rdmx__kv_layout){ .seed = w->seed, .buckets = w->buckets,
					 .entry_size = w->entry_size,
					 .inline_max = w->inline_max,
					 .slab_size = w->slab_size };
	c->probe = w->probe_max < w->buckets ? w->probe_max : w->buckets;
	return 0;
}

/* The grant on the read connection: the two regions, their sizes checked. */
static int grant_take(struct rdmx_kv_client *c, const struct kv_layout_wire *w)
{
	uint8_t b[KV_GRANT_LEN];
	struct rdmx_msg m;
	int rc = rdmx_recv(c->rconn, &m, c->o.timeout_ms);

	if (rc)
		return cfail(c, rc, "waiting for the read door's grant");
	rc = m.len == KV_GRANT_LEN ? 0 : -EPROTO;
	if (!rc)
		memcpy(b, m.data, sizeof(b));
	rdmx_msg_release(c->rconn, &m);
	if (!rc && rdmx__get_u32(b) != KV_GRANT_MAGIC)
		rc = -EPROTO;
	if (!rc)
		rc = rdmx_region_import(c->rconn, b + 8, RDMX_REGION_DESC_LEN, &c->table);
	if (!rc)
		rc = rdmx_region_import(c->rconn, b + 8 + RDMX_REGION_DESC_LEN,
					RDMX_REGION_DESC_LEN, &c->slab);
	if (!rc && (rdmx_region_len(c->table) < w->table_len ||
		    rdmx_region_len(c->slab) < w->slab_size))
		rc = rdmx__fail(-EPROTO, "regions shorter than the layout");
	return rc ? cfail(c, rc, "the read door's grant") : 0;
}

/* Check the table's own header (one READ) against the layout. */
static int header_check(struct rdmx_kv_client *c)
{
	struct rdmx__kv_layout l;
	int rc = read_wait(c, c->table, 0, c->emr, c->eoff, sizeof(struct rdmx__kv_header));

	if (rc)
		return rc;
	if (rdmx__kv_layout_from(c->ebuf, sizeof(struct rdmx__kv_header), &l) ||
	    l.seed != c->l.seed || l.buckets != c->l.buckets ||
	    l.entry_size != c->l.entry_size || l.slab_size != c->l.slab_size)
		return rdmx__failo(&c->err, -EPROTO, "kv client: the table's header "
				   "does not match the layout");
	return 0;
}

static int read_open(struct rdmx_kv_client *c, const char *addr)
{
	struct kv_layout_wire w;
	struct rdmx_conn_opts co;
	struct kv_req r = { 0 };
	size_t n = 0;
	int rc = call(c, KV_M_LAYOUT, &r, "", NULL, &n);

	if (rc)
		return rc;
	rc = layout_check(c, n, &w);
	if (rc)
		return rc;
	c->ebuf = rdmx_alloc(c->ctx, c->l.entry_size);
	if (!c->ebuf)
		return cfail(c, -ENOMEM, "entry buffer");
	rc = rdmx_alloc_mr(c->ctx, c->ebuf, &c->emr, &c->eoff);
	rdmx_conn_opts_init(&co);
	co.connect_timeout_ms = c->o.timeout_ms;
	co.max_msg_size = 4096;
	co.send_depth = co.recv_depth = 4;
	if (!rc)
		rc = rdmx_dial(c->ctx, addr, w.read_port, &co, &c->rconn);
	if (rc)
		return cfail(c, rc, "dialing the read door");
	rc = grant_take(c, &w);
	return rc ? rc : header_check(c);
}

/* Forget a read side half made (the RPC client stays). */
static void read_drop(struct rdmx_kv_client *c)
{
	rdmx_region_free(c->slab);
	rdmx_region_free(c->table);
	c->slab = c->table = NULL;
	if (c->rconn)
		rdmx_conn_close(c->rconn);
	c->rconn = NULL;
	rdmx_free(c->ctx, c->ebuf);
	c->ebuf = NULL;
	c->emr = NULL;
}

/* The read side; in auto mode a read door that refuses the dial (full:
 * its caps) leaves the client on GETs by RPC, not unconnected. */
static int read_side(struct rdmx_kv_client *c)
{
	int rc = read_open(c, c->addr);

	if (rc != -ECONNREFUSED || c->o.get_mode != RDMX_KV_GET_AUTO)
		return rc;
	read_drop(c);
	return 0;
}

/* Dial the server: the RPC client, then (modes other than RPC) the read side. */
static int conn_open(struct rdmx_kv_client *c)
{
	struct rdmx_rpc_opts ro;
	int rc;

	rdmx_rpc_opts_init(&ro);
	ro.transport = c->o.transport ? c->o.transport : ro.transport;
	ro.protocol = c->o.protocol ? c->o.protocol : ro.protocol;
	ro.timeout_ms = c->o.timeout_ms;
	ro.window = 1;
	rc = rdmx_rpc_client_create(c->ctx, c->addr, c->port, rdmx__kv_contract,
				    KV_NMETHODS, &ro, &c->rpc);
	if (rc)
		return cfail(c, rc, c->addr);
	return c->o.get_mode != RDMX_KV_GET_RPC ? read_side(c) : 0;
}

/* Close both connections and forget what they gave (layout, regions). */
static void conn_close(struct rdmx_kv_client *c)
{
	read_drop(c);
	rdmx_rpc_client_destroy(c->rpc);
	c->rpc = NULL;
}

/* A lost client connects again before its next call. */
static int ready(struct rdmx_kv_client *c)
{
	char why[RDMX__ERRMSG_LEN];
	int rc;

	if (c->rpc)
		return 0;
	rc = conn_open(c);
	if (!rc) {
		c->st.reconnects++;
		return 0;
	}
	snprintf(why, sizeof(why), "%s", c->err.msg);
	conn_close(c);
	return rdmx__failo(&c->err, rc, "kv client: server %s:%u: connecting again: %s",
			   c->addr, c->port, why);
}

int rdmx_kv_client_create(rdmx_ctx *ctx, const char *addr, uint16_t port,
			  const struct rdmx_kv_client_opts *opts,
			  rdmx_kv_client **out)
{
	struct rdmx_kv_client *c;
	char why[RDMX__ERRMSG_LEN];
	int rc;

	if (!ctx || !addr || !out)
		return rdmx__fail(-EINVAL, "rdmx_kv_client_create: %s is NULL",
				  !ctx ? "ctx" : !addr ? "addr" : "out");
	c = calloc(1, sizeof(*c));
	if (!c)
		return rdmx__fail(-ENOMEM, "kv client: no memory");
	c->ctx = ctx;
	rc = rdmx__kv_client_opts_load(opts, &c->o);
	if (rc) {
		free(c);
		return rc;
	}
	c->port = port;
	c->addr = strdup(addr);
	c->req = malloc(KV_REQ_MAX);
	c->resp = malloc(KV_GET_HDR + RDMX_KV_RPC_VALUE_MAX);
	rc = c->req && c->resp && c->addr ? 0 : cfail(c, -ENOMEM, "buffers");
	if (!rc)
		rc = conn_open(c);
	if (rc)
		goto destroy_client;
	*out = c;
	return 0;
destroy_client:
	snprintf(why, sizeof(why), "%s", c->err.msg);
	rdmx_kv_client_destroy(c);
	return rdmx__fail(rc, "%s", why); /* destroying may have recorded others */
}

void rdmx_kv_client_destroy(rdmx_kv_client *c)
{
	if (!c)
		return;
	conn_close(c);
	rdmx_free(c->ctx, c->vbuf);
	free(c->resp);
	free(c->req);
	free(c->addr);
	free(c);
}

const char *rdmx_kv_client_error(const rdmx_kv_client *c)
{
	return c ? c->err.msg : "no client";
}

int rdmx_kv_client_stats(const rdmx_kv_client *c, struct rdmx_kv_client_stats *st)
{
	if (!c || !st)
		return rdmx__fail(-EINVAL, "rdmx_kv_client_stats: %s is NULL",
				  !c ? "client" : "stats");
	*st = c->st;
	return 0;
}

/*
 * The arguments every op takes: @c and @key, and a buffer @p (@what) of
 * @n bytes that may be NULL only when @n is 0. 0 or -EINVAL naming it.
 */
static int args_ok(const char *op, struct rdmx_kv_client *c, const void *key,
		   const void *p, size_t n, const char *what)
{
	const char *null = !c ? "client" : !key ? "key" : !p && n ? what : NULL;

	if (!null)
		return 0;
	if (c)
		return rdmx__failo(&c->err, -EINVAL, "kv client: %s: %s is NULL", op, null);
	return rdmx__fail(-EINVAL, "kv client: %s: %s is NULL", op, null);
}

/* ------------------------------------------------------------ ops */

int rdmx_kv_get(rdmx_kv_client *c, const void *key, size_t klen, void *buf,
		size_t cap, size_t *len, uint32_t *flags, uint64_t *cas)
{
	int rc = args_ok("get", c, key, buf, cap, "buf");

	if (!rc)
		rc = key_ok(c, klen);
	if (!rc)
		rc = ready(c);
	if (rc)
		return rc;
	if (c->rconn)
		return get_read(c, key, klen, buf, cap, len, flags, cas);
	return get_rpc(c, key, klen, buf, cap, len, flags, cas);
}

static int put(struct rdmx_kv_client *c, const struct kv_req *r, const void *key,
	       const void *val, uint64_t *cas)
{
	size_t n = 0;
	int rc = key_ok(c, r->klen);

	if (!rc && r->vlen > RDMX_KV_RPC_VALUE_MAX)
		rc = rdmx__failo(&c->err, -E2BIG, "kv client: a value of %u bytes, "
				 "a put carries %d at most", r->vlen, RDMX_KV_RPC_VALUE_MAX);
	if (!rc)
		rc = ready(c);
	if (!rc)
		rc = call(c, KV_M_PUT, r, key, val, &n);
	if (!rc && cas)
		*cas = n == 8 ? rdmx__get_u64(c->resp) : 0;
	return rc;
}

int rdmx_kv_put(rdmx_kv_client *c, const void *key, size_t klen, const void *val,
		size_t vlen, uint32_t flags, enum rdmx_kv_put_mode mode, uint64_t *cas)
{
	return rdmx_kv_put_exp(c, key, klen, val, vlen, flags, mode, 0, cas);
}

int rdmx_kv_put_exp(rdmx_kv_client *c, const void *key, size_t klen, const void *val,
		    size_t vlen, uint32_t flags, enum rdmx_kv_put_mode mode,
		    int32_t exptime, uint64_t *cas)
{
	struct kv_req r = { .mode = (uint8_t)mode, .klen = (uint16_t)klen,
			    .flags = flags, .vlen = (uint32_t)vlen, .exptime = exptime };
	int rc = args_ok("put", c, key, val, vlen, "val");

	if (rc)
		return rc;
	if ((unsigned)mode > RDMX_KV_REPLACE || vlen > UINT32_MAX || klen > UINT16_MAX)
		return rdmx__failo(&c->err, -EINVAL, "kv client: put mode %d or sizes "
				   "out of range", (int)mode);
	return put(c, &r, key, val, cas);
}

int rdmx_kv_cas(rdmx_kv_client *c, const void *key, size_t klen, const void *val,
		size_t vlen, uint32_t flags, uint64_t cas, uint64_t *new_cas)
{
	struct kv_req r = { .mode = KV_MODE_CAS, .klen = (uint16_t)klen,
			    .flags = flags, .vlen = (uint32_t)vlen, .cas = cas };
	int rc = args_ok("cas", c, key, val, vlen, "val");

	if (rc)
		return rc;
	if (vlen > UINT32_MAX || klen > UINT16_MAX)
		return rdmx__failo(&c->err, -EINVAL, "kv client: sizes out of range");
	return put(c, &r, key, val, new_cas);
}

int rdmx_kv_del(rdmx_kv_client *c, const void *key, size_t klen)
{
	struct kv_req r = { .klen = (uint16_t)klen };
	size_t n = 0;
	int rc = args_ok("del", c, key, NULL, 0, NULL);

	if (!rc)
		rc = key_ok(c, klen);
	if (!rc)
		rc = ready(c);
	return rc ? rc : call(c, KV_M_DEL, &r, key, NULL, &n);
}
