// SPDX-License-Identifier: MIT
/*
 * rdmx rpc bench --plot DIR: calls/s vs clients (a line per transport and
 * size) and the round-trip CDF of one client at the smallest size (a line
 * per transport), as PNG and SVG through bench_plot.c's gnuplot pieces.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "opts.h"
#include "rpc_bench.h"

#define MAX_LINES BENCH_MAX_PROTOS

/* The lines' names ("rfp 4K"), kept for the script. */
struct lines {
	struct plot_series s;
	char names[MAX_LINES][48];
};

/* The smallest size of the rows. */
static uint64_t min_size(const struct rb_report *r)
{
	uint64_t s = 0;

	for (int i = 0; i < r->n; i++)
		if (!s || r->rows[i].size < s)
			s = r->rows[i].size;
	return s;
}

/* A line's name: "transport[/protocol][ size]". */
static const char *line_name(struct lines *l, const struct rb_result *x, bool size)
{
	char *b = l->names[l->s.n], sz[32];

	snprintf(b, sizeof(l->names[0]), "%s%s%s%s%s", x->transport, x->protocol ? "/" : "",
		 x->protocol ? x->protocol : "", size ? " " : "",
		 size ? opts_format_size(x->size, sz, sizeof(sz)) : "");
	return b;
}

/* Is row @i the first of its transport (and size, when @by_size)? */
static bool first_of(const struct rb_report *r, int i, bool by_size)
{
	for (int j = 0; j < i; j++)
		if (r->rows[j].transport == r->rows[i].transport &&
		    (!by_size || r->rows[j].size == r->rows[i].size))
			return false;
	return true;
}

/* calls/s vs clients: a block per transport and size. */
static int write_calls(const struct rb_report *r, const char *dir, struct lines *l)
{
	FILE *f = plot_open(dir, "rpc_calls.dat");

	if (!f)
		return -EIO;
	for (int i = 0; i < r->n && l->s.n < MAX_LINES; i++) {
		if (!first_of(r, i, true))
			continue;
		for (int j = i; j < r->n; j++)
			if (r->rows[j].transport == r->rows[i].transport &&
			    r->rows[j].size == r->rows[i].size)
				fprintf(f, "%d %.1f\n", r->rows[j].clients, r->rows[j].rate);
		fputs("\n\n", f);
		l->s.name[l->s.n] = line_name(l, &r->rows[i], true);
		l->s.n++;
	}
	return fclose(f) ? -EIO : 0;
}

/* The CDF of one client at @size: a block per transport. */
static int write_cdf(const struct rb_report *r, const char *dir, uint64_t size,
		     struct lines *l)
{
	FILE *f = plot_open(dir, "rpc_lat_cdf.dat");

	if (!f)
		return -EIO;
	for (int i = 0; i < r->n && l->s.n < MAX_LINES; i++) {
		const struct rb_result *x = &r->rows[i];

		if (x->size != size || x->clients != 1 || !hist_count(x->rtt) ||
		    !first_of(r, i, true))
			continue;
		plot_cdf(f, x->rtt);
		fputs("\n\n", f);
		l->s.name[l->s.n] = line_name(l, x, false);
		l->s.n++;
	}
	return fclose(f) ? -EIO : 0;
}

/* plots.gp: the two charts over the data files. */
static int write_script(const struct rb_report *r, const char *dir,
			const struct lines *calls, const struct lines *cdf, uint64_t size)
{
	FILE *f = plot_open(dir, "plots.gp");
	char set[1024], sz[32];

	if (!f)
		return -EIO;
	plot_head(f, "rdmx rpc bench", r->head.timestamp, r->head.device);
	if (calls->s.n)
		plot_chart(f, "rpc_calls_vs_clients", "set title sprintf(\"Echo calls/s "
			   "vs clients (one thread each, one server)\\n%s\", subtitle)\n"
			   "set xlabel 'clients'\nset ylabel 'calls per second, all "
			   "clients'\nset xtics 1\nset yrange [0:*]\nset offsets 0, 0.5, "
			   "0, 0\nset xrange [0:*]", "rpc_calls.dat", &calls->s, "1:2");
	snprintf(set, sizeof(set), "set title sprintf(\"Echo round-trip CDF, %s "
		 "requests, 1 client\\n%%s\", subtitle)\nset xlabel 'round trip "
		 "(microseconds, log scale)'\nset ylabel 'fraction of calls at or "
		 "below'\nset logscale x\nset format x '%%g'\nset yrange [0:1]",
		 opts_format_size(size, sz, sizeof(sz)));
	if (cdf->s.n)
		plot_chart(f, "rpc_latency_cdf", set, "rpc_lat_cdf.dat", &cdf->s, "1:2");
	return fclose(f) ? -EIO : 0;
}

int rb_plot(const struct rb_report *r, const char *dir)
{
	static struct lines calls, cdf; /* ~3 KB each; one plot per run */
	uint64_t size = min_size(r);
	int rc = plot_mkdir(dir);

	calls.s.n = cdf.s.n = 0;
	if (!rc)
		rc = write_calls(r, dir, &calls);
	if (!rc)
		rc = write_cdf(r, dir, size, &cdf);
	if (!rc)
		rc = write_script(r, dir, &calls, &cdf, size);
	if (!rc && (calls.s.n || cdf.s.n))
		rc = plot_run(dir);
	return rc;
}
