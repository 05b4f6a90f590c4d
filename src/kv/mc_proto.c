/* SPDX-License-Identifier: MIT */
/*
 * memcached's ASCII protocol (doc/protocol.txt) over the rdmx KV store:
 * set, add, replace, append, prepend, cas (each with noreply), get and gets
 * with many keys, delete, incr, decr, touch, flush_all, version, verbosity,
 * stats and quit. The replies and errors are memcached 1.6's, byte for byte
 * (tests/unit/kv_mc_compare.sh runs one script against both), including
 * its quirks: a refused command line does not swallow its data block (the
 * block is then read as commands); a data block not ending in "\r\n" is
 * "CLIENT_ERROR bad data chunk"; a too-large value is swallowed and, for
 * set, the old value dropped; incr/decr rewrite a number that got shorter
 * in place, padded with spaces; noreply silences errors too.
 *
 * Hostile input: a line longer than RDMX__MC_LINE_MAX without its newline
 * closes the connection (memcached does the same; get/gets lines may reach
 * RDMX__MC_GET_LINE_MAX); a data block is collected in the session, never
 * longer than the item limit, so a client that never sends it holds only
 * its own connection.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv/mc_out.h"
#include "kv/mc_proto.h"

#define MC_TOKENS 8          /* tokens looked at (more: counted only) */

struct mc_tok {
	const char *p;
	size_t len;
};

/* A command line split on spaces. */
struct mc_line {
	struct mc_tok t[MC_TOKENS];
	size_t n;            /* all tokens, also past MC_TOKENS */
	const char *rest;    /* the line after the command token */
	size_t rest_len;
};

/* --------------------------------------------------------------- numbers */

/* The token as a C string in @buf; false if it does not fit. */
static bool tok_str(const struct mc_tok *t, char *buf, size_t cap)
{
	if (t->len >= cap)
		return false;
	memcpy(buf, t->p, t->len);
	buf[t->len] = 0;
	return true;
}

/* memcached's safe_strtoull. */
static bool tok_u64(const struct mc_tok *t, uint64_t *out)
{
	char buf[64], *end;
	unsigned long long v;

	if (!tok_str(t, buf, sizeof(buf)))
		return false;
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno == ERANGE || end == buf || *end)
		return false;
	if ((long long)v < 0 && memchr(buf, '-', (size_t)(end - buf)))
		return false;
	*out = v;
	return true;
}

/* memcached's safe_strtoul into 32 bits (the client flags). */
static bool tok_u32(const struct mc_tok *t, uint32_t *out)
{
	char buf[64], *end;
	unsigned long v;

	if (!tok_str(t, buf, sizeof(buf)))
		return false;
	errno = 0;
	v = strtoul(buf, &end, 10);
	if (errno == ERANGE || end == buf || *end)
		return false;
	if ((long)v < 0 && memchr(buf, '-', (size_t)(end - buf)))
		return false;
	*out = (uint32_t)v;
	return true;
}

/*
 * The client flags: 32 bits. Debian's memcached 1.6.18 wraps a larger
 * number silently (2^32 is stored as 0); the door refuses it as
 * memcached refuses a number it cannot read (2^64): "CLIENT_ERROR bad
 * command line format", so a client never reads back other flags than it
 * stored.
 */
