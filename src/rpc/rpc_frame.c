/* SPDX-License-Identifier: MIT */
/*
 * The RPC frame, in one place: the header (layout in rpc_int.h), the
 * hello and the table a rejection carries. Everything read from a frame
 * is peer-written: each field is read once into a local and checked
 * there, and only the local is used.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/wire.h"
#include "rpc/rpc_int.h"

void rdmx__rpc_hdr_put(void *buf, const struct rpc_hdr *h)
{
	unsigned char *p = buf;

	rdmx__put_u32(p, RPC_MAGIC);
	p[4] = h->kind;
	p[5] = 0;
	rdmx__put_u16(p + 6, h->method);
	rdmx__put_u32(p + 8, (uint32_t)h->status);
	rdmx__put_u32(p + 12, h->len);
	rdmx__put_u64(p + 16, h->call);
}

int rdmx__rpc_hdr_get(const void *buf, size_t n, struct rpc_hdr *h)
{
	unsigned char c[RPC_HDR];

	if (n < RPC_HDR)
		return rdmx__fail(-EPROTO, "rpc: a frame of %zu bytes, shorter than "
				  "its %u-byte header", n, RPC_HDR);
	memcpy(c, buf, RPC_HDR);
	if (rdmx__get_u32(c) != RPC_MAGIC || c[5] != 0)
		return rdmx__fail(-EPROTO, "rpc: not an rpc frame (magic 0x%08x)", rdmx__get_u32(c));
	*h = (struct rpc_hdr){ .kind = c[4], .method = rdmx__get_u16(c + 6),
		.status = (int32_t)rdmx__get_u32(c + 8), .len = rdmx__get_u32(c + 12), .call = rdmx__get_u64(c + 16) };
	if (h->kind < RPC_HELLO || h->kind > RPC_RESP)
		return rdmx__fail(-EPROTO, "rpc: unknown frame kind %u", h->kind);
	if (h->len != n - RPC_HDR)
		return rdmx__fail(-EPROTO, "rpc: frame says %u payload bytes, %zu came",
				  h->len, n - RPC_HDR);
	if (h->status > 0 || h->status < RPC_STATUS_MIN)
		return rdmx__fail(-EPROTO, "rpc: status %d is not 0 or -1..%d",
				  h->status, RPC_STATUS_MIN);
	return 0;
}

void rdmx__rpc_hello_put(void *buf, const struct rpc_contract *k)
{
	rdmx__put_u64(buf, k->hash);
	rdmx__put_u32((unsigned char *)buf + 8, (uint32_t)k->n);
}

int rdmx__rpc_hello_get(const void *buf, size_t n, uint64_t *hash, uint32_t *count)
{
	unsigned char c[RPC_HELLO_LEN];

	if (n != RPC_HELLO_LEN)
		return rdmx__fail(-EPROTO, "rpc: a hello of %zu bytes, want %u", n,
				  RPC_HELLO_LEN);
	memcpy(c, buf, sizeof(c));
	*hash = rdmx__get_u64(c);
	*count = rdmx__get_u32(c + 8);
	return 0;
}

static void entry_put(unsigned char *p, const struct rpc_method *m)
{
	memset(p, 0, RPC_TABLE_ENTRY);
	rdmx__put_u16(p, m->id);
	rdmx__put_u32(p + 4, m->max_req);
	rdmx__put_u32(p + 8, m->max_resp);
	rdmx__put_u32(p + 12, m->flags);
	memcpy(p + 16, m->name, strlen(m->name));
}

size_t rdmx__rpc_table_put(void *buf, size_t cap, const struct rpc_contract *k)
{
	unsigned char *p = buf;
	size_t fit = cap < 4 ? 0 : (cap - 4) / RPC_TABLE_ENTRY;

	if (cap < 4)
		return 0;
	if (fit > k->n)
		fit = k->n;
	rdmx__put_u32(p, (uint32_t)k->n);
	for (size_t i = 0; i < fit; i++)
		entry_put(p + 4 + i * RPC_TABLE_ENTRY, &k->m[i]);
	return 4 + fit * RPC_TABLE_ENTRY;
}

/* Read entry @i of a peer's table into @m (a NUL-terminated name). */
static void entry_get(const unsigned char *tab, size_t i, struct rpc_method *m)
{
	unsigned char c[RPC_TABLE_ENTRY];

	memcpy(c, tab + 4 + i * RPC_TABLE_ENTRY, sizeof(c));
	*m = (struct rpc_method){ .id = rdmx__get_u16(c), .max_req = rdmx__get_u32(c + 4),
		.max_resp = rdmx__get_u32(c + 8), .flags = rdmx__get_u32(c + 12) };
	memcpy(m->name, c + 16, RDMX_RPC_NAME_MAX);
	m->name[RDMX_RPC_NAME_MAX] = 0;
	for (char *s = m->name; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			*s = '?';
}

/* The first field where @a (here) and @b (server) differ, or 0. */
static int entry_diff(const struct rpc_method *a, const struct rpc_method *b,
		      char *out, size_t len)
{
	if (strcmp(a->name, b->name))
		return snprintf(out, len, "method %u: named '%s' here, '%s' on the server",
				a->id, a->name, b->name);
	if (a->max_req != b->max_req)
		return snprintf(out, len, "method %u '%s': largest request %u here, %u on "
				"the server", a->id, a->name, a->max_req, b->max_req);
	if (a->max_resp != b->max_resp)
		return snprintf(out, len, "method %u '%s': largest response %u here, %u on "
				"the server", a->id, a->name, a->max_resp, b->max_resp);
	if (a->flags != b->flags)
		return snprintf(out, len, "method %u '%s': flags 0x%x here, 0x%x on the "
				"server", a->id, a->name, a->flags, b->flags);
	return 0;
}

/* Walk both id-sorted tables together up to the first difference. */
static int tables_walk(const struct rpc_contract *here, const unsigned char *tab,
		       size_t got, char *out, size_t len)
{
	struct rpc_method b;
	size_t i = 0, j = 0;

	for (; i < here->n && j < got; i++, j++) {
		entry_get(tab, j, &b);
		if (here->m[i].id < b.id)
			return snprintf(out, len, "method %u '%s' is not on the server",
					here->m[i].id, here->m[i].name);
		if (here->m[i].id > b.id)
			return snprintf(out, len, "method %u '%s' of the server is not here",
					b.id, b.name);
		if (entry_diff(&here->m[i], &b, out, len))
			return 1;
	}
	if (i < here->n && j == got)
		return 0; /* the rest may be beyond what the server could send */
	if (j < got) {
		entry_get(tab, j, &b);
		return snprintf(out, len, "method %u '%s' of the server is not here",
				b.id, b.name);
	}
	return 0;
}

void rdmx__rpc_table_diff(const struct rpc_contract *here, const void *buf, size_t n,
		    char *out, size_t outlen)
{
	const unsigned char *tab = buf;
	uint32_t total;
	size_t got;

	if (n < 4 || (n - 4) % RPC_TABLE_ENTRY) {
		snprintf(out, outlen, "the server's table is malformed (%zu bytes)", n);
		return;
	}
	total = rdmx__get_u32(tab);
	got = (n - 4) / RPC_TABLE_ENTRY;
	if (got > total) {
		snprintf(out, outlen, "the server's table is malformed (%zu of %u entries)",
			 got, total);
		return;
	}
	if (tables_walk(here, tab, got, out, outlen))
		return;
	if (total != here->n)
		snprintf(out, outlen, "%zu methods here, %u on the server", here->n, total);
	else
		snprintf(out, outlen, "the tables differ beyond the %zu methods the server "
			 "could send", got);
}

size_t rdmx__rpc_frame_max(const struct rpc_contract *k)
{
	size_t m = k->max_req > k->max_resp ? k->max_req : k->max_resp;
	size_t tab = 4 + k->n * RPC_TABLE_ENTRY;

	if (tab > m)
		m = tab;
	return RPC_HDR + m;
}

void rdmx__rpc_conn_opts(const struct rdmx_rpc_opts *o, const struct rpc_contract *k,
			 size_t extra, struct rdmx_conn_opts *co)
{
	rdmx_conn_opts_init(co);
	co->max_msg_size = (uint32_t)(rdmx__rpc_frame_max(k) + extra);
	co->send_depth = co->recv_depth = o->window < RPC_DEPTH_MIN ? RPC_DEPTH_MIN :
					  o->window;
	co->connect_timeout_ms = o->timeout_ms;
}
