/* SPDX-License-Identifier: MIT */
/*
 * Send tokens: rdmx_send_tok() hands out a token per send, rdmx_wait()
 * waits for it (onesided.c passes send tokens here).
 *
 * A token is the send's sequence number on its connection (rdmx__sends()
 * once the send succeeded: the stats' msgs_sent, counted under the
 * connection's lock) with the connection's tag (token.h,
 * rdmx__tok_make); nothing is allocated per send, and a send whose token
 * nobody waits for costs nothing but a branch. The protocol answers one question
 * through its sends_done hook: how many of the connection's sends are
 * complete. Sends complete in send order (an RC send queue completes in
 * post order; read's hold pool counts the prefix of its acknowledged
 * sends), so token t is complete once that count reaches t's sequence.
 * Selective signaling (issue 10) keeps this: one signaled completion then
 * advances the count by the sends it covers.
 *
 * A token is user data: the tag says whose it is (another connection's,
 * or one of a closed connection, carries another tag: tags come from one
 * process-wide counter, so they repeat only after 65,535 connections),
 * and a sequence of 0 or above rdmx__sends() was never issued. Either is
 * -EINVAL. 2^47 sends per connection fit before the sequence wraps.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conn.h"
#include "errors.h"
#include "protocol.h"
#include "token.h"
#include "wait.h"
#include "waitset.h"

#define SEQ_MASK ((UINT64_C(1) << RDMX__TOK_SEQ_BITS) - 1)

uint16_t rdmx__tok_tag_next(void)
{
	static unsigned next;
	unsigned v = __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);

	return (uint16_t)(v % 0xffffu + 1);
}

/* The sequence of @tok if it is an issued send token of @c, else -EINVAL. */
static int tok_seq(const rdmx_conn *c, rdmx_token tok, uint64_t *seq)
{
	uint64_t s = tok & SEQ_MASK;

	if (tok != rdmx__tok_make(c, s))
		return rdmx__fail(-EINVAL, "token 0x%llx is not a send token of this connection",
				  (unsigned long long)tok);
	if (!s || s > (rdmx__sends(c) & SEQ_MASK))
		return rdmx__fail(-EINVAL, "token 0x%llx names send #%llu, this connection "
				  "has sent %llu", (unsigned long long)tok,
				  (unsigned long long)s, (unsigned long long)rdmx__sends(c));
	*seq = s;
	return 0;
}

static int wait_timeout(rdmx_conn *c, uint64_t seq, uint64_t done,
			int timeout_ms)
{
	char peer[64];

	if (c->f->addr_str(c->ep, 1, peer, sizeof(peer)))
		strcpy(peer, "?");
	return rdmx__fail(-ETIMEDOUT, "rdmx_wait: %s send #%llu on the connection "
			  "to %s not complete within %d ms (%llu of %llu sends are)",
			  c->proto->name, (unsigned long long)seq, peer, timeout_ms,
			  (unsigned long long)done, (unsigned long long)rdmx__sends(c));
}

/* Wait until @seq sends are complete. */
static int wait_seq(rdmx_conn *c, uint64_t seq, int timeout_ms)
{
	struct rdmx__deadline d;
	uint64_t done = 0;
	int n, rc;

	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		n = c->data_ops->sends_done(c, &done);
		if ((done & SEQ_MASK) >= seq)
			return 0;
		if (n < 0)
			return n;
		if (c->state == RDMX__CONN_DOWN)
			return rdmx__conn_down_reason(c);
		if (n > 0)
			continue;
		rc = rdmx__conn_wait(c, &d);
		if (rc == -ETIMEDOUT)
			return wait_timeout(c, seq, done, timeout_ms);
		if (rc)
			return rc;
	}
}

int rdmx__send_wait(rdmx_conn *c, rdmx_token tok, int timeout_ms)
{
	uint64_t seq = 0;
	int rc = tok_seq(c, tok, &seq);

	if (rc)
		return rc;
	return wait_seq(c, seq, timeout_ms);
}
