/* SPDX-License-Identifier: MIT */
/* rdmx bench: the checks made before the first test (bench_pre.c). */
#ifndef RDMX_TOOLS_BENCH_PRE_H
#define RDMX_TOOLS_BENCH_PRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/**
 * bench_check_file - a file option @opt ("--pcap") names at @path can be
 * written: not a directory, in a directory that can be written ("-":
 * stdout, always). Returns 0, or -1 with the reason in @err.
 */
int bench_check_file(const char *opt, const char *path, char *err, size_t len);

/**
 * bench_check_outputs - --json and --csv ("-": stdout) can be written, do
 * not name the same file (nor both stdout), --plot is a directory that can be written or
 * created, and gnuplot is installed when --plot is given. NULL: not given.
 * Returns 0, or -1 with the reason in @err.
 */
int bench_check_outputs(const char *json, const char *csv, const char *plot,
			char *err, size_t len);

/**
 * bench_find_program - the first executable @name in $PATH, into @buf.
 * Returns 0, or -ENOENT.
 */
int bench_find_program(const char *name, char *buf, size_t len);

/** bench_have_program - whether @name is an executable in $PATH. */
bool bench_have_program(const char *name);

/* What the buffers of a run depend on. */
struct bench_mem {
	uint64_t max_msg, ring_size;
	uint64_t send_depth, recv_depth;
	uint64_t conns;		/* the most at once (--conns) */
	bool self_test;		/* both sides in this process */
};

/**
 * bench_mem_estimate - the bytes of message buffers a run may map at once:
 * per connection and side, (send_depth + recv_depth) slots of max_msg (the
 * send_recv layout, the largest) plus a ring. UINT64_MAX if it overflows.
 */
uint64_t bench_mem_estimate(const struct bench_mem *m);

/** bench_mem_available - MemAvailable of /proc/meminfo in bytes; 0 unknown. */
uint64_t bench_mem_available(void);

#endif /* RDMX_TOOLS_BENCH_PRE_H */
