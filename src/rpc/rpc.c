/* SPDX-License-Identifier: MIT */
/*
 * rdmx RPC: the transport-independent part's entry (options, transports
 * by name). The server is rpc_server.c, the client rpc_client.c, the
 * frame rpc_frame.c, the contract rpc_contract.c; each transport is a
 * file ending in its ops table (rpc_msg.c, rpc_rfp_ops.c).
 *
 * The contract check. rdma_cm's private data is small and rdmx's hello
 * block belongs to the protocol, so the check is the RPC layer's first
 * exchange on the connection: the client's first frame (HELLO) carries
 * its table's hash (FNV-1a over the id-sorted wire form) and its method
 * count, 12 bytes whatever the table's size. The server compares with its
 * own hash. Equal: HELLO_OK, and calls may follow. Different: the server
 * answers HELLO_REJECT carrying its own table (as many entries as fit a
 * message; the server's messages are sized to hold its table), records
 * why on itself, flushes and drops that connection only; the listener
 * goes on serving the others. The client, which has both tables, names
 * the first difference ("method 3 'put': largest request 4096 here, 1024
 * on the server") in its -EPROTO. So the server never parses a table a
 * client wrote, and a mismatch costs one round trip.
 *
 * Until the hello is answered the server takes no request on the
 * connection (a REQ first is a malformed frame: the connection is
 * dropped). A malformed frame fails the connection that wrote it, never
 * another: on the server it drops that client, on the client every call
 * in flight fails with -EPROTO.
 */
#include <errno.h>
#include <string.h>

#include "rpc/rpc_int.h"

#define WINDOW_DEFAULT 16u
#define TIMEOUT_DEFAULT 5000

void rdmx_rpc_opts_init(struct rdmx_rpc_opts *o)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->size = sizeof(*o);
	o->transport = "msg";
	o->protocol = "send_recv";
	o->window = WINDOW_DEFAULT;
	o->workers = 1;
	o->timeout_ms = TIMEOUT_DEFAULT;
	o->fetch_retries = 8;
}

const struct rpc_transport_ops *rdmx__rpc_transport_by_name(const char *name)
{
	static const struct rpc_transport_ops *const all[] = {
		&rdmx__rpc_transport_msg,
		&rdmx__rpc_transport_rfp,
		&rdmx__rpc_transport_herd,
	};

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (!strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

/* The server's deadlines and queue bounds: 0 is the default. */
static int opts_server_load(struct rdmx_rpc_opts *o)
{
	if (o->hello_ms < 0 || o->drop_ms < 0)
		return rdmx__fail(-EINVAL, "rpc: hello_ms %d and drop_ms %d must be >= 0 "
				  "(0: the default)", o->hello_ms, o->drop_ms);
	if (!o->hello_ms)
		o->hello_ms = o->timeout_ms;
	if (!o->drop_ms)
		o->drop_ms = o->timeout_ms / 2 ? o->timeout_ms / 2 : 1;
	if (!o->queue_max)
		o->queue_max = RPC_WINDOW_MAX;
	return 0; /* queue_bytes: against the contract (rdmx__rpc_queue_bounds) */
}

int rdmx__rpc_opts_load(const struct rdmx_rpc_opts *in, struct rdmx_rpc_opts *out,
		  const struct rpc_transport_ops **ops)
{
	rdmx_rpc_opts_init(out);
	if (in) {
		if (in->size < sizeof(uint32_t) || in->size > sizeof(*out))
			return rdmx__fail(-EINVAL, "rpc options: size %u not set by "
					  "rdmx_rpc_opts_init", in->size);
		memcpy(out, in, in->size);
	}
	if (!out->transport)
		out->transport = "msg";
	if (!out->protocol)
		out->protocol = "send_recv";
	*ops = rdmx__rpc_transport_by_name(out->transport);
	if (!*ops)
		return rdmx__fail(-EINVAL, "rpc: unknown transport '%s'", out->transport);
	if (out->window < 1 || out->window > RPC_WINDOW_MAX)
		return rdmx__fail(-EINVAL, "rpc: window %u out of range 1..%u",
				  out->window, RPC_WINDOW_MAX);
	if (out->workers > 256)
		return rdmx__fail(-EINVAL, "rpc: %u workers, at most 256", out->workers);
	if (out->timeout_ms <= 0)
		return rdmx__fail(-EINVAL, "rpc: timeout_ms must be > 0");
	return opts_server_load(out);
}
