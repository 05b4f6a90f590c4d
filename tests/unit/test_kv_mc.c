/* SPDX-License-Identifier: MIT */
/*
 * The memcached front door: the protocol session (src/kv/mc_proto.c) fed
 * directly, every command and error with its exact reply, input split at
 * every byte, hostile lines; and the server (src/kv/mc_server.c, through
 * include/rdmx/kv.h) with real sockets: a client that never sends its data
 * block, one that sends an endless line, one past max_clients, while
 * another is served. (kv_mc_vs_memcached compares all replies with
 * Debian's memcached.)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <rdmx/kv.h>

#include "kv/mc_proto.h"
#include "unit/mc_sock.h"

struct fix {
	struct rdmx__kv *kv;
	struct rdmx__mc_sess s;
	char out[1 << 16];
};

static struct fix *fix_new(uint64_t cap, uint32_t item_max)
{
	struct rdmx__kv_opts o = { .capacity = cap, .memory = 1 << 16,
				   .inline_max = 64, .item_max = item_max };
	struct fix *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(rdmx__kv_create(&o, &f->kv), 0);
	assert_int_equal(rdmx__mc_sess_init(&f->s, f->kv, NULL, "test"), 0);
	return f;
}

static void fix_free(struct fix *f)
{
	rdmx__mc_sess_fini(&f->s);
	rdmx__kv_destroy(f->kv);
	free(f);
}

/* Feed @in whole; the replies as a string. */
static const char *run(struct fix *f, const char *in)
{
	size_t n = strlen(in), used = rdmx__mc_execute(&f->s, (const uint8_t *)in, n);

	if (!f->s.closing)
		assert_int_equal(used, n);
	assert_true(f->s.out_len < sizeof(f->out));
	memcpy(f->out, f->s.out, f->s.out_len);
	f->out[f->s.out_len] = 0;
	rdmx__mc_out_consume(&f->s, f->s.out_len);
	return f->out;
}

/* One input and the exact replies it must get. */
struct exch {
	const char *in, *want;
};

static void exchanges(struct fix *f, const struct exch *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		assert_string_equal(run(f, x[i].in), x[i].want);
}

static const struct exch storage[] = {
	{ "set a 5 0 3\r\nabc\r\n", "STORED\r\n" },
	{ "get a\r\n", "VALUE a 5 3\r\nabc\r\nEND\r\n" },
	{ "gets a\r\n", "VALUE a 5 3 1\r\nabc\r\nEND\r\n" },
	{ "add a 0 0 1\r\nx\r\n", "NOT_STORED\r\n" },
	{ "replace b 0 0 1\r\nx\r\n", "NOT_STORED\r\n" },
	{ "add b 0 0 1\r\nx\r\n", "STORED\r\n" },
	{ "replace b 1 0 2\r\nyy\r\n", "STORED\r\n" },
	{ "append a 9 0 2\r\nde\r\nprepend a 9 0 1\r\n_\r\n", "STORED\r\nSTORED\r\n" },
	{ "get a b zz\r\n", "VALUE a 5 6\r\n_abcde\r\nVALUE b 1 2\r\nyy\r\nEND\r\n" },
	{ "cas a 0 0 1 99\r\nq\r\n", "EXISTS\r\n" },
	{ "cas zz 0 0 1 1\r\nq\r\n", "NOT_FOUND\r\n" },
	{ "cas a 0 0 1 5\r\nq\r\nget a\r\n", "STORED\r\nVALUE a 0 1\r\nq\r\nEND\r\n" },
	{ "set a 0 0 1 noreply\r\nz\r\nadd a 0 0 1 noreply\r\nz\r\n", "" },
	{ "set a 0 0 5\nhello\r\nget a\n", "STORED\r\nVALUE a 0 5\r\nhello\r\nEND\r\n" },
};

