/* SPDX-License-Identifier: MIT */
/*
 * The library's clock and its deadline: every bound in every room (a
 * wait's timeout, a keepalive's period, how long a ring has read torn, an
 * RPC server's poll slice) is measured on this one clock, CLOCK_MONOTONIC.
 *
 * rdmx__now_ns() and rdmx__now_ms() read it at full resolution.
 * rdmx__now_coarse_ms() reads the same clock as of the kernel's last tick
 * (CLOCK_MONOTONIC_COARSE: never ahead of rdmx__now_ms(), behind it by at
 * most a tick, 1-4 ms). It is for bounds checked from wait loops (the
 * deadline, the keepalive's period): a millisecond timeout needs no finer
 * resolution, and where the clocksource is slow to read (hpet in a VM: a
 * system call and an emulated device access each time) the coarse read
 * still costs a memory read.
 *
 * rdmx__wall_ns() is the wall clock (CLOCK_REALTIME), never a bound: for
 * a seed that must differ across reboots and for a store's expiry times,
 * which its clients compare in wall-clock seconds.
 *
 * A deadline (struct rdmx__deadline) is a wait's bound: timeout_ms < 0 is
 * forever, 0 is "poll once". It also carries how the wait waits (its
 * mode, spin and park state), which the wait step (wait.h) keeps; the
 * clock is read only when a wait first has to wait (see wait.c), so a
 * call that finds what it wants on its first poll reads no clock at all.
 */
#ifndef RDMX_CORE_CLOCK_H
#define RDMX_CORE_CLOCK_H

#include <stdint.h>

int64_t rdmx__now_ns(void);
int64_t rdmx__now_ms(void);
int64_t rdmx__now_coarse_ms(void);
int64_t rdmx__wall_ns(void);

#define RDMX__SPIN_US_DEFAULT 50u
#define RDMX__SPIN_US_MAX 1000000u
struct rdmx__deadline {
	int64_t end_ns;            /* on the coarse clock; valid once armed */
	int forever;
	int once;
	int armed;
	int timeout_ms;
	unsigned spins;            /* empty polls so far */
	uint8_t mode;              /* enum rdmx_wait_mode, never DEFAULT */
	uint32_t spin_us;          /* adaptive: spin this long, then park */
	int64_t spin_from_us;      /* adaptive: the first empty poll */
	unsigned park_us;          /* the last park's length, 0: none yet */
	int parking;               /* past the spin phase: park when idle */
	int yielding;              /* adaptive: spun spin_us; yields from now */
	int timed;                 /* waits on peer-written memory: timed
				    * parks only (waitset.c) */
};

void rdmx__deadline_start(struct rdmx__deadline *d, int timeout_ms);
/* Wait in @mode (enum rdmx_wait_mode; DEFAULT is adaptive) spinning
 * @spin_us first in adaptive mode. rdmx__deadline_start() sets adaptive
 * with RDMX__SPIN_US_DEFAULT; rdmx__conn_wait() sets the connection's. */
void rdmx__deadline_mode(struct rdmx__deadline *d, uint8_t mode,
			 uint32_t spin_us);
/* Start measuring @d now (the first read of the clock); the wait step and
 * rdmx__deadline_left_ms() arm a deadline that is not yet. */
void rdmx__deadline_arm(struct rdmx__deadline *d);
/* Milliseconds left (INT32_MAX when forever, 0 when passed). */
int rdmx__deadline_left_ms(struct rdmx__deadline *d);
/* -ETIMEDOUT with a message once @d has passed, else 0. */
int rdmx__deadline_passed(struct rdmx__deadline *d);

#endif /* RDMX_CORE_CLOCK_H */
