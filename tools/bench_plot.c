// SPDX-License-Identifier: MIT
/*
 * rdmx bench --plot DIR: gnuplot data files, a script (DIR/plots.gp) and its
 * PNG and SVG charts: latency CDF per protocol at the smallest size, payload
 * throughput and message rate vs size per protocol, and message rate vs the
 * number of connections per protocol at the smallest size.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "opts.h"

/* The cumulative fractions the CDF is drawn at (denser in the tail). */
static const double cdf_pcts[] = {
	0, 1, 2, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80,
	85, 90, 92, 94, 95, 96, 97, 98, 99, 99.5, 99.9, 99.95, 99.99, 100,
};

#define series plot_series

static uint64_t min_size(const struct bench_report *r, enum bench_mode m)
{
	uint64_t s = 0;
	int i;

	for (i = 0; i < r->n_results; i++)
		if (r->results[i].mode == m && (!s || r->results[i].size < s))
			s = r->results[i].size;
	return s;
}

FILE *plot_open(const char *dir, const char *name)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		fprintf(stderr, "rdmx: --plot: cannot write %s: %s\n", path,
			strerror(errno));
	return f;
}

/* One gnuplot data block per protocol (blocks apart by two blank lines). */
typedef bool (*row_fn)(const struct bench_result *x, uint64_t size, FILE *f);

static int write_blocks(const struct bench_report *r, const char *dir,
			const char *name, uint64_t size, row_fn fn, struct series *s)
{
	FILE *f = plot_open(dir, name);
	bool any;
	int p, i;

	s->n = 0;
	if (!f)
		return -EIO;
	for (p = 0; p < r->n_protos; p++) {
		any = false;
		for (i = 0; i < r->n_results; i++)
			if (r->results[i].protocol == r->protos[p])
				any |= fn(&r->results[i], size, f);
		if (any) {
			s->name[s->n++] = r->protos[p];
			fputs("\n\n", f);
		}
	}
	return fclose(f) ? -EIO : 0;
}

void plot_cdf(FILE *f, const struct hist *h)
{
	size_t i;

	for (i = 0; i < sizeof(cdf_pcts) / sizeof(cdf_pcts[0]); i++)
		fprintf(f, "%.3f %g\n", (double)hist_percentile(h, cdf_pcts[i]) / 1e3,
			cdf_pcts[i] / 100);
}

static bool cdf_rows(const struct bench_result *x, uint64_t size, FILE *f)
{
	if (x->mode != BENCH_LAT || x->size != size || x->conns != 1 || !x->rtt ||
	    !hist_count(x->rtt))
		return false;
	plot_cdf(f, x->rtt);
	return true;
}

static bool bw_rows(const struct bench_result *x, uint64_t size, FILE *f)
{
	(void)size;
	if (x->mode != BENCH_BW || x->conns != 1 || x->batch > 1)
		return false;
	fprintf(f, "%llu %.6f %.1f\n", (unsigned long long)x->size, x->gbps,
		x->msg_rate);
	return true;
}

static bool conn_rows(const struct bench_result *x, uint64_t size, FILE *f)
{
	if (x->mode != BENCH_BW || x->size != size || x->batch > 1)
		return false;
	fprintf(f, "%d %.1f\n", x->conns, x->msg_rate);
	return true;
}

/* --batch: message rate against sends per burst, 1 connection. */
static bool batch_rows(const struct bench_result *x, uint64_t size, FILE *f)
{
	if (x->mode != BENCH_BW || x->size != size || x->conns != 1)
		return false;
	fprintf(f, "%d %.1f\n", x->batch, x->msg_rate);
	return true;
}

static void plot_cmd(FILE *f, const char *data, const struct series *s,
		     const char *cols)
{
	int i;

	fputs("plot ", f);
	for (i = 0; i < s->n; i++)
		fprintf(f, "%s'%s' index %d using %s with linespoints title '%s' noenhanced",
			i ? ", \\\n     " : "", data, i, cols, s->name[i]);
	fputc('\n', f);
}

