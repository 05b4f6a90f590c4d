// SPDX-License-Identifier: MIT
/*
 * rdmx bench: the two ends of one test on one endpoint (see bench_ep.h for
 * the wire protocol).
 *
 * Latency: each round trip is timed from before the send until the echo is
 * received (CLOCK_MONOTONIC). Bandwidth: the client sends as fast as the
 * endpoint takes messages (an rdmx connection holds at most send_depth =
 * --tx-depth sends in flight), then END; the clock stops when the ACK
 * arrives, which the server sends after it received every message, so only
 * delivered messages are counted. Warmup runs as its own untimed phase.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "bench_ep.h"

/* ------------------------------------------------------------- the server */

static int serve_ctrl(struct bench_serve *s, const struct bench_ctrl *c,
		      atomic_bool *shutdown)
{
	struct bench_ctrl ack = { .op = BENCH_OP_ACK };
	struct bench_cpu now, d;

	switch (c->op) {
	case BENCH_OP_BEGIN_LAT:
	case BENCH_OP_BEGIN_BW:
		if (c->count != s->single_receiver) {
			cli_set_err(&s->ep->err, "the client %s --single-receiver, "
				    "this server %s: start both the same way",
				    c->count ? "runs" : "runs without",
				    s->single_receiver ? "does" : "does not");
			return -EPROTO;
		}
		s->mode = c->op;
		s->size = c->size;
		s->count = s->bad = 0;
		bench_thread_cpu(&s->cpu0);
		return 0;
	case BENCH_OP_END:
		bench_thread_cpu(&now);
		d = bench_cpu_since(&s->cpu0, &now);
		ack.size = s->size;
		ack.count = s->count;
		ack.bad = s->bad;
		ack.user_ns = d.user_ns;
		ack.sys_ns = d.sys_ns;
		s->mode = 0;
		s->tests++;
		return bench_send_ctrl(s->ep, &ack);
	case BENCH_OP_SHUTDOWN:
		atomic_store(shutdown, true);
		return 0;
	default:
		cli_set_err(&s->ep->err, "protocol error: control %u from a client",
			    c->op);
		return -EPROTO;
	}
}

static int serve_data(struct bench_serve *s, const struct bench_rx *rx)
{
	uint64_t seq = bench_rx_seq(rx);

	if (!s->mode) {
		cli_set_err(&s->ep->err, "protocol error: data outside a test");
		return -EPROTO;
	}
	if (rx->len != s->size || (rx->len >= 8 && seq != s->count))
		s->bad++;
	s->count++;
	if (s->mode == BENCH_OP_BEGIN_LAT)
		return bench_send_data(s->ep, rx->len, seq);
	return 0;
}

int bench_serve_rx(struct bench_serve *s, const struct bench_rx *rx,
		   atomic_bool *shutdown)
{
	struct bench_ctrl c;
	int rc;

	if (!rx->ctrl)
		return serve_data(s, rx);
	rc = bench_rx_ctrl(s->ep, rx, &c);
	return rc ? rc : serve_ctrl(s, &c, shutdown);
}

int bench_serve_ep(struct bench_ep *ep, atomic_bool *shutdown, uint64_t *tests)
{
	struct bench_serve s = { .ep = ep };
	struct bench_rx rx;
	int rc;

	for (;;) {
		rc = ep->ops->recv(ep, &rx);
		if (rc == -ECONNRESET)
			return 0;
		if (!rc)
			rc = bench_serve_rx(&s, &rx, shutdown);
		*tests = s.tests;
		if (rc)
			return rc;
	}
}

/* ------------------------------------------------------------- the client */

static bool phase_more(const struct bench_job *j, uint64_t i, uint64_t n,
		       uint64_t t0)
{
	if (bench_stopped())
		return false;
	if (n)
		return i < n;
	/* --duration: look at the clock every 16 messages */
	return (i & 15) || bench_now_ns() - t0 < j->duration_ns;
}

