/* SPDX-License-Identifier: MIT */
/*
 * The verbs side of the single-sender ring protocols (write_simplex,
 * write_magic, write_duplex): one engine, three variants. The record
 * format, placement and release bookkeeping are src/core/ring.h; this is
 * memory, queues, the hello block, the data path and flow control. Each
 * protocol file documents its variant and holds its descriptor, which
 * points at the engine's tables (made of the functions below, in
 * write_ring_ops.c) and at the struct rdmx__wring_variant of the variant.
 */
#ifndef RDMX_PROTOCOLS_WRITE_RING_H
#define RDMX_PROTOCOLS_WRITE_RING_H

#include "core/protocol.h"

/*
 * What tells the variants apart, as data: each variant's file fills one
 * and its ops table points at it (.family); the engine reads it there and
 * never asks which protocol it runs.
 *   double_map    the rings are mapped twice back to back, so a record
 *                 may cross the ring's end (write_magic; it falls back to
 *                 pad records when the mapping is refused)
 *   head_by_read  the default ack (opts.ack DEFAULT): the sender
 *                 RDMA-READs the receiver's released count and the
 *                 receiver posts nothing (write_duplex); else the receiver
 *                 SENDs head updates (write_simplex/magic). opts.ack
 *                 chooses either for any of the three.
 * notify (opts.notify) is chosen per connection: write_ring_notify.c.
 */
struct rdmx__wring_variant {
	int double_map;
	int head_by_read;
};

/* Counters a test (or a debugger) can read: rdmx__wring_stats(). */
struct rdmx__wring_stats {
	uint64_t pads;         /* pad records written (skip to the lap start) */
	uint64_t pad_bytes;    /* bytes of the peer's ring they wasted */
	uint64_t updates_sent; /* head updates sent (write_simplex/magic) */
	uint64_t updates_recv;
	uint64_t asks;         /* "tell me your head" writes when blocked */
	uint64_t head_reads;   /* RDMA READs of the peer's head (duplex) */
	uint64_t blocked;      /* rdmx_msg_alloc calls that had to wait */
	uint64_t records_out;  /* records written to the peer */
	uint64_t records_in;   /* records taken from the own ring */
	uint64_t crossings;    /* records written across the ring's end */
	uint64_t doorbells_sent; /* wake-ups of a sleeping peer (simplex/magic) */
	uint64_t doorbells_recv;
	uint64_t coalesced;    /* WRITEs that carried several records */
	uint64_t split;        /* of them, in two pieces at the ring's end */
	int magic;             /* records may cross the end (double mapping) */
	int imm;               /* WRITE_WITH_IMM notification */
	int notify;            /* enum rdmx_notify the connection runs */
	int ack_read;          /* ack READ (else SEND) */
};

/* The stats of a write_simplex/magic/duplex connection, or -EINVAL. */
int rdmx__wring_stats(const rdmx_conn *c, struct rdmx__wring_stats *out);

/* Bytes of per-connection state (checked against the real size). */
#define RDMX__WRING_PRIV_SIZE 1024

/* ring_size and notify; with @max_msg, room for two records. */
int rdmx__wring_check_opts(const struct rdmx_protocol_ops *proto,
			   const struct rdmx_conn_opts *o, uint32_t max_msg);
int rdmx__wring_setup(rdmx_conn *c);
int rdmx__wring_sleep_announce(rdmx_conn *c);
int rdmx__wring_hello_out(rdmx_conn *c, uint8_t *block, size_t cap,
			  size_t *len);
int rdmx__wring_hello_in(rdmx_conn *c, const uint8_t *block, size_t len);
void rdmx__wring_teardown(rdmx_conn *c);
int rdmx__wring_msg_alloc(rdmx_conn *c, size_t size, struct rdmx_msg *m,
			  int timeout_ms);
int rdmx__wring_send(rdmx_conn *c, struct rdmx_msg *m);
int rdmx__wring_send_more(rdmx_conn *c, struct rdmx_msg *m);
int rdmx__wring_flush(rdmx_conn *c, int timeout_ms);
int rdmx__wring_sends_done(rdmx_conn *c, uint64_t *done);
int rdmx__wring_recv(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms);
int rdmx__wring_release(rdmx_conn *c, struct rdmx_msg *m);
int rdmx__wring_recv_many(rdmx_conn *c, struct rdmx_msg *m, int max,
			  int timeout_ms, int *later);
int rdmx__wring_release_many(rdmx_conn *c, struct rdmx_msg *m, int n);
/* Receive ring and staging mirror (each twice for write_magic's double
 * mapping) plus the control words. */
uint64_t rdmx__wring_mem_estimate(const rdmx_conn *c);

/*
 * The engine's tables (write_ring_ops.c), one for the three protocols:
 * sleep_announce is rdmx__wring_sleep_announce (it publishes nothing where
 * the connection's receiver has no doorbell, with ack READ or notify IMM);
 * the group table is rdmx__group_none.
 */
extern const struct rdmx__conn_ops rdmx__wring_conn_ops;
extern const struct rdmx__data_ops rdmx__wring_data_ops;

/* The descriptor of a protocol of this engine: its name, wire id and
 * variant (.family); the tables are the engine's. */
#define RDMX__WRING_OPS(nm, pid, variant) {			\
	.name = (nm),						\
	.id = (pid),						\
	.family = (variant),					\
	.conn = &rdmx__wring_conn_ops,				\
	.data = &rdmx__wring_data_ops,				\
	.group = &rdmx__group_none,				\
}

#endif /* RDMX_PROTOCOLS_WRITE_RING_H */
