/* SPDX-License-Identifier: MIT */
/*
 * The KV option structs (include/rdmx/kv.h): their defaults, and the
 * caller's struct loaded by its size, as src/core/opts.c loads struct
 * rdmx_ctx_opts. A @size of 0 is a struct filled by hand before @size
 * existed (version 0: the fields up to hello_ms, or up to timeout_ms): those
 * bytes are copied, the rest take their defaults. A field left 0 takes
 * its default too, as it always did.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "core/errors.h"
#include "kv/kv_opts.h"

#define SERVER_OPTS_V0 (offsetof(struct rdmx_kv_server_opts, hello_ms) + sizeof(int))
#define CLIENT_OPTS_V0 (offsetof(struct rdmx_kv_client_opts, timeout_ms) + sizeof(int))
#define SERVER_BUFFER_MAX (256ull << 20)
#define SERVER_CONN_BUFFER_MIN (64u << 10)
#define SERVER_REQS_PER_EVENT 20 /* memcached -R */
#define CLIENT_TIMEOUT_MS 5000

void rdmx_kv_server_opts_init(struct rdmx_kv_server_opts *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->capacity = 65536;
	o->memory = 64ULL << 20;
	o->inline_max = 1024;
	o->item_max = (1U << 20) - 512;
	o->memcached_addr = "127.0.0.1";
	o->memcached_port = 11211;
	o->max_clients = 1024;
	o->rdma_port = RDMX_DEFAULT_PORT;
	o->reqs_per_event = SERVER_REQS_PER_EVENT;
}

/* The fields left 0 take their defaults (those that depend on others last). */
static void server_defaults(struct rdmx_kv_server_opts *o)
{
	struct rdmx_kv_server_opts d;

	rdmx_kv_server_opts_init(&d);
	if (!o->capacity)
		o->capacity = d.capacity;
	if (!o->memory)
		o->memory = d.memory;
	if (!o->item_max)
		o->item_max = d.item_max;
	if (!o->memcached_addr)
		o->memcached_addr = d.memcached_addr;
	if (o->max_clients <= 0)
		o->max_clients = d.max_clients;
	if (!o->max_clients_per_peer)
		o->max_clients_per_peer = o->max_clients >= 4 ? o->max_clients / 4 : 1;
	if (!o->conn_buffer_max)
		o->conn_buffer_max = 2ull * o->item_max + (2ull << 20);
	if (!o->buffer_max)
		o->buffer_max = SERVER_BUFFER_MAX;
	if (o->buffer_max < o->conn_buffer_max)
		o->buffer_max = o->conn_buffer_max;
	if (o->reqs_per_event <= 0)
		o->reqs_per_event = d.reqs_per_event;
}

int rdmx__kv_server_opts_load(const struct rdmx_kv_server_opts *in,
			      struct rdmx_kv_server_opts *out)
{
	size_t n = in && in->size ? in->size : SERVER_OPTS_V0;

	memset(out, 0, sizeof(*out));
	if (!in) {
		rdmx_kv_server_opts_init(out);
	} else if (n < SERVER_OPTS_V0 || n > sizeof(*out)) {
		return rdmx__fail(-EINVAL, "kv: struct rdmx_kv_server_opts of size %zu "
				  "(this library: %zu..%zu): fill it with "
				  "rdmx_kv_server_opts_init()", n, SERVER_OPTS_V0,
				  sizeof(*out));
	} else {
		memcpy(out, in, n);
	}
	out->size = sizeof(*out);
	server_defaults(out);
	if (out->idle_timeout_ms < 0)
		return rdmx__fail(-EINVAL, "kv: idle_timeout_ms %d (0: never)",
				  out->idle_timeout_ms);
	if (out->conn_buffer_max < SERVER_CONN_BUFFER_MIN)
		return rdmx__fail(-EINVAL, "kv: conn_buffer_max %llu below %u (a front door "
				  "connection's first buffers)",
				  (unsigned long long)out->conn_buffer_max, SERVER_CONN_BUFFER_MIN);
	return 0;
}

void rdmx_kv_client_opts_init(struct rdmx_kv_client_opts *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->timeout_ms = CLIENT_TIMEOUT_MS;
}

int rdmx__kv_client_opts_load(const struct rdmx_kv_client_opts *in,
			      struct rdmx_kv_client_opts *out)
{
	size_t n = in && in->size ? in->size : CLIENT_OPTS_V0;

	rdmx_kv_client_opts_init(out);
	if (in && (n < CLIENT_OPTS_V0 || n > sizeof(*out)))
		return rdmx__fail(-EINVAL, "kv client: struct rdmx_kv_client_opts of "
				  "size %zu (this library: %zu..%zu): fill it with "
				  "rdmx_kv_client_opts_init()", n, CLIENT_OPTS_V0,
				  sizeof(*out));
	if (in)
		memcpy(out, in, n);
	out->size = sizeof(*out);
	if (out->timeout_ms <= 0)
		out->timeout_ms = CLIENT_TIMEOUT_MS;
	return 0;
}