void plot_chart(FILE *f, const char *name, const char *settings,
		  const char *data, const struct series *s, const char *cols)
{
	fprintf(f, "reset\nset term @pngterm size 1000,650\nset output '%s.png'\n"
		"%s\nset grid\nset key outside right top\n", name, settings);
	plot_cmd(f, data, s, cols);
	fprintf(f, "set term svg size 1000,650 dynamic font 'sans,12'\n"
		"set output '%s.svg'\nreplot\nset output\n\n", name);
}

void plot_head(FILE *f, const char *tool, const char *timestamp, const char *device)
{
	fprintf(f, "# %s --plot: run with 'gnuplot plots.gp' in this directory\n"
		"pngterm = strstrt(GPVAL_TERMINALS, 'pngcairo') > 0 ? "
		"'pngcairo enhanced font \"sans,11\"' : 'png'\n"
		"set macros\n"
		"subtitle = '%s %s, device %s'\n\n", tool, tool, timestamp, device);
}

/* "set xtics ("8" 8, "4K" 4096, ...)" for the sizes of the bandwidth rows. */
static void size_tics(const struct bench_report *r, char *buf, size_t len)
{
	size_t off = (size_t)snprintf(buf, len, "set xtics (");
	uint64_t last = 0, next;
	char sz[32];
	int i;

	for (;;) { /* ascending, each size once */
		next = 0;
		for (i = 0; i < r->n_results; i++)
			if (r->results[i].mode == BENCH_BW && r->results[i].size > last &&
			    (!next || r->results[i].size < next))
				next = r->results[i].size;
		if (!next || off + 40 >= len)
			break;
		off += (size_t)snprintf(buf + off, len - off, "%s\"%s\" %llu",
					last ? ", " : "", opts_format_size(next, sz, sizeof(sz)),
					(unsigned long long)next);
		last = next;
	}
	snprintf(buf + off, len - off, ")");
}

/* Chart @name: @what (column @cols of bw.dat, @ylabel) vs message size. */
static void size_chart(FILE *f, const char *name, const char *what, const char *ylabel,
		       const char *tics, const struct series *bw, const char *cols)
{
	char set[2000];

	snprintf(set, sizeof(set), "set title sprintf(\"%s vs message size (1 connection)"
		 "\\n%%s\", subtitle)\nset xlabel 'message size (bytes, log scale)'\n"
		 "set ylabel '%s'\nset logscale x 2\nset logscale y\nset format y '%%g'\n"
		 "set offsets graph 0.04, graph 0.04, 0, 0\n%s", what, ylabel, tics);
	plot_chart(f, name, set, "bw.dat", bw, cols);
}

/* Did the run measure more than one batch size (--batch 1..64)? */
static bool batch_runs(const struct bench_report *r)
{
	int i;

	for (i = 1; i < r->n_results; i++)
		if (r->results[i].batch != r->results[0].batch)
			return true;
	return false;
}