static const struct exch others[] = {
	{ "set n 0 0 2\r\n10\r\nincr n 5\r\ndecr n 7\r\nget n\r\n",
	  "STORED\r\n15\r\n8\r\nVALUE n 0 2\r\n8 \r\nEND\r\n" },
	{ "incr n x\r\nincr zz 1\r\nincr n 1 noreply\r\n",
	  "CLIENT_ERROR invalid numeric delta argument\r\nNOT_FOUND\r\n" },
	{ "set s 0 0 1\r\nx\r\nincr s 1\r\n",
	  "STORED\r\nCLIENT_ERROR cannot increment or decrement non-numeric value\r\n" },
	{ "touch n 100\r\ntouch zz 1\r\ntouch n x\r\n",
	  "TOUCHED\r\nNOT_FOUND\r\nCLIENT_ERROR invalid exptime argument\r\n" },
	{ "delete n\r\ndelete n\r\ndelete s 0\r\ndelete s 5\r\n",
	  "DELETED\r\nNOT_FOUND\r\nDELETED\r\n"
	  "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n" },
	{ "set t 0 0 1\r\n1\r\nflush_all\r\nget t\r\n", "STORED\r\nOK\r\nEND\r\n" },
	{ "flush_all x\r\nflush_all 0 noreply\r\n", "CLIENT_ERROR invalid exptime argument\r\n" },
	{ "verbosity 1\r\nverbosity\r\nverbosity x\r\nversion\r\n",
	  "OK\r\nERROR\r\nCLIENT_ERROR bad command line format\r\nVERSION test\r\n" },
	{ "stats nope\r\n", "ERROR\r\n" },
};

static void test_storage(void **state)
{
	struct fix *f = fix_new(16, 1024);

	(void)state;
	exchanges(f, storage, sizeof(storage) / sizeof(storage[0]));
	fix_free(f);
}

static void test_other_commands(void **state)
{
	struct fix *f = fix_new(16, 1024);

	(void)state;
	exchanges(f, others, sizeof(others) / sizeof(others[0]));
	assert_non_null(strstr(run(f, "set t 0 0 1\r\n1\r\nstats\r\n"), "STAT curr_items 1\r\n"));
	assert_string_equal(f->out + strlen(f->out) - 5, "END\r\n");
	assert_string_equal(run(f, "quit\r\nget t\r\n"), ""); /* the rest is never run */
	assert_true(f->s.closing);
	fix_free(f);
}

static void test_errors(void **state)
{
	struct fix *f = fix_new(2, 100);
	char line[400];

	(void)state;
	assert_string_equal(run(f, "\r\nfoo\r\nGET a\r\nset a 0 0\r\nget\r\n"),
			    "ERROR\r\nERROR\r\nERROR\r\nERROR\r\nERROR\r\n");
	/* A refused command line does not swallow its data (memcached). */
	assert_string_equal(run(f, "set a x 0 1\r\nz\r\n"),
			    "CLIENT_ERROR bad command line format\r\nERROR\r\n");
	assert_string_equal(run(f, "set a 0 0 -1\r\n"), "CLIENT_ERROR bad command line format\r\n");
	snprintf(line, sizeof(line), "set %0251d 0 0 1\r\nv\r\n", 0);
	assert_string_equal(run(f, line), "CLIENT_ERROR bad command line format\r\nERROR\r\n");
	snprintf(line, sizeof(line), "get a %0251d\r\n", 0);
	assert_string_equal(run(f, line), "CLIENT_ERROR bad command line format\r\n");
	/* Wrong data lengths. */
	assert_string_equal(run(f, "set a 0 0 3\r\nabcdef\r\n"),
			    "CLIENT_ERROR bad data chunk\r\nERROR\r\n");
	/* Too large: refused, its block swallowed, a set's old value dropped. */
	assert_string_equal(run(f, "set a 0 0 1\r\n1\r\n"), "STORED\r\n");
	memset(line, 'v', 200);
	memcpy(line, "set a 0 0 200\r\n", 15);
	strcpy(line + 215, "\r\nget a\r\n");
	assert_string_equal(run(f, line), "SERVER_ERROR object too large for cache\r\nEND\r\n");
	/* A full table: a clear error, nothing evicted. */
	assert_string_equal(run(f, "set a 0 0 1\r\n1\r\nset b 0 0 1\r\n2\r\nset c 0 0 1\r\n3\r\n"),
			    "STORED\r\nSTORED\r\nSERVER_ERROR out of memory storing object\r\n");
	assert_string_equal(run(f, "get a b\r\n"),
			    "VALUE a 0 1\r\n1\r\nVALUE b 0 1\r\n2\r\nEND\r\n");
	/* Binary garbage is a command like any other. */
	assert_string_equal(run(f, "\x01\x02\xff\xfe\x7fzz\r\nget b\r\n"),
			    "ERROR\r\nVALUE b 0 1\r\n2\r\nEND\r\n");
	assert_false(f->s.closing);
	fix_free(f);
}

