/* SPDX-License-Identifier: MIT */
/*
 * Waiting: the one wait step every blocking call of the library takes,
 * and its deadline. A wait loop polls what it waits for (a CQ, a ring, a
 * listener's requests) and, when the poll finds nothing, calls
 * rdmx__wait_idle() once; every RDMX__WAIT_CHECK_EVERY spins, and before
 * every park, it is told to run its slow checks (the peer's liveness, the
 * deadline, a listener's shutdown), and then calls rdmx__wait_park(),
 * outside any lock. The checks come right after the poll and the park
 * after them: a peer that wrote and left during a park is seen by the
 * next poll before the check that finds it gone. rdmx__conn_wait() is
 * that loop step for one connection.
 *
 * Wait modes (enum rdmx_wait_mode):
 *  - spin: busy-poll; past SPIN_FREE polls, yield the CPU every
 *    SPIN_YIELD_EVERY polls (sched_yield returns at once when nobody else
 *    wants the core, and on a machine with more spinning threads than
 *    cores the spinner stops delaying the thread it waits for);
 *  - block: park from the first empty poll;
 *  - adaptive (the default): spin for spin_us microseconds (or twice
 *    the platform's wake lateness, see wake_late_us), then park; past
 *    spin_us the spin yields every SPIN_YIELD_EVERY polls: the lateness
 *    stretches the spin to milliseconds where sleeps wake late (a VM), and
 *    a spinner that keeps its core that long, on a machine with more
 *    waiting threads than cores, holds off the thread it waits for (the
 *    2-connection rows of rdmx bench: 4 threads on 2 vCPUs).
 * A park sleeps in the kernel, PARK_MIN_US at first, doubling up to
 * PARK_MAX_US while nothing comes, and then polls again: an idle waiter
 * wakes PARK_MAX_US apart, whatever the protocol, for any poll target
 * (CQ or ring memory) and needs nothing from the peer. What a park costs
 * is latency: a message that arrives while the waiter sleeps is seen when
 * the sleep ends, at most about twice as long after it arrived as the
 * waiter had been parked (bounded by PARK_MAX_US).
 *
 * A zero timeout ("poll once") that finds nothing returns rdmx__again():
 * -EAGAIN with no message formatted, so a poller pays nothing for it.
 */
#include <errno.h>
#include <sched.h>
#include <time.h>

#include "internal.h"

#define SPIN_FREE 4096u       /* spin mode: polls before the first yield */
#define SPIN_YIELD_EVERY 16u  /* then a yield every this many polls */
#define SPIN_CLOCK_EVERY 64u  /* adaptive: polls between two clock reads */
#define PARK_MIN_US 16u
#define PARK_MAX_US 4096u
#define SPIN_WAKE_MAX_US 2000u /* adaptive: the lateness counted at most */

/*
 * How late a park wakes beyond the time it asked for (timer slack, a
 * VM's emulated timer): an average over recent parks, process-wide, as
 * it is the platform's and not a connection's. Adaptive mode spins at
 * least twice that long: a waiter that parked answers its peer late by
 * that much, and a peer that spun less would park in turn - in a
 * request/response exchange the two sides would then park every time
 * (measured on rxe under qemu TCG: a 50 us spin against ~400 us wakes
 * gave a 500 us p50 round trip where spinning gave 34 us).
 */
static unsigned wake_late_us;

/*
 * The clock is read when a wait first has to wait (deadline_arm), not when
 * it starts: most calls on the fast path find their message or buffer on
 * the first poll, and a clock_gettime() per call was ~15% of send_recv's
 * instructions per message (bench/profile). The clock is the coarse one:
 * timeouts are milliseconds, a tick of resolution is plenty, and where the
 * clocksource is slow to read (hpet in a VM: a system call and an emulated
 * device access each time) the coarse clock still costs a memory read.
 */
#define DEADLINE_CLOCK CLOCK_MONOTONIC_COARSE
void rdmx__deadline_start(struct rdmx__deadline *d, int timeout_ms)
{
	d->forever = timeout_ms < 0;
	d->once = timeout_ms == 0;
	d->armed = 0;
	d->timeout_ms = timeout_ms;
	d->spins = 0;
	d->mode = RDMX_WAIT_ADAPTIVE;
	d->spin_us = RDMX__SPIN_US_DEFAULT;
	d->park_us = 0;
	d->parking = 0;
	d->yielding = 0;
	d->timed = 0;
}

void rdmx__deadline_mode(struct rdmx__deadline *d, uint8_t mode,
			 uint32_t spin_us)
{
	d->mode = mode == RDMX_WAIT_DEFAULT ? RDMX_WAIT_ADAPTIVE : mode;
	d->spin_us = spin_us;
}

