/* SPDX-License-Identifier: MIT */
/*
 * write_atomic's tables (src/core/protocol.h), in a file of their own
 * above the files they point into (write_atomic_conn.c, _send.c, _ring.c), so
 * no file of the protocol refers up to another.
 */
#include "core/protocol.h"
#include "core/wire.h"
#include "protocols/write_atomic_priv.h"

static const struct rdmx__conn_ops wa_conn_ops = {
	.priv_size = sizeof(struct wa),
	.check_opts = rdmx__wa_check_opts,
	.mem_estimate = rdmx__wa_mem_estimate,
	.setup = rdmx__wa_setup,
	.hello_out = rdmx__wa_hello_out,
	.hello_in = rdmx__wa_hello_in,
	.teardown = rdmx__wa_teardown,
};

static const struct rdmx__data_ops wa_data_ops = {
	.msg_alloc = rdmx__sendpool_msg_alloc,
	.send = rdmx__wa_send,
	.send_more = rdmx__wa_send_more,
	.send_from = rdmx__default_send_from,
	.sendv = rdmx__default_sendv,
	.flush = rdmx__wa_flush,
	.sends_done = rdmx__wa_sends_done,
	.recv = rdmx__wa_recv,
	.recv_many = rdmx__default_recv_many,
	.release = rdmx__wa_release,
	.release_many = rdmx__default_release_many,
	.own_wc = rdmx__default_own_wc,
	.sleep_announce = rdmx__default_sleep_announce,
};

static const struct rdmx__group_ops wa_group_ops = {
	.shared_size = sizeof(struct wa_ring),
	.shared_teardown = rdmx__wa_shared_teardown,
	.group_recv = rdmx__wa_group_recv,
	.group_unlist = rdmx__wa_group_unlist,
};

const struct rdmx_protocol_ops rdmx__proto_write_atomic = {
	.name = "write_atomic",
	.id = RDMX__PROTO_WRITE_ATOMIC,
	.conn = &wa_conn_ops,
	.data = &wa_data_ops,
	.group = &wa_group_ops,
};
