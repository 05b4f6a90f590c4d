// SPDX-License-Identifier: MIT
/* Log-linear latency histogram; see hist.h. */
#include <math.h>
#include <string.h>

#include "hist.h"

static unsigned bucket_of(uint64_t v)
{
	unsigned top, shift;

	if (v < HIST_LINEAR)
		return (unsigned)v;
	top = 63 - (unsigned)__builtin_clzll(v);
	if (top >= HIST_TOP_BIT)
		return HIST_BUCKETS - 1;
	shift = top - HIST_SUB_BITS;
	return HIST_LINEAR + (top - HIST_LIN_BITS) * HIST_SUB +
	       (unsigned)(v >> shift) - HIST_SUB;
}

/* The middle of bucket @b. */
static uint64_t bucket_value(unsigned b)
{
	unsigned top, shift;
	uint64_t lo;

	if (b < HIST_LINEAR)
		return b;
	b -= HIST_LINEAR;
	top = HIST_LIN_BITS + b / HIST_SUB;
	shift = top - HIST_SUB_BITS;
	lo = (uint64_t)(HIST_SUB + b % HIST_SUB) << shift;
	return lo + (((uint64_t)1 << shift) - 1) / 2;
}

void hist_init(struct hist *h)
{
	memset(h, 0, sizeof(*h));
}

void hist_record(struct hist *h, uint64_t ns)
{
	double d;

	if (!h->count || ns < h->min)
		h->min = ns;
	if (ns > h->max)
		h->max = ns;
	h->count++;
	d = (double)ns - h->mean;
	h->mean += d / (double)h->count;
	h->m2 += d * ((double)ns - h->mean);
	h->bucket[bucket_of(ns)]++;
}

uint64_t hist_count(const struct hist *h)
{
	return h->count;
}

uint64_t hist_min(const struct hist *h)
{
	return h->min;
}

uint64_t hist_max(const struct hist *h)
{
	return h->max;
}

double hist_mean(const struct hist *h)
{
	return h->mean;
}

double hist_stdev(const struct hist *h)
{
	if (h->count < 2)
		return 0;
	return sqrt(h->m2 / (double)h->count);
}

uint64_t hist_rank(double p, uint64_t count)
{
	double r;

	if (!count)
		return 0;
	r = ceil(p / 100.0 * (double)count - 1e-9);
	if (r < 1)
		return 1;
	return r > (double)count ? count : (uint64_t)r;
}

uint64_t hist_percentile(const struct hist *h, double p)
{
	uint64_t rank = hist_rank(p, h->count), seen = 0, v;
	unsigned b;

	if (!h->count)
		return 0;
	if (rank == 1)
		return h->min;
	if (rank == h->count)
		return h->max;
	for (b = 0; b < HIST_BUCKETS; b++) {
		seen += h->bucket[b];
		if (seen >= rank)
			break;
	}
	/* the last bucket is open-ended: max is its best estimate */
	v = b < HIST_BUCKETS - 1 ? bucket_value(b) : h->max;
	if (v < h->min)
		return h->min;
	return v > h->max ? h->max : v;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	double n, d;
	unsigned b;

	if (!src->count)
		return;
	if (!dst->count || src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	n = (double)dst->count + (double)src->count;
	d = src->mean - dst->mean;
	dst->m2 += src->m2 + d * d * (double)dst->count * (double)src->count / n;
	dst->mean += d * (double)src->count / n;
	dst->count += src->count;
	for (b = 0; b < HIST_BUCKETS; b++)
		dst->bucket[b] += src->bucket[b];
}