void rdmx__wait_resolve(const rdmx_ctx *ctx, struct rdmx_conn_opts *o)
{
	if (o->wait_mode == RDMX_WAIT_DEFAULT)
		o->wait_mode = ctx->wait_mode;
	if (!o->spin_us)
		o->spin_us = ctx->spin_us;
}

static void deadline_arm(struct rdmx__deadline *d)
{
	clock_gettime(DEADLINE_CLOCK, &d->end);
	d->armed = 1;
	if (d->timeout_ms <= 0)
		return;
	d->end.tv_sec += d->timeout_ms / 1000;
	d->end.tv_nsec += (long)(d->timeout_ms % 1000) * 1000000L;
	if (d->end.tv_nsec >= 1000000000L) {
		d->end.tv_sec++;
		d->end.tv_nsec -= 1000000000L;
	}
}

int rdmx__deadline_left_ms(struct rdmx__deadline *d)
{
	struct timespec now;
	int64_t ms;

	if (d->forever)
		return INT32_MAX;
	if (!d->armed)
		deadline_arm(d);
	clock_gettime(DEADLINE_CLOCK, &now);
	ms = (int64_t)(d->end.tv_sec - now.tv_sec) * 1000 +
	     (d->end.tv_nsec - now.tv_nsec) / 1000000;
	if (ms <= 0)
		return 0;
	return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

int rdmx__deadline_passed(struct rdmx__deadline *d)
{
	if (d->forever || rdmx__deadline_left_ms(d) > 0)
		return 0;
	return rdmx__fail(-ETIMEDOUT, "timed out after %d ms", d->timeout_ms);
}

static int64_t now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

/* Adaptive: how long to spin - spin_us, or twice the wake lateness. */
static int64_t spin_budget_us(const struct rdmx__deadline *d)
{
	unsigned late = __atomic_load_n(&wake_late_us, __ATOMIC_RELAXED);

	if (late > SPIN_WAKE_MAX_US)
		late = SPIN_WAKE_MAX_US;
	return 2 * (int64_t)late > (int64_t)d->spin_us ? 2 * (int64_t)late : d->spin_us;
}

/* Adaptive: 1 once the spin phase (since the first empty poll) is over.
 * The clock is read every SPIN_CLOCK_EVERY polls; past spin_us the spin
 * yields (see rdmx__wait_idle). */
static int spin_over(struct rdmx__deadline *d)
{
	int64_t spun;

	if (d->spins == 1)
		d->spin_from_us = now_us();
	if (d->spins % SPIN_CLOCK_EVERY)
		return 0;
	spun = now_us() - d->spin_from_us;
	if (spun >= d->spin_us)
		d->yielding = 1;
	return spun >= spin_budget_us(d);
}

/* Sleep in the kernel; every park twice as long as the last, up to the
 * cap, so an idle waiter settles at PARK_MAX_US between polls. */
void rdmx__wait_park(struct rdmx__deadline *d)
{
	struct timespec t;
	int64_t t0, late;
	unsigned avg;

	if (!d->parking)
		return;
	d->park_us = d->park_us ? d->park_us * 2 : PARK_MIN_US;
	if (d->park_us > PARK_MAX_US)
		d->park_us = PARK_MAX_US;
	t.tv_sec = 0;
	t.tv_nsec = (long)d->park_us * 1000L;
	t0 = now_us();
	nanosleep(&t, NULL);
	late = now_us() - t0 - d->park_us;
	avg = __atomic_load_n(&wake_late_us, __ATOMIC_RELAXED);
	if (late >= 0 && late < 1000000) /* not a suspended process */
		__atomic_store_n(&wake_late_us, (unsigned)(avg + (late - (int64_t)avg) / 8),
				 __ATOMIC_RELAXED);
}

int rdmx__wait_idle(struct rdmx__deadline *d)
{
	if (!d->armed)
		deadline_arm(d);
	++d->spins;
	if (d->mode == RDMX_WAIT_BLOCK ||
	    (d->mode == RDMX_WAIT_ADAPTIVE && (d->parking || spin_over(d)))) {
		d->parking = 1;
		return 1;
	}
	if ((d->spins > SPIN_FREE || d->yielding) && !(d->spins & (SPIN_YIELD_EVERY - 1)))
		sched_yield();
	return !(d->spins % RDMX__WAIT_CHECK_EVERY);
}

int rdmx__conn_wait(rdmx_conn *c, struct rdmx__deadline *d)
{
	int rc;

	if (d->once)
		return rdmx__conn_once(c);
	if (!d->spins) /* the first empty poll */
		rdmx__deadline_mode(d, c->opts.wait_mode, c->opts.spin_us);
	if (!rdmx__wait_idle(d))
		return 0;
	rc = rdmx__conn_check_peer(c);
	if (!rc)
		rc = rdmx__deadline_passed(d);
	if (!rc)
		rdmx__conn_park(c, d);
	return rc;
}