/* The same input split at every byte: the same replies. */
static void test_split(void **state)
{
	static const char in[] = "set a 1 0 5\r\nhello\r\nget a a\r\nappend a 0 0 1\r\n!\r\n"
				 "gets a\r\nincr a 1\r\ndelete a\r\nset n 0 0 1\r\n7\r\nincr n 3\r\n";
	struct fix *whole = fix_new(16, 1024), *bytes = fix_new(16, 1024);
	uint8_t buf[sizeof(in)];
	size_t have = 0;

	(void)state;
	run(whole, in);
	for (size_t i = 0; i < sizeof(in) - 1; i++) {
		size_t used;

		buf[have++] = (uint8_t)in[i];
		used = rdmx__mc_execute(&bytes->s, buf, have);
		memmove(buf, buf + used, have - used);
		have -= used;
	}
	assert_int_equal(have, 0);
	assert_int_equal(bytes->s.out_len, strlen(whole->out));
	assert_memory_equal(bytes->s.out, whole->out, bytes->s.out_len);
	fix_free(whole);
	fix_free(bytes);
}

static void test_long_lines(void **state)
{
	struct fix *f = fix_new(16, 1024);
	char *line = malloc(RDMX__MC_LINE_MAX + 100);

	(void)state;
	/* A get line with no newline yet may grow past RDMX__MC_LINE_MAX... */
	memset(line, 'k', RDMX__MC_LINE_MAX + 100);
	memcpy(line, "get ", 4);
	assert_int_equal(rdmx__mc_execute(&f->s, (uint8_t *)line, RDMX__MC_LINE_MAX + 100), 0);
	assert_false(f->s.closing);
	/* ...any other line that long without one closes the connection. */
	memcpy(line, "set ", 4);
	assert_int_equal(rdmx__mc_execute(&f->s, (uint8_t *)line, RDMX__MC_LINE_MAX + 100),
			 RDMX__MC_LINE_MAX + 100);
	assert_true(f->s.closing);
	assert_int_equal(f->s.out_len, 0);
	free(line);
	fix_free(f);
}

/*
 * Client flags are 32 bits: 2^32 is refused as memcached refuses a number
 * it cannot read (memcached 1.6 itself stores it as 0), 2^32-1 kept.
 */
static void test_flags_range(void **state)
{
	struct fix *f = fix_new(16, 1024);

	(void)state;
	assert_string_equal(run(f, "set a 4294967296 0 1\r\nz\r\n"),
			    "CLIENT_ERROR bad command line format\r\nERROR\r\n");
	assert_string_equal(run(f, "cas a 99999999999 0 1 1\r\nz\r\n"),
			    "CLIENT_ERROR bad command line format\r\nERROR\r\n");
	assert_string_equal(run(f, "set a 4294967295 0 1\r\nz\r\nget a\r\n"),
			    "STORED\r\nVALUE a 4294967295 1\r\nz\r\nEND\r\n");
	fix_free(f);
}

/*
 * A get line trickled in chunks of @chunk bytes, as a server hands the
 * session its input (the partial line kept at the start, more bytes
 * after it): every byte is searched for the newline once, so the bytes
 * searched are the line's length, not its square over the chunk size.
 */