static bool tok_flags(const struct mc_tok *t, uint32_t *out)
{
	uint64_t v;

	if (!tok_u64(t, &v) || v > UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* memcached's safe_strtol. */
static bool tok_i32(const struct mc_tok *t, int32_t *out)
{
	char buf[64], *end;
	long v;

	if (!tok_str(t, buf, sizeof(buf)))
		return false;
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno == ERANGE || end == buf || *end || v > INT_MAX || v < INT_MIN)
		return false;
	*out = (int32_t)v;
	return true;
}

static uint64_t mc_expiry(const struct rdmx__mc_sess *s, int32_t exptime)
{
	return rdmx__kv_expiry(s->kv, exptime);
}

/* --------------------------------------------------------------- parsing */

static bool tok_is(const struct mc_tok *t, const char *word)
{
	return t->len == strlen(word) && !memcmp(t->p, word, t->len);
}

static void line_split(const char *p, size_t n, struct mc_line *l)
{
	size_t i = 0;

	memset(l, 0, sizeof(*l));
	while (i < n) {
		size_t start;

		while (i < n && p[i] == ' ')
			i++;
		if (i == n)
			break;
		start = i;
		while (i < n && p[i] != ' ')
			i++;
		if (l->n < MC_TOKENS)
			l->t[l->n] = (struct mc_tok){ p + start, i - start };
		if (l->n++ == 0) {
			l->rest = p + i;
			l->rest_len = n - i;
		}
	}
}

/* memcached's set_noreply_maybe: the last token is "noreply". */
static void noreply_maybe(struct rdmx__mc_sess *s, const struct mc_line *l)
{
	s->noreply = l->n <= MC_TOKENS && l->n > 1 && tok_is(&l->t[l->n - 1], "noreply");
}

/* ------------------------------------------------------------ retrieval */

static bool key_ok(const struct mc_tok *t)
{
	return t->len <= RDMX__KV_KEY_MAX;
}

/* The next key of a get line after @*pos; false at the end. */
static bool next_key(const struct mc_line *l, size_t *pos, struct mc_tok *k)
{
	const char *p = l->rest;
	size_t i = *pos, n = l->rest_len, start;

	while (i < n && p[i] == ' ')
		i++;
	if (i == n)
		return false;
	start = i;
	while (i < n && p[i] != ' ')
		i++;
	*k = (struct mc_tok){ p + start, i - start };
	*pos = i;
	return true;
}

/* One key's reply; false when it does not fit under the memory caps. */
static bool get_one(struct rdmx__mc_sess *s, const struct mc_tok *k, bool cas)
{
	const struct rdmx__kv_ehdr *h = &s->rd.hit;

	if (s->count)
		s->count->cmd_get++;
	if (rdmx__kv_get(s->kv, &s->rd, k->p, k->len))
		return true;
	if (!rdmx__mc_out_fits(s, 6 + k->len + 64 + h->value_len + 2))
		return false;
	if (s->count)
		s->count->get_hits++;
	rdmx__mc_out_bytes(s, "VALUE ", 6);
	rdmx__mc_out_bytes(s, k->p, k->len);
	if (cas)
		rdmx__mc_out_printf(s, " %u %u %llu\r\n", h->flags, h->value_len,
				    (unsigned long long)h->cas);
	else
		rdmx__mc_out_printf(s, " %u %u\r\n", h->flags, h->value_len);
	rdmx__mc_out_bytes(s, s->rd.value, h->value_len);
	rdmx__mc_out_bytes(s, "\r\n", 2);
	return true;
}

/*
 * get/gets KEY...: every key checked first (one too long: only the error).
 * The replies stop once the output holds rdmx__mc_out_high() bytes, with
 * s->get_pos where the next key is: a line of 2-byte keys naming one big
 * value would otherwise build half a million values' replies in memory at
 * once. rdmx__mc_execute keeps the line and runs it again from there once
 * the output has gone out. A reply that does not fit under the memory
 * caps (mc_out.c) ends the get with memcached's "SERVER_ERROR out of
 * memory writing get response" instead of END, its replies of this run
 * dropped.
 */
static void cmd_get(struct rdmx__mc_sess *s, const struct mc_line *l, bool cas)
{
	size_t resume = s->get_pos, pos = 0, next, mark = s->out_len;
	struct mc_tok k;

	s->get_pos = 0;
	if (l->n < 2)
		return rdmx__mc_reply(s, "ERROR");
	while (!resume && next_key(l, &pos, &k))
		if (!key_ok(&k))
			return rdmx__mc_reply(s, "CLIENT_ERROR bad command line format");
	/* at least one key per run: the output is below the bound on entry */
	for (pos = next = resume; next_key(l, &next, &k); pos = next) {
		if (s->out_len >= rdmx__mc_out_high(s)) {
			s->get_pos = pos;
			return;
		}
		if (!get_one(s, &k, cas)) {
			s->out_len = mark;
			return rdmx__mc_reply_error(s, "SERVER_ERROR out of memory "
						    "writing get response");
		}
	}
	rdmx__mc_reply(s, "END");
}

/* -------------------------------------------------------------- storage */

static const char *store_reply(int rc, enum rdmx__kv_mode mode)
{
	switch (rc) {
	case 0:
		return "STORED";
	case -EEXIST:
		return mode == RDMX__KV_CAS ? "EXISTS" : "NOT_STORED";
	case -ENOENT:
		return mode == RDMX__KV_CAS ? "NOT_FOUND" : "NOT_STORED";
	case -E2BIG:
		return "NOT_STORED"; /* append/prepend past the item limit */
	default:
		return "SERVER_ERROR out of memory storing object";
	}
}

/* The data block is stored or refused: its memory goes back. */
static void data_free(struct rdmx__mc_sess *s)
{
	if (!s->data)
		return;
	free(s->data);
	s->data = NULL;
	rdmx__mc_charge(s, s->data_need, 0);
}

/* The data block is complete: store it, or say it was malformed. */
static void data_done(struct rdmx__mc_sess *s)
{
	size_t n = s->data_need - 2;

	s->pending = false;
	if (memcmp(s->data + n, "\r\n", 2)) {
		rdmx__mc_reply(s, "CLIENT_ERROR bad data chunk");
	} else {
		s->put.value = s->data;
		s->put.vlen = n;
		if (s->count)
			s->count->cmd_set++;
		rdmx__mc_reply(s, store_reply(rdmx__kv_store(s->kv, &s->put, NULL), s->put.mode));
	}
	s->noreply = false;
	data_free(s);
}

/*
 * No memory for a data block (the caps of mc_out.c, or malloc): as
 * memcached, "SERVER_ERROR out of memory storing object", the block
 * swallowed and a set's old value dropped (no stale value stays).
 */
static void no_room(struct rdmx__mc_sess *s)
{
	rdmx__mc_reply(s, "SERVER_ERROR out of memory storing object");
	s->swallow = s->data_need;
	if (s->put.mode == RDMX__KV_SET)
		rdmx__kv_delete(s->kv, s->put.key, s->put.klen);
}

/* A value too large: refuse it, swallow its block, drop a set's old value. */
static void too_large(struct rdmx__mc_sess *s, uint64_t need)
{
	rdmx__mc_reply(s, "SERVER_ERROR object too large for cache");
	s->swallow = need;
	if (s->put.mode == RDMX__KV_SET)
		rdmx__kv_delete(s->kv, s->put.key, s->put.klen);
}

/* The storage command's fields into s->put; false after replying an error. */
static bool update_parse(struct rdmx__mc_sess *s, const struct mc_line *l,
			 bool cas, int32_t *vlen)
{
	int32_t exptime;

	if (!key_ok(&l->t[1]) || !tok_flags(&l->t[2], &s->put.flags) ||
	    !tok_i32(&l->t[3], &exptime) || !tok_i32(&l->t[4], vlen) ||
	    (cas && !tok_u64(&l->t[5], &s->put.cas)) || *vlen < 0 ||
	    *vlen > INT_MAX - 2) {
		rdmx__mc_reply(s, "CLIENT_ERROR bad command line format");
		return false;
	}
	memcpy(s->key, l->t[1].p, l->t[1].len);
	s->put.key = s->key;
	s->put.klen = l->t[1].len;
	s->put.expiry = mc_expiry(s, exptime);
	return true;
}

/* set/add/replace/append/prepend KEY FLAGS EXPTIME BYTES [noreply], cas ... CAS [noreply]. */
static void cmd_update(struct rdmx__mc_sess *s, const struct mc_line *l,
		       enum rdmx__kv_mode mode)
{
	bool cas = mode == RDMX__KV_CAS;
	int32_t vlen;

	if (l->n != (cas ? 6u : 5u) && l->n != (cas ? 7u : 6u))
		return rdmx__mc_reply(s, "ERROR");
	noreply_maybe(s, l);
	memset(&s->put, 0, sizeof(s->put));
	s->put.mode = mode;
	if (!update_parse(s, l, cas, &vlen))
		return;
	if ((uint64_t)vlen > rdmx__kv_item_max(s->kv))
		return too_large(s, (uint64_t)vlen + 2);
	s->data_need = (size_t)vlen + 2;
	s->data_len = 0;
	if (!rdmx__mc_charge(s, 0, s->data_need))
		return no_room(s);
	s->data = malloc(s->data_need);
	if (!s->data) {
		rdmx__mc_charge(s, s->data_need, 0);
		return no_room(s);
	}
	s->pending = true;
}

/* ---------------------------------------------------------- other commands */

/* delete KEY [0] [noreply] */
static void cmd_delete(struct rdmx__mc_sess *s, const struct mc_line *l)
{
	if (l->n < 2 || l->n > 4)
		return rdmx__mc_reply(s, "ERROR");
	if (l->n > 2) {
		bool zero = tok_is(&l->t[2], "0");

		noreply_maybe(s, l);
		if (!((l->n == 3 && (zero || s->noreply)) || (l->n == 4 && zero && s->noreply)))
			return rdmx__mc_reply(s, "CLIENT_ERROR bad command line format.  "
				     "Usage: delete <key> [noreply]");
	}
	if (!key_ok(&l->t[1]))
		return rdmx__mc_reply(s, "CLIENT_ERROR bad command line format");
	rdmx__mc_reply(s, rdmx__kv_delete(s->kv, l->t[1].p, l->t[1].len) ? "NOT_FOUND" : "DELETED");
}

/* The start of incr, decr and touch (KEY ARG [noreply]); false after replying. */
static bool key_arg_start(struct rdmx__mc_sess *s, const struct mc_line *l)
{
	if (l->n != 3 && l->n != 4) {
		rdmx__mc_reply(s, "ERROR");
		return false;
	}
	noreply_maybe(s, l);
	if (!key_ok(&l->t[1])) {
		rdmx__mc_reply(s, "CLIENT_ERROR bad command line format");
		return false;
	}
	return true;
}

/* incr/decr KEY DELTA [noreply] */
static void cmd_delta(struct rdmx__mc_sess *s, const struct mc_line *l, bool decr)
{
	uint64_t delta, v;
	char num[24];
	int rc;

	if (!key_arg_start(s, l))
		return;
	if (!tok_u64(&l->t[2], &delta))
		return rdmx__mc_reply(s, "CLIENT_ERROR invalid numeric delta argument");
	rc = rdmx__kv_delta(s->kv, l->t[1].p, l->t[1].len, delta, decr, &v);
	if (rc == -ENOENT)
		return rdmx__mc_reply(s, "NOT_FOUND");
	if (rc == -EINVAL)
		return rdmx__mc_reply(s, "CLIENT_ERROR cannot increment or decrement non-numeric value");
	if (rc)
		return rdmx__mc_reply(s, "SERVER_ERROR out of memory");
	snprintf(num, sizeof(num), "%llu", (unsigned long long)v);
	rdmx__mc_reply(s, num);
}

/* touch KEY EXPTIME [noreply] */
static void cmd_touch(struct rdmx__mc_sess *s, const struct mc_line *l)
{
	int32_t exptime;

	if (!key_arg_start(s, l))
		return;
	if (!tok_i32(&l->t[2], &exptime))
		return rdmx__mc_reply(s, "CLIENT_ERROR invalid exptime argument");
	if (s->count)
		s->count->cmd_touch++;
	rdmx__mc_reply(s, rdmx__kv_touch(s->kv, l->t[1].p, l->t[1].len, mc_expiry(s, exptime))
		 ? "NOT_FOUND" : "TOUCHED");
}

/* flush_all [DELAY] [noreply] */
static void cmd_flush(struct rdmx__mc_sess *s, const struct mc_line *l)
{
	int32_t delay = 0;

	if (l->n > 3)
		return rdmx__mc_reply(s, "ERROR");
	noreply_maybe(s, l);
	if (l->n != (s->noreply ? 2u : 1u) && !tok_i32(&l->t[1], &delay))
		return rdmx__mc_reply(s, "CLIENT_ERROR invalid exptime argument");
	if (s->count)
		s->count->cmd_flush++;
	rdmx__kv_flush(s->kv, delay > 0 ? mc_expiry(s, delay) : 0);
	rdmx__mc_reply(s, "OK");
}

/* verbosity LEVEL [noreply]: accepted, changes nothing here. */
static void cmd_verbosity(struct rdmx__mc_sess *s, const struct mc_line *l)
{
	uint32_t level;

	if (l->n != 2 && l->n != 3)
		return rdmx__mc_reply(s, "ERROR");
	noreply_maybe(s, l);
	if (!tok_u32(&l->t[1], &level))
		return rdmx__mc_reply(s, "CLIENT_ERROR bad command line format");
	rdmx__mc_reply(s, "OK");
}

/* stats: memcached's general-purpose names where rdmx KV has them. */
static void cmd_stats(struct rdmx__mc_sess *s, const struct mc_line *l)
{
	struct rdmx__mc_counters c = { 0 };
	struct rdmx__kv_stats st;
	uint64_t now = rdmx__kv_now(s->kv);

	if (l->n > 1)
		return rdmx__mc_reply(s, "ERROR");
	if (s->count)
		c = *s->count;
	rdmx__kv_stats(s->kv, &st);
	const struct { const char *name; uint64_t v; } rows[] = {
		{ "uptime", now - (c.started ? c.started : now) }, { "time", now },
		{ "curr_connections", c.curr_conns }, { "total_connections", c.total_conns },
		{ "rejected_connections", c.rejected_conns }, { "cmd_get", c.cmd_get },
		{ "cmd_set", c.cmd_set }, { "cmd_flush", c.cmd_flush },
		{ "cmd_touch", c.cmd_touch }, { "get_hits", c.get_hits },
		{ "get_misses", c.cmd_get - c.get_hits }, { "limit_maxbytes", st.slab_size },
		{ "curr_items", st.items }, { "evictions", st.evictions },
		{ "rdmx_capacity", st.capacity },
		{ "rdmx_buckets", st.buckets }, { "rdmx_slab_used", st.slab_used },
		{ "rdmx_read_retries", st.retries }, { "rdmx_read_fallbacks", st.fallbacks },
		{ "listen_disabled_num", c.listen_disabled }, { "idle_kicks", c.idle_kicks },
		{ "rdmx_accept_failed", c.accept_failed },
		{ "rdmx_buffer_bytes", s->mem ? s->mem->total : 0 },
		{ "rdmx_buffer_refused", s->mem ? s->mem->refused : 0 },
	};

	rdmx__mc_out_printf(s, "STAT version %s\r\n", s->version);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		rdmx__mc_out_printf(s, "STAT %s %llu\r\n", rows[i].name, (unsigned long long)rows[i].v);
	rdmx__mc_reply(s, "END");
}

/* ------------------------------------------------------------ dispatch */

struct mc_cmd {
	const char *name;
	void (*fn)(struct rdmx__mc_sess *s, const struct mc_line *l, int arg);
	int arg;
};

static void do_get(struct rdmx__mc_sess *s, const struct mc_line *l, int cas)
{
	cmd_get(s, l, cas);
}

static void do_update(struct rdmx__mc_sess *s, const struct mc_line *l, int mode)
{
	cmd_update(s, l, (enum rdmx__kv_mode)mode);
}

static void do_delta(struct rdmx__mc_sess *s, const struct mc_line *l, int decr)
{
	cmd_delta(s, l, decr);
}

static void do_other(struct rdmx__mc_sess *s, const struct mc_line *l, int which)
{
	switch (which) {
	case 0:
		return cmd_delete(s, l);
	case 1:
		return cmd_touch(s, l);
	case 2:
		return cmd_flush(s, l);
	case 3:
		return cmd_verbosity(s, l);
	case 4:
		return cmd_stats(s, l);
	case 5:
		return rdmx__mc_out_printf(s, "VERSION %s\r\n", s->version);
	default:
		s->closing = true; /* quit */
	}
}

static const struct mc_cmd mc_cmds[] = {
	{ "get", do_get, 0 },
	{ "gets", do_get, 1 },
	{ "set", do_update, RDMX__KV_SET },
	{ "add", do_update, RDMX__KV_ADD },
	{ "replace", do_update, RDMX__KV_REPLACE },
	{ "append", do_update, RDMX__KV_APPEND },
	{ "prepend", do_update, RDMX__KV_PREPEND },
	{ "cas", do_update, RDMX__KV_CAS },
	{ "incr", do_delta, 0 },
	{ "decr", do_delta, 1 },
	{ "delete", do_other, 0 },
	{ "touch", do_other, 1 },
	{ "flush_all", do_other, 2 },
	{ "verbosity", do_other, 3 },
	{ "stats", do_other, 4 },
	{ "version", do_other, 5 },
	{ "quit", do_other, 6 },
};

static void line_run(struct rdmx__mc_sess *s, const char *p, size_t n)
{
	struct mc_line l;

	s->noreply = false;
	line_split(p, n, &l);
	for (size_t i = 0; l.n && i < sizeof(mc_cmds) / sizeof(mc_cmds[0]); i++) {
		if (tok_is(&l.t[0], mc_cmds[i].name)) {
			mc_cmds[i].fn(s, &l, mc_cmds[i].arg);
			s->noreply = s->pending && s->noreply;
			return;
		}
	}
	rdmx__mc_reply(s, "ERROR");
}

/* ------------------------------------------------------------- the feed */

/* A line with no newline yet: wait for more, or close when it is too long. */
static size_t line_partial(struct rdmx__mc_sess *s, const uint8_t *in, size_t n)
{
	size_t sp = 0;

	if (n <= RDMX__MC_LINE_MAX)
		return 0;
	while (sp < n && in[sp] == ' ')
		sp++;
	if (sp > 100 || n - sp < 5 || (memcmp(in + sp, "get ", 4) && memcmp(in + sp, "gets ", 5)) ||
	    n > RDMX__MC_GET_LINE_MAX) {
		s->closing = true; /* as memcached: nothing else to do with it */
		return n;
	}
	return 0;
}

static size_t data_feed(struct rdmx__mc_sess *s, const uint8_t *in, size_t n)
{
	size_t take = s->data_need - s->data_len;

	if (take > n)
		take = n;
	memcpy(s->data + s->data_len, in, take);
	s->data_len += take;
	if (s->data_len == s->data_need)
		data_done(s);
	return take;
}

/*
 * The newline ending the line at @p (@len bytes), or NULL. A partial line
 * is searched only where new bytes arrived: s->scanned bytes of it were
 * searched by the last call, which left them at the input's start.
 */
static const uint8_t *line_find(struct rdmx__mc_sess *s, const uint8_t *p, size_t len)
{
	size_t from = s->scanned <= len ? s->scanned : 0;
	const uint8_t *nl = memchr(p + from, '\n', len - from);

	s->scan_bytes += nl ? (size_t)(nl - p) + 1 - from : len - from;
	s->scanned = nl ? 0 : len;
	return nl;
}

/*
 * rdmx__mc_execute - run the complete commands at the start of @in (@n
 * bytes from the client), replies appended to s->out. Returns how many
 * bytes it used; the caller keeps the rest for the next call, with more
 * bytes after it (a partial line is not searched again where it was
 * searched before); it stops early while s->out holds
 * rdmx__mc_out_high() bytes, and once s->turn_left commands ran this
 * turn (with s->turn_max set: memcached's -R, the server's fairness).
 * s->closing: close once s->out is sent.
 */
size_t rdmx__mc_execute(struct rdmx__mc_sess *s, const uint8_t *in, size_t n)
{
	size_t used = 0;

	while (used < n && !s->closing && s->out_len < rdmx__mc_out_high(s) &&
	       !(s->turn_max && !s->turn_left)) {
		const uint8_t *p = in + used, *nl;
		size_t len = n - used, line;

		if (s->swallow) {
			size_t k = len < s->swallow ? len : (size_t)s->swallow;

			s->swallow -= k;
			used += k;
			continue;
		}
		if (s->pending) {
			used += data_feed(s, p, len);
			continue;
		}
		nl = line_find(s, p, len);
		if (!nl)
			return used + line_partial(s, p, len);
		line = (size_t)(nl - p);
		line_run(s, (const char *)p, line && p[line - 1] == '\r' ? line - 1 : line);
		if (s->get_pos)
			break; /* a get stopped at the output bound: run it on later */
		used += line + 1;
		if (s->turn_max)
			s->turn_left--;
	}
	return used;
}

int rdmx__mc_sess_init(struct rdmx__mc_sess *s, struct rdmx__kv *kv,
		       struct rdmx__mc_counters *count, const char *version)
{
	memset(s, 0, sizeof(*s));
	s->kv = kv;
	s->count = count;
	s->version = version;
	return rdmx__kv_reader_init(kv, &s->rd);
}

void rdmx__mc_sess_fini(struct rdmx__mc_sess *s)
{
	rdmx__kv_reader_fini(&s->rd);
	free(s->data);
	free(s->out);
	if (s->mem)
		s->mem->total -= s->held; /* also the server's input buffer */
	memset(s, 0, sizeof(*s));
}
