/* SPDX-License-Identifier: MIT */
/*
 * buffered_read's control block, the memory both ends READ and WRITE
 * (a header of its own: the protocol's files and its tests' face,
 * buffered_read.h, share it).
 */
#ifndef RDMX_PROTOCOLS_BUFFERED_READ_CTL_H
#define RDMX_PROTOCOLS_BUFFERED_READ_CTL_H

#include <stdint.h>

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

#endif /* RDMX_PROTOCOLS_BUFFERED_READ_CTL_H */
