/* SPDX-License-Identifier: MIT */
/*
 * Admission of RPC clients (issue 24 §3): the slots rfp and herd register
 * for a client count against the listener's max_mem, and a window is a
 * hard bound on a client's pending requests. Cases of test_rpc (main).
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rpc_common.h"

static const char *transport(void)
{
	const char *t = getenv("RPC_TRANSPORT");

	return t && *t ? t : "msg";
}

/* rfp and herd: the transports whose server registers slots per client. */
static int slotted(void)
{
	return !strcmp(transport(), "rfp") || !strcmp(transport(), "herd");
}

/* A dial of @v's server refused: the bytes it asked for, from its message. */
static uint64_t refused_bytes(struct srv *v)
{
	unsigned long long asked = 0;
	const char *e, *at;
	int rc;

	assert_null(dial(v, contract, NMETHODS, 4, &rc));
	assert_int_not_equal(rc, 0);
	e = rdmx_last_error();
	at = strstr(e, "asks for ");
	if (!at || sscanf(at, "asks for %llu bytes", &asked) != 1 || !strstr(e, "max_mem"))
		fail_msg("a refused dial's message names no cap and no bytes: %s", e);
	return asked;
}

/* A dial of @v's server with @window, retried while the server is still
 * letting a closed client go (its charge comes back when it is freed). */
static rdmx_rpc_client *dial_retry(struct srv *v, uint32_t window)
{
	rdmx_rpc_client *c = NULL;
	int rc = -1;

	for (int i = 0; i < WAIT_MS / 10 && rc; i++) {
		c = dial(v, contract, NMETHODS, window, &rc);
		if (rc)
			usleep(10000);
	}
	assert_int_equal(rc, 0);
	return c;
}

/*
 * herd: a client is charged the server's window of slots at its dial and
 * given back those it does not set up: at 2.5 dials' charge, three clients
 * of window 4 (each holding 60 slots less) get in, the fourth is refused.
 */
static void herd_small_windows(struct srv *v, uint64_t one)
{
	rdmx_rpc_client *c[3];

	c[0] = dial_retry(v, 4); /* the clients before may still be leaving */
	c[1] = dial_ok(v, 4);
	c[2] = dial_ok(v, 4);
	assert_int_equal(refused_bytes(v), one);
	print_message("herd: three clients of window 4 in, the fourth refused\n");
	for (int i = 0; i < 3; i++) {
		echo_once(c[i], 100, (uint64_t)i);
		rdmx_rpc_client_destroy(c[i]);
	}
}

/*
 * Every byte a server registers for a client counts against max_mem: a
 * dial is charged its connection's buffers and, for rfp and herd, the
 * slots of the server's window. The charge per dial is printed; with
 * max_mem at two and a half of them, the third dial is refused naming the
 * cap and the bytes asked while the first two are served, and a client
 * that leaves gives its share back. (On main, rfp's and herd's slots were
 * not counted: an rfp client of a 256 KiB method and window 64 pinned
 * 32 MiB beyond the cap.)
 */
void t_admit_mem(void **state)
{
	struct rdmx_listener_opts lo;
	rdmx_rpc_client *a, *b;
	uint64_t one, slots;
	struct srv v;

	(void)state;
	srv_start(&v, 1);
	rdmx_listener_opts_init(&lo);
	lo.max_mem = 1;
	assert_int_equal(rdmx_rpc_server_set_listener_opts(v.s, &lo), 0);
	one = refused_bytes(&v);
	/* rfp: a request and a response slot a call of the window; herd: a
	 * request slot; each at least the largest request frame */
	slots = (uint64_t)srv_window * (RPC_HDR + MAX_ECHO) *
		(!strcmp(transport(), "rfp") ? 2 : 1);
	print_message("%s: %" PRIu64 " bytes charged per dial (window %u; slots at least "
		      "%" PRIu64 ")\n", transport(), one, srv_window, slotted() ? slots : 0);
	if (slotted())
		assert_true(one > slots);
	lo.max_mem = 2 * one + one / 2;
	assert_int_equal(rdmx_rpc_server_set_listener_opts(v.s, &lo), 0);
	a = dial_ok(&v, srv_window);
	b = dial_ok(&v, srv_window);
	assert_int_equal(refused_bytes(&v), one);
	print_message("%s: third dial refused: %s\n", transport(), rdmx_last_error());
	echo_once(a, 100, 1);
	echo_once(b, 100, 2);
	rdmx_rpc_client_destroy(a);
	a = dial_retry(&v, srv_window);
	echo_once(a, 100, 3);
	rdmx_rpc_client_destroy(a);
	rdmx_rpc_client_destroy(b);
	if (!strcmp(transport(), "herd"))
		herd_small_windows(&v, one);
	srv_stop(&v);
}

/* A request of method M_HOLD for @call, raw, into @c's slot @slot. */
static void poke_hold(rdmx_rpc_client *c, uint32_t slot, uint64_t call)
{
	struct rpc_hdr h = { .kind = RPC_REQ, .method = M_HOLD, .len = 1, .call = call };
	unsigned char buf[64] = { 0 };
	size_t n = RPC_HDR + 1;

	rdmx__rpc_hdr_put(buf, &h);
	buf[RPC_HDR] = 'w';
	if (!strcmp(transport(), "rfp")) {
		assert_int_equal(rdmx__rpc_rfp_poke(c, slot, buf, n), 0);
		return;
	}
	buf[n] = (unsigned char)n; /* herd's trailer: u32 length, the mark */
	buf[n + 4] = 1;
	assert_int_equal(rdmx__rpc_herd_poke(c, slot, buf, n + 5), 0);
}

/*
 * A window is a hard bound: a hostile client with two requests pending on
 * a server of window 2 writes a third (into a slot the server has already
 * taken a request from, for a call slot of its own): its connection is
 * failed, the requests held stay two, and a benign client keeps its calls.
 * (On main the third was served: one client could hold 4,096 pending
 * requests in one slot.)
 */
void t_admit_window(void **state)
{
	rdmx_rpc_client *good, *bad;
	struct srv v;

	(void)state;
	if (!slotted())
		skip(); /* msg: a request holds its receive buffer, the depth bounds them */
	srv_window = 2;
	srv_start(&v, 1);
	srv_window = 64;
	good = dial_ok(&v, 2);
	bad = dial_ok(&v, 2);
	poke_hold(bad, 0, 0);
	assert_int_equal(held(&v.hold, 1), 0);
	poke_hold(bad, 1, 1);
	assert_int_equal(held(&v.hold, 2), 0);
	poke_hold(bad, 0, 2);
	assert_int_equal(bad_wait(&v, 1), 0);
	if (!strstr(rdmx_rpc_server_error(v.s), "broke its window") ||
	    !strstr(rdmx_rpc_server_error(v.s), "connection #")) /* names it */
		fail_msg("%s", rdmx_rpc_server_error(v.s));
	print_message("%s: a third request on window 2 refused: %s\n", transport(),
		      rdmx_rpc_server_error(v.s));
	echo_once(good, 100, 1);
	pthread_mutex_lock(&v.hold.lock);
	assert_int_equal(v.hold.n, 2);
	pthread_mutex_unlock(&v.hold.lock);
	for (int i = 0; i < 2; i++)
		rdmx_rpc_respond(v.hold.req[i], 0, 0); /* to a client dropped: not sent */
	rdmx_rpc_client_destroy(bad);
	echo_once(good, 100, 2);
	rdmx_rpc_client_destroy(good);
	srv_stop(&v);
}
