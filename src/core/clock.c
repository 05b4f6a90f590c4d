/* SPDX-License-Identifier: MIT */
/* The library's clock and its deadline (see clock.h). */
#include <errno.h>
#include <time.h>

#include <rdmx/rdmx.h>

#include "clock.h"
#include "errors.h"

#define NS_PER_MS 1000000

static int64_t read_ns(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int64_t rdmx__now_ns(void)
{
	return read_ns(CLOCK_MONOTONIC);
}

int64_t rdmx__now_ms(void)
{
	return read_ns(CLOCK_MONOTONIC) / NS_PER_MS;
}

int64_t rdmx__now_coarse_ms(void)
{
	return read_ns(CLOCK_MONOTONIC_COARSE) / NS_PER_MS;
}

int64_t rdmx__wall_ns(void)
{
	return read_ns(CLOCK_REALTIME);
}

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

/* The coarse clock: a deadline is read from wait loops (clock.h). */
void rdmx__deadline_arm(struct rdmx__deadline *d)
{
	d->end_ns = read_ns(CLOCK_MONOTONIC_COARSE);
	d->armed = 1;
	if (d->timeout_ms > 0)
		d->end_ns += (int64_t)d->timeout_ms * NS_PER_MS;
}

int rdmx__deadline_left_ms(struct rdmx__deadline *d)
{
	int64_t ms;

	if (d->forever)
		return INT32_MAX;
	if (!d->armed)
		rdmx__deadline_arm(d);
	ms = (d->end_ns - read_ns(CLOCK_MONOTONIC_COARSE)) / NS_PER_MS;
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
