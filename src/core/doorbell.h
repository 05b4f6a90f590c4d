/* SPDX-License-Identifier: MIT */
/*
 * The doorbell of a receiver that polls memory (doorbell.c): the one
 * mechanism the protocols whose messages land without a completion use
 * to wake a receiver asleep on its wait set (waitset.c).
 *
 * The sleeper WRITEs its sleep count (gen, +1 per sleep) into a word of
 * the peer's (its "sleep word"), waits until that WRITE completed - it is
 * then in the peer's memory - and looks for a message once more before
 * it sleeps (rdmx__bell_announce, from ops->sleep_announce). The peer,
 * after it made a message visible, reads its sleep word once and, when it
 * holds a count it has not rung for, posts a 0-byte SEND (the doorbell,
 * rdmx__bell_ring) into one of the receives the sleeper keeps posted; its
 * completion wakes the sleeper. Either the message was visible before
 * the count landed (the last look sees it) or the peer's read after it
 * sees the count: the peer must read the word only once its message is
 * visible to the sleeper's last look (a store to memory the sleeper
 * READs, with a full fence between it and the read; or the completion of
 * its WRITE). One doorbell per published sleep at most; one for a sleep
 * that ended is a spurious wake.
 */
#ifndef RDMX_CORE_DOORBELL_H
#define RDMX_CORE_DOORBELL_H

#include <stdint.h>

#include "conn.h"
#include "fabric.h"

#define RDMX__BELL_POSTED 1 /* our count's WRITE is posted */
#define RDMX__BELL_PLACED 2 /* ... and completed: the last look is done */

struct rdmx__bell {
	uint64_t gen;      /* sleeps we published */
	int announced;     /* 0, RDMX__BELL_POSTED or _PLACED: gen is current */
	int gen_out;       /* our count's WRITE is in flight */
	uint64_t rung;     /* sender: the peer's count we rang for */
};

/*
 * Sleeper, one step of publishing a sleep: 1 while the count's WRITE is
 * in flight (poll on: a round trip, then one sleep rather than a sleep
 * for the completion and another for the doorbell) and right after it
 * completed (the last look), 0 once the last look was done (sleep),
 * -errno (the connection down). @wr WRITEs *@src (8 bytes,
 * signaled) into the peer's sleep word; the protocol calls
 * rdmx__bell_gen_done() when it completes and rdmx__bell_woke() when a
 * message is taken or a doorbell came (a later sleep is a new one). The
 * caller has taken in its completions first.
 */
int rdmx__bell_announce(rdmx_conn *c, struct rdmx__bell *b, uint64_t *src,
			const struct rdmx__wr *wr);

/*
 * Sender: read the peer's count in @word (peer-written: once) and post the
 * doorbell @wr (a 0-byte SEND) if it holds one not rung for. 1 when rung,
 * 0 when not, -errno (the connection down).
 */
int rdmx__bell_ring(rdmx_conn *c, struct rdmx__bell *b, const uint64_t *word,
		    const struct rdmx__wr *wr);

/*
 * Sleeper: take in the doorbells that completed on @cq (each ends a
 * published sleep: rdmx__bell_woke) and have @repost(c, wr_id) post each
 * one's receive again. How many came, or -errno (the connection down).
 */
int rdmx__bell_reap(rdmx_conn *c, struct rdmx__bell *b, struct rdmx__cq *cq,
		    int (*repost)(rdmx_conn *c, uint64_t wr_id));

static inline void rdmx__bell_gen_done(struct rdmx__bell *b)
{
	b->gen_out = 0;
}

static inline void rdmx__bell_woke(struct rdmx__bell *b)
{
	b->announced = 0;
}

#endif /* RDMX_CORE_DOORBELL_H */
