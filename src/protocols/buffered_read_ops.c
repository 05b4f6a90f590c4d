/* SPDX-License-Identifier: MIT */
/*
 * buffered_read's tables (src/core/protocol.h), in a file of their own
 * above the files they point into (buffered_read_conn.c, _send.c, _recv.c,
 * _progress.c), so no file of the protocol refers up to another.
 */
#include "buffered_read_priv.h"

static const struct rdmx__conn_ops br_conn_ops = {
	.priv_size = sizeof(struct br),
	.check_opts = rdmx__br_check_opts,
	.mem_estimate = rdmx__br_mem_estimate,
	.setup = rdmx__br_setup,
	.hello_out = rdmx__br_hello_out,
	.hello_in = rdmx__br_hello_in,
	.teardown = rdmx__br_teardown,
};

static const struct rdmx__data_ops br_data_ops = {
	.msg_alloc = rdmx__br_msg_alloc,
	.send = rdmx__br_send,
	.send_more = rdmx__default_send_more,
	.send_from = rdmx__default_send_from,
	.sendv = rdmx__default_sendv,
	.flush = rdmx__br_flush,
	.sends_done = rdmx__br_sends_done,
	.recv = rdmx__br_recv,
	.recv_many = rdmx__br_recv_many,
	.release = rdmx__br_release,
	.release_many = rdmx__br_release_many,
	.own_wc = rdmx__default_own_wc,
	.sleep_announce = rdmx__br_sleep_announce,
};

const struct rdmx_protocol_ops rdmx__proto_buffered_read = {
	.name = "buffered_read",
	.id = RDMX__PROTO_BUFFERED_READ,
	.conn = &br_conn_ops,
	.data = &br_data_ops,
	.group = &rdmx__group_none,
};