static int round_trip(struct bench_job *j, uint64_t seq, uint64_t *ns)
{
	struct bench_ep *ep = j->ep;
	struct bench_rx rx;
	uint64_t t0;
	int rc;

	t0 = bench_now_ns();
	rc = bench_send_data(ep, j->size, seq);
	if (!rc)
		rc = ep->ops->recv(ep, &rx);
	*ns = bench_now_ns() - t0;
	if (rc == -ECONNRESET)
		cli_set_err(&ep->err, "the server disconnected");
	if (rc)
		return rc;
	if (rx.ctrl || rx.len != j->size || (rx.len >= 8 && bench_rx_seq(&rx) != seq)) {
		cli_set_err(&ep->err, "echo %" PRIu64 " is wrong: %zu bytes%s, "
			    "expected %" PRIu64, seq, rx.len,
			    rx.ctrl ? " of control" : "", j->size);
		return -EPROTO;
	}
	return 0;
}

/* The message loop of one phase; *@sent gets the number of messages. */
static int phase_loop(struct bench_job *j, uint64_t n, bool timed,
		      uint64_t t0, uint64_t *sent)
{
	struct bench_progress pg;
	uint64_t i, ns;
	int rc = 0;

	bench_progress_start(&pg, timed ? j->progress : BENCH_PROGRESS_NEVER, j->label);
	for (i = 0; phase_more(j, i, n, t0); i++) {
		if (j->mode == BENCH_LAT) {
			rc = round_trip(j, i, &ns);
			if (!rc && timed)
				hist_record(j->rtt, ns);
		} else { /* bursts of j->batch; END, a plain send, ends the last */
			j->ep->more = j->batch > 1 && (i + 1) % j->batch;
			rc = bench_send_data(j->ep, j->size, i);
		}
		if (rc)
			break;
		if (!(i & 63))
			bench_progress_tick(&pg, i, n, j->duration_ns);
	}
	bench_progress_end(&pg);
	j->ep->more = false;
	*sent = i;
	return rc;
}

static int check_ack(struct bench_job *j, const struct bench_ctrl *ack,
		     uint64_t sent)
{
	if (ack->count == sent && !ack->bad && ack->size == j->size)
		return 0;
	cli_set_err(&j->ep->err, "the server received %" PRIu64 " messages of %"
		    PRIu64 " bytes (%" PRIu64 " wrong), the client sent %" PRIu64
		    " of %" PRIu64, ack->count, ack->size, ack->bad, sent, j->size);
	return -EPROTO;
}

/* One phase: BEGIN, @n messages (0: for duration_ns), END, ACK. */
static int phase(struct bench_job *j, uint64_t n, bool timed)
{
	struct bench_ctrl c = { .size = j->size }, ack;
	struct bench_cpu cpu0, cpu1;
	uint64_t t0, t1, sent = 0;
	int rc;

	c.op = j->mode == BENCH_LAT ? BENCH_OP_BEGIN_LAT : BENCH_OP_BEGIN_BW;
	c.count = j->single_receiver; /* BEGIN: the kind of server expected */
	rc = bench_send_ctrl(j->ep, &c);
	if (rc)
		return rc;
	bench_thread_cpu(&cpu0);
	t0 = bench_now_ns();
	rc = phase_loop(j, n, timed, t0, &sent);
	t1 = bench_now_ns();
	if (!rc && bench_stopped()) {
		cli_set_err(&j->ep->err, "interrupted by signal %d", bench_stopped());
		rc = -EINTR;
	}
	if (rc)
		return rc;
	c.op = BENCH_OP_END;
	rc = bench_send_ctrl(j->ep, &c);
	if (!rc)
		rc = bench_recv_ack(j->ep, &ack);
	if (rc)
		return rc;
	if (j->mode == BENCH_BW)
		t1 = bench_now_ns(); /* receiver-confirmed */
	bench_thread_cpu(&cpu1);
	rc = check_ack(j, &ack, sent);
	if (rc || !timed)
		return rc;
	j->msgs = sent;
	j->t0 = t0;
	j->t1 = t1;
	j->cpu = bench_cpu_since(&cpu0, &cpu1);
	j->server.user_ns = ack.user_ns;
	j->server.sys_ns = ack.sys_ns;
	return 0;
}

int bench_job_run(struct bench_job *j)
{
	int rc = 0;

	j->msgs = j->t0 = j->t1 = 0;
	if (j->warmup)
		rc = phase(j, j->warmup, false);
	if (!rc)
		rc = phase(j, j->iters, true);
	return rc;
}
