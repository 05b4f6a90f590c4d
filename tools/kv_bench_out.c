// SPDX-License-Identifier: MIT
/*
 * rdmx kv bench: the table and the targets on stdout, the JSON and
 * CSV files, and --plot's charts (bench_plot.c's gnuplot pieces).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "json_out.h"
#include "kv_bench.h"
#include "opts.h"

/* Torn retries per million GETs; NAN for rows without GETs by READ. */
static double retries_m(const struct kb_row *x)
{
	return x->path == KB_READ && x->gets ? (double)x->retries * 1e6 / (double)x->gets :
	       NAN;
}

static double p_us(const struct kb_row *x, double p)
{
	return (double)hist_percentile(x->lat, p) / 1e3;
}

/* The first row of @workload on @path at @size (any dist when NULL). */
static const struct kb_row *find(const struct kb_report *r, const char *workload,
				 const char *dist, enum kb_path path, uint64_t size)
{
	for (int i = 0; i < r->n; i++) {
		const struct kb_row *x = &r->rows[i];

		if (!strcmp(x->workload, workload) && x->path == path && x->size == size &&
		    (!dist || !strcmp(x->dist, dist)))
			return x;
	}
	return NULL;
}

/* A mixed workload's row (not the lab's put and get, not torn)? */
static bool mixed(const struct kb_row *x)
{
	return strcmp(x->workload, "put") && strcmp(x->workload, "get") &&
	       strcmp(x->workload, "torn");
}

/* The figures at one size. NAN: not measured. */
struct targets {
	double read_p50, rpc_p50, mc_p50, read_vs_rpc, read_vs_mc;
	double door_vs_mc;	/* geometric mean over the mixed workloads */
	int pairs;
};

static void targets_at(const struct kb_report *r, uint64_t size, struct targets *t)
{
	const struct kb_row *rd = find(r, "get", NULL, KB_READ, size);
	const struct kb_row *rp = find(r, "get", NULL, KB_RPC, size);
	const struct kb_row *mc = find(r, "get", NULL, KB_MEMCACHED, size);
	double logs = 0;

	t->read_p50 = rd ? p_us(rd, 50) : NAN;
	t->rpc_p50 = rp ? p_us(rp, 50) : NAN;
	t->mc_p50 = mc ? p_us(mc, 50) : NAN;
	t->read_vs_rpc = t->read_p50 / t->rpc_p50;
	t->read_vs_mc = t->read_p50 / t->mc_p50;
	t->pairs = 0;
	for (int i = 0; i < r->n; i++) {
		const struct kb_row *d = &r->rows[i], *m;

		if (d->path != KB_DOOR || d->size != size || !mixed(d))
			continue;
		m = find(r, d->workload, d->dist, KB_MEMCACHED, size);
		if (m && m->rate > 0 && d->rate > 0) {
			logs += log(d->rate / m->rate);
			t->pairs++;
		}
	}
	t->door_vs_mc = t->pairs ? exp(logs / t->pairs) : NAN;
}

/* Every size of the rows, once, in order. */
static int sizes_of(const struct kb_report *r, uint64_t *out, int max)
{
	int n = 0, j;

	for (int i = 0; i < r->n; i++) {
		for (j = 0; j < n && out[j] != r->rows[i].size; j++)
			;
		if (j == n && n < max)
			out[n++] = r->rows[i].size;
	}
	return n;
}

/* " 0.42x (target <= 0.5)" or " -". */
static void ratio(FILE *f, const char *what, double v, const char *target)
{
	if (isfinite(v))
		fprintf(f, "  %s %.3fx (target %s)", what, v, target);
	else
		fprintf(f, "  %s - (not measured)", what);
}

static void print_targets(const struct kb_report *r, FILE *f)
{
	uint64_t sizes[BENCH_MAX_SIZES];
	int n = sizes_of(r, sizes, BENCH_MAX_SIZES);
	struct targets t;
	char sz[32];

	fprintf(f, "\ntargets (measured, not asserted):\n");
	for (int i = 0; i < n; i++) {
		targets_at(r, sizes[i], &t);
		fprintf(f, "%6s:", opts_format_size(sizes[i], sz, sizeof(sz)));
		ratio(f, "GET p50 read/rpc", t.read_vs_rpc, "<= 0.5");
		ratio(f, "read/memcached", t.read_vs_mc, "<= 0.3");
		ratio(f, "ops/s door/memcached", t.door_vs_mc, ">= 0.8");
		fputc('\n', f);
	}
}

static void row(const struct kb_row *x, FILE *f)
{
	char sz[32], rm[16];
	double v = retries_m(x);

	if (isnan(v))
		snprintf(rm, sizeof(rm), "-");
	else
		snprintf(rm, sizeof(rm), "%.0f", v);
	fprintf(f, "%-6s %-7s %-9s %6s %7d %9" PRIu64 " %10.0f %8.2f %8.2f %8.2f %7" PRIu64
		" %5" PRIu64 " %9s %9" PRIu64 "\n", x->workload, x->dist, kb_path_name(x->path),
		opts_format_size(x->size, sz, sizeof(sz)), x->clients, x->ops, x->rate,
		p_us(x, 50), p_us(x, 99), p_us(x, 99.9), x->misses, x->bad, rm, x->fallbacks);
}

