/* SPDX-License-Identifier: MIT */
/*
 * Send tokens (token.c).
 */
#ifndef RDMX_CORE_TOKEN_H
#define RDMX_CORE_TOKEN_H

#include <stdint.h>
#include <rdmx/rdmx.h>

#include "conn.h"

/* token.c: send tokens. A send token has bit 63 set (one-sided tokens
 * never do), the connection's tok_tag in bits 47-62 and the send's
 * sequence (rdmx__sends() after it) in bits 0-46. */
#define RDMX__TOK_SEND (UINT64_C(1) << 63)
#define RDMX__TOK_SEQ_BITS 47
#define RDMX__TOK_IS_SEND(tok) (((tok) & RDMX__TOK_SEND) != 0)
static inline rdmx_token rdmx__tok_make(const rdmx_conn *c, uint64_t seq)
{
	return RDMX__TOK_SEND | (uint64_t)c->tok_tag << RDMX__TOK_SEQ_BITS |
	       (seq & ((UINT64_C(1) << RDMX__TOK_SEQ_BITS) - 1));
}
/* The connection's send sequence: the sends that succeeded so far, the
 * last one's number (stats.msgs_sent, counted under c->lock). */
static inline uint64_t rdmx__sends(const rdmx_conn *c)
{
	return __atomic_load_n(&c->stats.msgs_sent, __ATOMIC_RELAXED);
}
/* A fresh tok_tag for a new connection (never 0). */
uint16_t rdmx__tok_tag_next(void);
/* rdmx_wait() of send token @tok (c->lock held). */
int rdmx__send_wait(rdmx_conn *c, rdmx_token tok, int timeout_ms);

#endif /* RDMX_CORE_TOKEN_H */