static int write_script(const struct bench_report *r, const char *dir,
			const struct series *cdf, const struct series *bw,
			const struct series *cn, const struct series *bt,
			uint64_t lat_size, uint64_t bw_size)
{
	FILE *f = plot_open(dir, "plots.gp");
	char set[2000], tics[1200], a[32], b[32];

	if (!f)
		return -EIO;
	plot_head(f, "rdmx bench", r->timestamp, r->device);
	if (cdf->n) {
		snprintf(set, sizeof(set), "set title sprintf(\"Latency CDF, %s-byte messages "
			 "(round trip)\\n%%s\", subtitle)\nset xlabel 'round-trip "
			 "latency (microseconds, log scale)'\nset ylabel 'fraction of "
			 "round trips at or below'\nset logscale x\nset format x '%%g'\n"
			 "set yrange [0:1]",
			 opts_format_size(lat_size, a, sizeof(a)));
		plot_chart(f, "latency_cdf", set, "lat_cdf.dat", cdf, "1:2");
	}
	size_tics(r, tics, sizeof(tics));
	if (bw->n) {
		size_chart(f, "throughput_vs_size", "Throughput",
			   "payload throughput (Gb/s, log scale)", tics, bw, "1:2");
		size_chart(f, "msgrate_vs_size", "Message rate",
			   "messages per second (log scale)", tics, bw, "1:3");
	}
	if (cn->n) {
		snprintf(set, sizeof(set), "set title sprintf(\"Message rate vs "
			 "connections, %s-byte messages\\n%%s\", subtitle)\nset xlabel "
			 "'connections (one thread each)'\nset ylabel 'aggregate "
			 "messages per second'\nset xtics 1\nset yrange [0:*]\nset "
			 "offsets 0, 0.5, 0, 0\nset xrange [0:*]",
			 opts_format_size(bw_size, b, sizeof(b)));
		plot_chart(f, "msgrate_vs_conns", set, "conns.dat", cn, "1:2");
	}
	if (bt->n && batch_runs(r)) {
		snprintf(set, sizeof(set), "set title sprintf(\"Message rate vs "
			 "batch (sends per burst), %s-byte messages, 1 connection"
			 "\\n%%s\", subtitle)\nset xlabel 'sends per burst "
			 "(RDMX_SEND_MORE; log scale)'\nset ylabel 'messages per "
			 "second (log scale)'\nset logscale x 2\nset logscale y\n"
			 "set format y '%%g'\nset offsets graph 0.04, graph 0.04, 0, 0",
			 opts_format_size(bw_size, b, sizeof(b)));
		plot_chart(f, "msgrate_vs_batch", set, "batch.dat", bt, "1:2");
	}
	return fclose(f) ? -EIO : 0;
}

int plot_run(const char *dir)
{
	int st, log;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (chdir(dir) == 0) {
			log = open("gnuplot.log", O_WRONLY | O_CREAT | O_TRUNC, 0666);
			if (log >= 0)
				dup2(log, STDERR_FILENO); /* its warnings */
			execlp("gnuplot", "gnuplot", "plots.gp", (char *)NULL);
		}
		fprintf(stderr, "rdmx: --plot: cannot run gnuplot: %s "
			"(install gnuplot-nox)\n", strerror(errno));
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	fprintf(stderr, "rdmx: --plot: gnuplot failed (see %s/gnuplot.log); "
		"the data and %s/plots.gp are kept\n", dir, dir);
	return -EIO;
}

int plot_mkdir(const char *dir)
{
	if (mkdir(dir, 0777) && errno != EEXIST) {
		fprintf(stderr, "rdmx: --plot: cannot create %s: %s\n", dir, strerror(errno));
		return -errno;
	}
	return 0;
}

int bench_plot(const struct bench_report *r, const char *dir)
{
	struct series cdf, bw, cn, bt;
	uint64_t lat_size = min_size(r, BENCH_LAT), bw_size = min_size(r, BENCH_BW);
	int rc;

	rc = plot_mkdir(dir);
	if (!rc)
		rc = write_blocks(r, dir, "lat_cdf.dat", lat_size, cdf_rows, &cdf);
	if (!rc)
		rc = write_blocks(r, dir, "bw.dat", 0, bw_rows, &bw);
	if (!rc)
		rc = write_blocks(r, dir, "conns.dat", bw_size, conn_rows, &cn);
	if (!rc)
		rc = write_blocks(r, dir, "batch.dat", bw_size, batch_rows, &bt);
	if (!rc)
		rc = write_script(r, dir, &cdf, &bw, &cn, &bt, lat_size, bw_size);
	if (!rc && (cdf.n || bw.n || cn.n))
		rc = plot_run(dir);
	return rc;
}