void kb_print_table(const struct kb_report *r, FILE *f)
{
	fprintf(f, "rdmx kv bench %s  device %s  peer %s  keys %" PRIu64 "  ops per test %"
		PRIu64 "%s\n", r->head.timestamp, r->head.device, r->head.peer, r->keys, r->ops,
		r->ops == 100000 ? " (the lab's count)" : " (the lab's count is 100000: "
		"fewer here)");
	fprintf(f, "\nop latency in microseconds (torn: the GETs); paths: rpc = GET by "
		"RPC, read = GET by\nRDMA READ (PUTs by RPC), door = rdmx KV's memcached "
		"front door, memcached = Debian's,\nboth over TCP; bad = GETs that "
		"returned a torn or wrong value; retries/M = torn\ncopies read again per "
		"million GETs; fallback = GETs that fell back to the RPC\n");
	fprintf(f, "%-6s %-7s %-9s %6s %7s %9s %10s %8s %8s %8s %7s %5s %9s %9s\n",
		"work", "keys", "path", "value", "clients", "ops", "ops/s", "p50", "p99",
		"p99.9", "misses", "bad", "retries/M", "fallback");
	for (int i = 0; i < r->n; i++)
		row(&r->rows[i], f);
	print_targets(r, f);
}

/* ------------------------------------------------------------------- JSON */

/* Row @i of the report as a JSON object. */
static void json_row(const void *report, int i, FILE *f)
{
	const struct kb_report *r = report;
	const struct kb_row *x = &r->rows[i];

	fputs("    {", f);
	jw_kv_str(f, "workload", x->workload, true);
	jw_kv_str(f, "dist", x->dist, false);
	jw_kv_str(f, "path", kb_path_name(x->path), false);
	jw_kv_u64(f, "value_size", x->size, false);
	jw_kv_u64(f, "clients", (uint64_t)x->clients, false);
	jw_kv_str(f, "timestamp", r->head.timestamp, false);
	jw_kv_u64(f, "ops", x->ops, false);
	jw_key(f, "per_client_ops", false);
	for (int c = 0; c < x->clients && c < KB_MAX_CLIENTS; c++)
		fprintf(f, "%s%" PRIu64, c ? ", " : "[", x->client_ops[c]);
	fputc(']', f);
	jw_kv_u64(f, "gets", x->gets, false);
	jw_kv_u64(f, "puts", x->puts, false);
	jw_kv_u64(f, "misses", x->misses, false);
	jw_kv_u64(f, "bad_values", x->bad, false);
	jw_kv_num(f, "seconds", (double)x->wall_ns / 1e9, false);
	jw_kv_num(f, "ops_per_s", x->rate, false);
	jw_kv_u64(f, "gets_read", x->gets_read, false);
	jw_kv_u64(f, "gets_rpc", x->gets_rpc, false);
	jw_kv_u64(f, "torn_retries", x->retries, false);
	jw_kv_u64(f, "fallbacks", x->fallbacks, false);
	jw_kv_num(f, "retries_per_m_gets", retries_m(x), false);
	jw_lat(f, "lat_us", x->lat, 1);
	fputc('}', f);
}

static void json_targets(const struct kb_report *r, FILE *f)
{
	uint64_t sizes[BENCH_MAX_SIZES];
	int n = sizes_of(r, sizes, BENCH_MAX_SIZES);
	struct targets t;

	fputs(",\n  \"targets\": [", f);
	for (int i = 0; i < n; i++) {
		targets_at(r, sizes[i], &t);
		fputs(i ? ",\n    {" : "\n    {", f);
		jw_kv_u64(f, "value_size", sizes[i], true);
		jw_kv_num(f, "get_read_p50_us", t.read_p50, false);
		jw_kv_num(f, "get_rpc_p50_us", t.rpc_p50, false);
		jw_kv_num(f, "get_memcached_p50_us", t.mc_p50, false);
		jw_kv_num(f, "read_vs_rpc_p50", t.read_vs_rpc, false);
		jw_kv_num(f, "read_vs_memcached_p50", t.read_vs_mc, false);
		jw_kv_num(f, "door_vs_memcached_ops", t.door_vs_mc, false);
		jw_kv_u64(f, "door_vs_memcached_pairs", (uint64_t)t.pairs, false);
		fputc('}', f);
	}
	fputs(n ? "\n  ]" : "]", f);
}

int kb_write_json(const void *report, FILE *f)
{
	const struct kb_report *r = report;

	jw_write_head(f, "rdmx kv bench", &r->head);
	json_targets(r, f);
	return jw_write_results(f, r, r->n, json_row);
}

/* -------------------------------------------------------------------- CSV */

static const char csv_header[] =
	"timestamp,device,fabric,workload,dist,path,value_size,clients,ops,gets,puts,"
	"misses,bad_values,seconds,ops_per_s,lat_min_us,lat_p50_us,lat_p90_us,"
	"lat_p99_us,lat_p99_9_us,lat_max_us,lat_mean_us,lat_stdev_us,gets_read,"
	"gets_rpc,torn_retries,fallbacks,retries_per_m_gets\n";

