/* SPDX-License-Identifier: MIT */
/*
 * Waiting: the one wait step every blocking call of the library takes
 * (its deadline is the clock's, clock.h). A wait loop polls what it waits
 * for (a CQ, a ring, a listener's requests) and, when the poll finds
 * nothing, calls rdmx__wait_idle() once; every RDMX__WAIT_CHECK_EVERY
 * spins, and before every park, it is told to run its slow checks (the
 * peer's liveness, the deadline, a listener's shutdown), and then calls
 * rdmx__wait_park(), outside any lock. The checks come right after the poll and the park
 * after them: a peer that wrote and left during a park is seen by the
 * next poll before the check that finds it gone. rdmx__conn_wait()
 * (waitset.c) is that loop step for one connection.
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

#include <rdmx/rdmx.h>

#include "clock.h"
#include "errors.h"
#include "wait.h"

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

static int64_t now_us(void)
{
	return rdmx__now_ns() / 1000;
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

/*
 * The clock is read when a wait first has to wait (rdmx__deadline_arm, at
 * the first empty poll), not when it starts: most calls on the fast path
 * find their message or buffer on the first poll, and a clock_gettime()
 * per call was ~15% of send_recv's instructions per message
 * (bench/profile). The deadline reads the coarse clock (clock.h); the
 * spin phase, microseconds, reads the fine one every SPIN_CLOCK_EVERY
 * polls only.
 */
int rdmx__wait_idle(struct rdmx__deadline *d)
{
	if (!d->armed)
		rdmx__deadline_arm(d);
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
