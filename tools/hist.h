/* SPDX-License-Identifier: MIT */
/*
 * A fixed-memory latency histogram with log-linear buckets (HdrHistogram
 * style): 1 ns buckets below HIST_LINEAR ns, then every power of two is split
 * into HIST_SUB buckets, up to 2^HIST_TOP_BIT ns (~137 s). A reported value
 * is the middle of its bucket, so it is within 1/(2*HIST_SUB) (0.4%) of the
 * recorded value; larger values land in the last bucket. No allocation:
 * struct hist is ~36 KB and can live on the stack or in a bigger struct.
 */
#ifndef RDMX_TOOLS_HIST_H
#define RDMX_TOOLS_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS	7
#define HIST_SUB	(1u << HIST_SUB_BITS)	/* buckets per power of two */
#define HIST_LIN_BITS	10
#define HIST_LINEAR	(1u << HIST_LIN_BITS)	/* exact below 1024 ns */
#define HIST_TOP_BIT	37			/* 2^37 ns ~ 137 s */
#define HIST_BUCKETS	(HIST_LINEAR + (HIST_TOP_BIT - HIST_LIN_BITS) * HIST_SUB)

struct hist {
	uint64_t count;
	uint64_t min, max;		/* exact */
	double mean, m2;		/* Welford running mean and sum of squares */
	uint64_t bucket[HIST_BUCKETS];
};

void hist_init(struct hist *h);
void hist_record(struct hist *h, uint64_t ns);
uint64_t hist_count(const struct hist *h);
uint64_t hist_min(const struct hist *h);		/* 0 when empty */
uint64_t hist_max(const struct hist *h);		/* 0 when empty */
double hist_mean(const struct hist *h);			/* 0 when empty */
double hist_stdev(const struct hist *h);		/* population; 0 when n < 2 */

/**
 * hist_percentile - the value at nearest rank ceil(p/100 * count), within
 * 0.4% (clamped to [min, max]); @p in [0, 100]; 0 when empty.
 */
uint64_t hist_percentile(const struct hist *h, double p);

/** hist_rank - the 1-based nearest rank hist_percentile() reports. */
uint64_t hist_rank(double p, uint64_t count);

/** hist_merge - add every sample of @src to @dst. */
void hist_merge(struct hist *dst, const struct hist *src);

#endif /* RDMX_TOOLS_HIST_H */