int kb_write_csv(const void *report, FILE *f)
{
	const struct kb_report *r = report;

	fputs(csv_header, f);
	for (int i = 0; i < r->n; i++) {
		const struct kb_row *x = &r->rows[i];
		double v = retries_m(x);

		/* names are identifiers or "95/5": nothing to quote */
		fprintf(f, "%s,%s,%s,%s,%s,%s,%" PRIu64 ",%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64
			",%" PRIu64 ",%" PRIu64 ",%.9f,%.3f,", r->head.timestamp, r->head.device, r->head.fabric,
			x->workload, x->dist, kb_path_name(x->path), x->size, x->clients, x->ops,
			x->gets, x->puts, x->misses, x->bad, (double)x->wall_ns / 1e9, x->rate);
		jw_csv_lat(f, x->lat);
		fprintf(f, "%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",", x->gets_read,
			x->gets_rpc, x->retries, x->fallbacks);
		if (isfinite(v))
			fprintf(f, "%.3f", v);
		fputc('\n', f);
	}
	return ferror(f) ? -EIO : 0;
}

/* ------------------------------------------------------------------- plot */

/* The lab's GET CDF per path at @size. */
static int write_cdf(const struct kb_report *r, const char *dir, uint64_t size,
		     struct plot_series *s)
{
	FILE *f = plot_open(dir, "kv_get_cdf.dat");

	if (!f)
		return -EIO;
	for (int p = KB_RPC; p <= KB_MEMCACHED; p++) {
		const struct kb_row *x = find(r, "get", NULL, (enum kb_path)p, size);

		if (!x || !hist_count(x->lat))
			continue;
		plot_cdf(f, x->lat);
		fputs("\n\n", f);
		s->name[s->n++] = kb_path_name((enum kb_path)p);
	}
	return fclose(f) ? -EIO : 0;
}

/* ops/s of each mixed workload (x: its index) per path at @size, and the
 * workloads' names (those of the first path's rows) as x tics into @tics. */
static int write_ops(const struct kb_report *r, const char *dir, uint64_t size,
		     struct plot_series *s, char *tics, size_t len)
{
	FILE *f = plot_open(dir, "kv_ops.dat");
	size_t off = (size_t)snprintf(tics, len, "set xtics (");
	int k;

	if (!f)
		return -EIO;
	for (int p = KB_RPC; p <= KB_MEMCACHED; p++) {
		k = 0;
		for (int i = 0; i < r->n; i++) {
			const struct kb_row *x = &r->rows[i];

			if (x->size != size || !mixed(x) || x->path != (enum kb_path)p)
				continue;
			fprintf(f, "%d %.1f\n", k, x->rate);
			if (!s->n && off < len)
				off += (size_t)snprintf(tics + off, len - off, "%s\"%s %s\" %d",
							k ? ", " : "", x->workload, x->dist, k);
			k++;
		}
		if (!k)
			continue;
		fputs("\n\n", f);
		s->name[s->n++] = kb_path_name((enum kb_path)p);
	}
	if (off < len)
		snprintf(tics + off, len - off, ")");
	return fclose(f) ? -EIO : 0;
}

int kb_plot(const struct kb_report *r, const char *dir)
{
	struct plot_series cdf = { 0 }, ops = { 0 };
	char set[2048], tics[1024], sz[32];
	uint64_t size = r->rows[0].size;
	FILE *f;
	int rc = plot_mkdir(dir);

	for (int i = 1; i < r->n; i++)
		size = r->rows[i].size < size ? r->rows[i].size : size;
	if (!rc)
		rc = write_cdf(r, dir, size, &cdf);
	if (!rc)
		rc = write_ops(r, dir, size, &ops, tics, sizeof(tics));
	f = rc ? NULL : plot_open(dir, "plots.gp");
	if (!f)
		return rc ? rc : -EIO;
	plot_head(f, "rdmx kv bench", r->head.timestamp, r->head.device);
	opts_format_size(size, sz, sizeof(sz));
	snprintf(set, sizeof(set), "set title sprintf(\"GET latency CDF, %s values, 1 "
		 "client\\n%%s\", subtitle)\nset xlabel 'GET (microseconds, log scale)'\n"
		 "set ylabel 'fraction of GETs at or below'\nset logscale x\nset format x "
		 "'%%g'\nset yrange [0:1]", sz);
	if (cdf.n)
		plot_chart(f, "kv_get_latency_cdf", set, "kv_get_cdf.dat", &cdf, "1:2");
	snprintf(set, sizeof(set), "set title sprintf(\"ops/s of the mixed workloads, %s "
		 "values\\n%%s\", subtitle)\nset ylabel 'ops per second, all clients'\n"
		 "set yrange [0:*]\nset offsets 0.5, 0.5, 0, 0\n%s", sz, tics);
	if (ops.n)
		plot_chart(f, "kv_mixed_ops", set, "kv_ops.dat", &ops, "1:2");
	rc = fclose(f) ? -EIO : 0;
	return rc ? rc : plot_run(dir);
}