static void trickle(size_t total, size_t chunk)
{
	struct fix *f = fix_new(16, 1024);
	uint8_t *line = malloc(total);
	size_t have = 0;

	memset(line, 'k', total);
	for (size_t i = 4; i + 1 < total; i += 2)
		line[i] = ' ';
	memcpy(line, "get ", 4);
	memcpy(line + total - 2, "\r\n", 2);
	while (have < total) {
		size_t n = total - have < chunk ? total - have : chunk, used;

		have += n;
		used = rdmx__mc_execute(&f->s, line, have);
		assert_true(used == 0 || used == total);
	}
	fprintf(stderr, "trickled %zu-byte get line in %zu-byte chunks: %llu bytes "
		"searched\n", total, chunk, (unsigned long long)f->s.scan_bytes);
	assert_int_equal(f->s.scan_bytes, total);
	assert_memory_equal(f->s.out + f->s.out_len - 5, "END\r\n", 5);
	free(line);
	fix_free(f);
}

static void test_trickle_linear(void **state)
{
	(void)state;
	trickle(RDMX__MC_GET_LINE_MAX - 64, 64);
	trickle(100000, 7);
}

/*
 * The memory caps at the session: a data block past the connection's cap
 * is refused ("out of memory storing object", its block swallowed), a
 * get reply past it ends the get with memcached's "out of memory writing
 * get response" (the replies of that get dropped); what the session held
 * goes back when it ends.
 */
static void test_session_caps(void **state)
{
	struct rdmx__mc_mem m = { .conn_max = 1 << 20, .total_max = 1 << 20 };
	struct fix *f = fix_new(16, 60000);
	static char set[30100];
	int n = snprintf(set, sizeof(set), "set big 0 0 30000\r\n");

	(void)state;
	f->s.mem = &m;
	memset(set + n, 'v', 30000);
	memcpy(set + n + 30000, "\r\n", 3);
	assert_string_equal(run(f, "set s 0 0 2\r\nhi\r\n"), "STORED\r\n");
	assert_string_equal(run(f, set), "STORED\r\n");
	m.conn_max = 16384;
	assert_string_equal(run(f, set),
			    "SERVER_ERROR out of memory storing object\r\n");
	assert_string_equal(run(f, "get s\r\n"), "VALUE s 0 2\r\nhi\r\nEND\r\n");
	assert_string_equal(run(f, "set big 0 0 1\r\nb\r\n"), "STORED\r\n");
	m.conn_max = 1 << 20;
	assert_string_equal(run(f, set), "STORED\r\n");
	m.conn_max = 16384;
	assert_string_equal(run(f, "get s big s\r\n"),
			    "SERVER_ERROR out of memory writing get response\r\n");
	assert_false(f->s.closing);
	assert_string_equal(run(f, "get s\r\n"), "VALUE s 0 2\r\nhi\r\nEND\r\n");
	assert_true(m.refused >= 2);
	rdmx__mc_sess_fini(&f->s);
	assert_int_equal(m.total, 0);
	assert_int_equal(rdmx__mc_sess_init(&f->s, f->kv, NULL, "test"), 0);
	fix_free(f);
}

/*
 * memcached's -R: a session whose turn allows 2 commands runs 2 of a
 * pipeline of 5 (a set and its data block are one), the rest at its next
 * turns, with the same replies.
 */
static void test_turn_bound(void **state)
{
	static const char in[] = "version\r\nset a 0 0 1\r\nx\r\nget a\r\n"
				 "version\r\ndelete a\r\n";
	struct fix *f = fix_new(16, 1024);
	size_t used = 0, n = sizeof(in) - 1, turns = 0;

	(void)state;
	f->s.turn_max = 2;
	while (used < n) {
		size_t k;

		f->s.turn_left = f->s.turn_max;
		k = rdmx__mc_execute(&f->s, (const uint8_t *)in + used, n - used);
		assert_int_equal(f->s.turn_left, used + k < n ? 0 : 1);
		used += k;
		turns++;
	}
	assert_int_equal(turns, 3);
	assert_int_equal(f->s.out_len, strlen("VERSION test\r\nSTORED\r\nVALUE a 0 1\r\n"
					      "x\r\nEND\r\nVERSION test\r\nDELETED\r\n"));
	fix_free(f);
}

/* ------------------------------------------------------------ the server */

