/* SPDX-License-Identifier: MIT */
/* buffered_read's control block (tests play a hostile peer with it). */
#ifndef RDMX_PROTOCOLS_BUFFERED_READ_H
#define RDMX_PROTOCOLS_BUFFERED_READ_H

#include <stdint.h>

#include "core/wire.h"

/* Report WRITEs a receiver may have in flight. */
#define RDMX__BR_REPS 4
/* Doorbell receives a receiver keeps posted. */
#define RDMX__BR_BELLS 4

/*
 * A receiver's progress words and a sender's tail word are checked words
 * (rdmx__cword, core/wire.h): a 32-bit count (of bytes fetched, bytes
 * released, records released; the tail's bytes) and its complement. The
 * reader widens the count against its own 64-bit totals (a receiver is
 * never more than 2^31 behind them).
 */
/* One per connection, registered for the peer's READ and WRITE. */
struct rdmx__br_ctl {
	uint64_t tail;       /* our ring's published tail, rdmx__cword (the peer READs it) */
	uint64_t pub[3];     /* ours, as receiver: fetched, head, released
			      * (progress words; the peer READs them) */
	uint64_t rep[3];     /* the peer's report WRITEs land here */
	uint64_t rd_pub[3];  /* our READ of the peer's pub lands here */
	uint64_t rd_tail;    /* our READ of the peer's tail lands here */
	uint64_t rep_src[RDMX__BR_REPS][3]; /* sources of our report WRITEs
					     * (one each in flight) */
	uint64_t sleep;      /* the peer's sleep count (core/doorbell.h):
			      * written by the peer, read once */
	uint64_t gen_src;    /* source of our count's WRITE */
	uint64_t bell[RDMX__BR_BELLS]; /* where doorbell SENDs land */
};

struct rdmx_conn;
/* @c's control block, and its own ring (the one the peer READs) with the
 * seed of its records' stamps. */
struct rdmx__br_ctl *rdmx__br_ctl_of(struct rdmx_conn *c);
uint8_t *rdmx__br_ring(struct rdmx_conn *c, uint64_t *seed);
/* Doorbells @c rang (as sender) and received (as receiver). */
void rdmx__br_bells(struct rdmx_conn *c, uint64_t *sent, uint64_t *recv);

#endif /* RDMX_PROTOCOLS_BUFFERED_READ_H */
