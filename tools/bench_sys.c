// SPDX-License-Identifier: MIT
/* rdmx bench: CPU time, RDMA hw_counters, device lookup, the progress line,
 * SIGINT/SIGTERM. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_ep.h"

static uint64_t tv_ns(const struct timeval *tv)
{
	return (uint64_t)tv->tv_sec * 1000000000ull + (uint64_t)tv->tv_usec * 1000ull;
}

void bench_thread_cpu(struct bench_cpu *c)
{
	struct rusage ru;

	memset(c, 0, sizeof(*c));
	if (getrusage(RUSAGE_THREAD, &ru))
		return;
	c->user_ns = tv_ns(&ru.ru_utime);
	c->sys_ns = tv_ns(&ru.ru_stime);
}

struct bench_cpu bench_cpu_since(const struct bench_cpu *then,
				 const struct bench_cpu *now)
{
	struct bench_cpu d = {
		.user_ns = now->user_ns > then->user_ns ? now->user_ns - then->user_ns : 0,
		.sys_ns = now->sys_ns > then->sys_ns ? now->sys_ns - then->sys_ns : 0,
	};

	return d;
}

/* ------------------------------------------------------------ hw_counters */

static int read_u64(const char *path, uint64_t *v)
{
	FILE *f = fopen(path, "r");
	int ok;

	if (!f)
		return -errno;
	ok = fscanf(f, "%" SCNu64, v) == 1;
	fclose(f);
	return ok ? 0 : -EINVAL;
}

int bench_counters_read(const char *dev, struct bench_counters *c)
{
	char dir[256], path[600];
	struct dirent *d;
	DIR *dp;

	c->n = 0;
	snprintf(dir, sizeof(dir), "/sys/class/infiniband/%s/ports/1/hw_counters", dev);
	dp = opendir(dir);
	if (!dp)
		return -errno;
	while ((d = readdir(dp)) && c->n < BENCH_MAX_COUNTERS) {
		if (d->d_name[0] == '.' || strlen(d->d_name) >= sizeof(c->name[0]))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		if (read_u64(path, &c->value[c->n]))
			continue;
		strcpy(c->name[c->n], d->d_name);
		c->n++;
	}
	closedir(dp);
	return 0;
}

void bench_counters_delta(const struct bench_counters *before,
			  const struct bench_counters *after,
			  struct bench_counters *out)
{
	int i, j;
	uint64_t b;

	out->n = 0;
	for (i = 0; i < after->n; i++) {
		b = 0;
		for (j = 0; j < before->n; j++)
			if (!strcmp(before->name[j], after->name[i]))
				b = before->value[j];
		if (after->value[i] == b)
			continue;
		strcpy(out->name[out->n], after->name[i]);
		out->value[out->n++] = after->value[i] - b;
	}
}

int bench_device_of(const char *addr, char *buf, size_t len)
{
	struct rdmx_device_info *devs;
	int n, d, p, g, rc;

	buf[0] = '\0';
	rc = rdmx_devices_list(&devs, &n);
	if (rc)
		return rc;
	for (d = 0; d < n && !buf[0]; d++)
		for (p = 0; p < devs[d].n_ports; p++)
			for (g = 0; g < devs[d].ports[p].n_gids; g++)
				if (!buf[0] && (!addr ||
				    !strcmp(devs[d].ports[p].gids[g].addr, addr)))
					snprintf(buf, len, "%s", devs[d].name);
	if (!buf[0] && n > 0)
		snprintf(buf, len, "%s", devs[0].name);
	rdmx_devices_free(devs, n);
	return buf[0] ? 0 : -ENODEV;
}

/* --------------------------------------------------------------- progress */

void bench_progress_start(struct bench_progress *p, enum bench_progress_mode mode,
			  const char *label)
{
	p->on = mode == BENCH_PROGRESS_ALWAYS ||
		(mode == BENCH_PROGRESS_AUTO && isatty(STDERR_FILENO));
	p->shown = false;
	p->label = label;
	p->start = p->last = bench_now_ns();
}

void bench_progress_tick(struct bench_progress *p, uint64_t done, uint64_t total,
			 uint64_t dur_ns)
{
	uint64_t now, el;

	if (!p->on)
		return;
	now = bench_now_ns();
	el = now - p->start;
	if (el < 1000000000ull || now - p->last < 250000000ull)
		return;
	p->last = now;
	p->shown = true;
	if (total)
		fprintf(stderr, "\r\033[K%s: %" PRIu64 "/%" PRIu64 " (%.0f%%, %.1f s)",
			p->label, done, total, 100.0 * (double)done / (double)total,
			(double)el / 1e9);
	else
		fprintf(stderr, "\r\033[K%s: %" PRIu64 " messages, %.1f/%.1f s",
			p->label, done, (double)el / 1e9, (double)dur_ns / 1e9);
}

void bench_progress_end(struct bench_progress *p)
{
	if (p->shown)
		fputs("\r\033[K", stderr);
	p->shown = false;
}

/* ------------------------------------------------------------------ stop */

/* Read by the worker threads while the handler may run on any thread: a
 * lock-free atomic, which is async-signal-safe where sig_atomic_t alone is
 * not thread-safe. */
static atomic_int stop_signal;

static void on_stop(int sig)
{
	int saved = errno;

	atomic_store_explicit(&stop_signal, sig, memory_order_relaxed);
	errno = saved;
}

void bench_catch_stop(void)
{
	struct sigaction sa = { .sa_handler = on_stop };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

int bench_stopped(void)
{
	return atomic_load_explicit(&stop_signal, memory_order_relaxed);
}