/*
 * One get line naming a big value many times (2 bytes a key: a 1 MiB line
 * names half a million) must not build all the replies at once: the
 * session's output stays near RDMX__MC_OUT_HIGH, the line resumes where it
 * stopped once the output is sent, and the replies are all there.
 */
static void test_get_amplify(void **state)
{
	enum { V = 60000, K = 64 };
	struct rdmx__kv_opts o = { .capacity = 16, .memory = 1 << 20, .inline_max = 64,
				   .item_max = 1 << 16 };
	static char set[V + 64], line[8 + 2 * K];
	size_t n, used = 0, total = 0, peak = 0, one;
	struct rdmx__mc_sess s;
	struct rdmx__kv *kv;
	char head[64];

	(void)state;
	assert_int_equal(rdmx__kv_create(&o, &kv), 0);
	assert_int_equal(rdmx__mc_sess_init(&s, kv, NULL, "test"), 0);
	n = (size_t)snprintf(set, sizeof(set), "set k 0 0 %d\r\n", V);
	memset(set + n, 'x', V);
	memcpy(set + n + V, "\r\n", 2);
	assert_int_equal(rdmx__mc_execute(&s, (const uint8_t *)set, n + V + 2), n + V + 2);
	rdmx__mc_out_consume(&s, s.out_len);
	n = (size_t)snprintf(line, sizeof(line), "get");
	for (int i = 0; i < K; i++)
		n += (size_t)snprintf(line + n, sizeof(line) - n, " k");
	n += (size_t)snprintf(line + n, sizeof(line) - n, "\r\n");
	for (int i = 0; i < 1000 && used < n; i++) {
		used += rdmx__mc_execute(&s, (const uint8_t *)line + used, n - used);
		peak = s.out_len > peak ? s.out_len : peak;
		total += s.out_len;
		if (used == n)
			assert_memory_equal(s.out + s.out_len - 5, "END\r\n", 5);
		rdmx__mc_out_consume(&s, s.out_len);
	}
	one = (size_t)snprintf(head, sizeof(head), "VALUE k 0 %d\r\n", V) + V + 2;
	assert_int_equal(used, n);
	assert_true(peak <= RDMX__MC_OUT_HIGH + one);
	assert_int_equal(total, K * one + 5);
	rdmx__mc_sess_fini(&s);
	rdmx__kv_destroy(kv);
}

static void test_server_hostile(void **state)
{
	struct rdmx_kv_server_opts o;
	rdmx_kv_server *srv;
	pthread_t t;
	char buf[4096], *junk = calloc(1, 8192);
	int stall, endless, good, extra, port;
	void *rc;

	(void)state;
	rdmx_kv_server_opts_init(&o);
	o.capacity = 64;
	o.memory = 1 << 20;
	o.memcached_port = 0;
	o.max_clients = 4;
	o.max_clients_per_peer = 4;
	assert_int_equal(rdmx_kv_server_create(&o, &srv), 0);
	port = rdmx_kv_server_port(srv);
	assert_true(port > 0);
	assert_int_equal(pthread_create(&t, NULL, mc_serve, srv), 0);
	stall = mc_dial(port);
	mc_say(stall, "set w 0 0 10\r\nabc"); /* and never the rest */
	endless = mc_dial(port);
	memset(junk, 'x', 8191);
	mc_say(endless, junk);
	good = mc_dial(port);
	mc_say(good, "set k 0 0 2\r\nok\r\nget k w\r\n");
	assert_string_equal(mc_await(good, "END\r\n", buf, sizeof(buf)),
			    "STORED\r\nVALUE k 0 2\r\nok\r\nEND\r\n");
	assert_string_equal(mc_await(endless, "never", buf, sizeof(buf)), ""); /* closed */
	extra = mc_dial(port);
	mc_say(extra, "\xff\xfe\x01\r\nversion\r\n");
	assert_non_null(strstr(mc_await(extra, "VERSION", buf, sizeof(buf)), "ERROR\r\nVERSION "));
	mc_say(stall, "defghij\r\nget w\r\n"); /* the stalled client finishes */
	assert_string_equal(mc_await(stall, "END\r\n", buf, sizeof(buf)),
			    "STORED\r\nVALUE w 0 10\r\nabcdefghij\r\nEND\r\n");
	rdmx_kv_server_stop(srv);
	pthread_join(t, &rc);
	assert_int_equal((intptr_t)rc, 0);
	close(stall);
	close(endless);
	close(good);
	close(extra);
	rdmx_kv_server_destroy(srv);
	free(junk);
}

