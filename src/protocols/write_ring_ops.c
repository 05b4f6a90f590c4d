/* SPDX-License-Identifier: MIT */
/*
 * The write ring engine's tables (src/core/protocol.h), one for the three
 * protocols of the family: write_simplex.c, write_magic.c and
 * write_duplex.c name them in their descriptors (RDMX__WRING_OPS). They
 * stand in a file of their own, above the engine's files they point into
 * (write_ring_conn.c, _send.c, _recv.c, _progress.c, _notify.c), so no
 * engine file refers up to another.
 */
#include "write_ring.h"

const struct rdmx__conn_ops rdmx__wring_conn_ops = {
	.priv_size = RDMX__WRING_PRIV_SIZE,
	.check_opts = rdmx__wring_check_opts,
	.mem_estimate = rdmx__wring_mem_estimate,
	.setup = rdmx__wring_setup,
	.hello_out = rdmx__wring_hello_out,
	.hello_in = rdmx__wring_hello_in,
	.teardown = rdmx__wring_teardown,
};

const struct rdmx__data_ops rdmx__wring_data_ops = {
	.msg_alloc = rdmx__wring_msg_alloc,
	.send = rdmx__wring_send,
	.send_more = rdmx__wring_send_more,
	.send_from = rdmx__default_send_from,
	.sendv = rdmx__default_sendv,
	.flush = rdmx__wring_flush,
	.sends_done = rdmx__wring_sends_done,
	.recv = rdmx__wring_recv,
	.recv_many = rdmx__wring_recv_many,
	.release = rdmx__wring_release,
	.release_many = rdmx__wring_release_many,
	.own_wc = rdmx__default_own_wc,
	.sleep_announce = rdmx__wring_sleep_announce,
};
