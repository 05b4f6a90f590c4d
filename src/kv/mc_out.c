/* SPDX-License-Identifier: MIT */
/*
 * A memcached session's output and the memory it holds (mc_proto.h).
 *
 * Every buffer a connection holds (the server's input buffer, a data
 * block being collected, the replies not yet sent) is charged to the
 * session's struct rdmx__mc_mem: a growth past the connection's cap or
 * past the cap of all connections together is refused, as memcached
 * refuses a read buffer past -o read_buf_mem_limit. The refusal is
 * memcached's text: "SERVER_ERROR out of memory reading request" (and the
 * connection closed once it is sent) for a request, "SERVER_ERROR out of
 * memory writing get response" for a get (mc_proto.c), "SERVER_ERROR out
 * of memory storing object" for a data block. Those error lines are
 * written past the caps: they are short, and the connection closes or
 * its output drains before it can ask for more.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv/mc_out.h"

#define OUT_MIN 4096         /* the first output buffer */
#define OUT_KEEP (64u << 10) /* an empty output buffer above this is freed */

/* Charge @from -> @to bytes with no cap (shrinks, error lines). */
static void charge_force(struct rdmx__mc_sess *s, size_t from, size_t to)
{
	s->held += to - from; /* a shrink wraps back: unsigned arithmetic */
	if (s->mem)
		s->mem->total += to - from;
}

/*
 * rdmx__mc_charge - the session's buffers go from @from to @to bytes:
 * false (nothing charged) when the growth passes the connection's or the
 * server's cap. Shrinking always succeeds.
 */
bool rdmx__mc_charge(struct rdmx__mc_sess *s, size_t from, size_t to)
{
	struct rdmx__mc_mem *m = s->mem;
	size_t grow = to > from ? to - from : 0;

	if (m && grow && (s->held + grow > m->conn_max || m->total + grow > m->total_max)) {
		m->refused++;
		return false;
	}
	charge_force(s, from, to);
	return true;
}

/* Room for @n more output bytes; @force: past the caps (an error line). */
static int out_room(struct rdmx__mc_sess *s, size_t n, bool force)
{
	size_t need = s->out_len + n, cap = s->out_cap ? s->out_cap : OUT_MIN;
	uint8_t *p;

	if (need <= s->out_cap)
		return 0;
	while (cap < need)
		cap *= 2;
	if (force) {
		cap = need; /* past the caps: no more than the line */
		charge_force(s, s->out_cap, cap);
	} else if (!rdmx__mc_charge(s, s->out_cap, cap)) {
		cap = need; /* doubling would pass a cap: exactly what is needed */
		if (!rdmx__mc_charge(s, s->out_cap, cap))
			return -ENOBUFS;
	}
	p = realloc(s->out, cap);
	if (!p) {
		charge_force(s, cap, s->out_cap);
		s->out_failed = s->closing = true;
		return -ENOMEM;
	}
	s->out = p;
	s->out_cap = cap;
	return 0;
}

/* Whether @n more output bytes fit under the caps (they are reserved). */
bool rdmx__mc_out_fits(struct rdmx__mc_sess *s, size_t n)
{
	return !out_room(s, n, false);
}

static void out_put(struct rdmx__mc_sess *s, const void *p, size_t n, bool force)
{
	int rc = out_room(s, n, force);

	if (rc == -ENOBUFS) /* a reply past the caps: memcached closes too */
		s->out_failed = s->closing = true;
	if (rc)
		return;
	memcpy(s->out + s->out_len, p, n);
	s->out_len += n;
}

void rdmx__mc_out_bytes(struct rdmx__mc_sess *s, const void *p, size_t n)
{
	out_put(s, p, n, false);
}

void rdmx__mc_out_printf(struct rdmx__mc_sess *s, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n > 0)
		out_put(s, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1, false);
}

/* A one-line reply, unless the command said noreply (errors too). */
void rdmx__mc_reply(struct rdmx__mc_sess *s, const char *line)
{
	if (s->noreply)
		return;
	out_put(s, line, strlen(line), false);
	out_put(s, "\r\n", 2, false);
}

/* A one-line error past the caps (the caps are why it is said). */
void rdmx__mc_reply_error(struct rdmx__mc_sess *s, const char *line)
{
	out_put(s, line, strlen(line), true);
	out_put(s, "\r\n", 2, true);
}

/*
 * rdmx__mc_refuse_read - the server cannot hold more of the request:
 * memcached's "SERVER_ERROR out of memory reading request", then close.
 */
void rdmx__mc_refuse_read(struct rdmx__mc_sess *s)
{
	rdmx__mc_reply_error(s, "SERVER_ERROR out of memory reading request");
	s->closing = true;
}

/* Drop @n bytes of the output (the server sent them). */
void rdmx__mc_out_consume(struct rdmx__mc_sess *s, size_t n)
{
	if (!n)
		return;
	memmove(s->out, s->out + n, s->out_len - n);
	s->out_len -= n;
	if (!s->out_len && s->out_cap > OUT_KEEP) {
		free(s->out); /* an idle connection holds little */
		charge_force(s, s->out_cap, 0);
		s->out = NULL;
		s->out_cap = 0;
	}
}

/*
 * rdmx__mc_out_high - the output at which a session stops running
 * commands (RDMX__MC_OUT_HIGH, or a quarter of a smaller connection cap,
 * so that a reply in the making still fits under it).
 */
size_t rdmx__mc_out_high(const struct rdmx__mc_sess *s)
{
	if (s->mem && s->mem->conn_max / 4 < RDMX__MC_OUT_HIGH)
		return s->mem->conn_max / 4;
	return RDMX__MC_OUT_HIGH;
}