/* (Its options filled by hand, no size: the struct's first version.) */
static void test_server_max_clients(void **state)
{
	struct rdmx_kv_server_opts o = { .capacity = 8, .memcached_addr = "127.0.0.1",
					 .memcached_port = 0, .max_clients = 1 };
	rdmx_kv_server *srv;
	pthread_t t;
	char buf[256];
	int a, b;

	(void)state;
	assert_int_equal(rdmx_kv_server_create(&o, &srv), 0);
	assert_int_equal(pthread_create(&t, NULL, mc_serve, srv), 0);
	a = mc_dial(rdmx_kv_server_port(srv));
	mc_say(a, "version\r\n");
	mc_await(a, "\r\n", buf, sizeof(buf));
	b = mc_dial(rdmx_kv_server_port(srv));
	assert_string_equal(mc_await(b, "\r\n", buf, sizeof(buf)),
			    "ERROR Too many open connections\r\n");
	rdmx_kv_server_stop(srv);
	pthread_join(t, NULL);
	close(a);
	close(b);
	rdmx_kv_server_destroy(srv);
	o.memcached_addr = "not-an-address";
	assert_int_equal(rdmx_kv_server_create(&o, &srv), -EINVAL);
}

/*
 * One address takes at most max_clients_per_peer of the front door's
 * connections (default a quarter of max_clients): the next from it is
 * refused with a line naming the cap; -1 lifts it (benchmarks). (On main
 * one host could take every connection.)
 */
static void test_server_peer_cap(void **state)
{
	struct rdmx_kv_server_opts o;
	rdmx_kv_server *srv;
	pthread_t t;
	char buf[256];
	int fd[3];

	(void)state;
	rdmx_kv_server_opts_init(&o);
	o.capacity = 8;
	o.memcached_port = 0;
	o.max_clients = 8;
	for (int lift = 0; lift < 2; lift++) {
		o.max_clients_per_peer = lift ? -1 : 0; /* 0: the default, 8 / 4 */
		assert_int_equal(rdmx_kv_server_create(&o, &srv), 0);
		assert_int_equal(pthread_create(&t, NULL, mc_serve, srv), 0);
		for (int i = 0; i < 3; i++) {
			fd[i] = mc_dial(rdmx_kv_server_port(srv));
			mc_say(fd[i], "version\r\n");
		}
		assert_non_null(strstr(mc_await(fd[0], "\r\n", buf, sizeof(buf)), "VERSION"));
		assert_non_null(strstr(mc_await(fd[1], "\r\n", buf, sizeof(buf)), "VERSION"));
		mc_await(fd[2], "\r\n", buf, sizeof(buf));
		if (!lift) {
			print_message("third client from one address: %s", buf);
			assert_string_equal(buf, "ERROR Too many open connections from "
					    "127.0.0.1 (max_clients_per_peer 2)\r\n");
		} else {
			assert_non_null(strstr(buf, "VERSION"));
		}
		rdmx_kv_server_stop(srv);
		pthread_join(t, NULL);
		for (int i = 0; i < 3; i++)
			close(fd[i]);
		rdmx_kv_server_destroy(srv);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_storage),
		cmocka_unit_test(test_other_commands),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_long_lines),
		cmocka_unit_test(test_get_amplify),
		cmocka_unit_test(test_flags_range),
		cmocka_unit_test(test_trickle_linear),
		cmocka_unit_test(test_session_caps),
		cmocka_unit_test(test_turn_bound),
		cmocka_unit_test(test_server_hostile),
		cmocka_unit_test(test_server_max_clients),
		cmocka_unit_test(test_server_peer_cap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
