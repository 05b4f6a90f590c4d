// SPDX-License-Identifier: MIT
/*
 * rdmx bench as a CI gate: --fail-if PROTO:SIZE:METRIC OP VALUE, and
 * --baseline OLD.json --max-regress PCT.
 *
 * A metric is a JSON column of a result row: rtt_us.STAT and one_way_us.STAT
 * (STAT: min, p50, p90, p99, p99_9, max, mean, stdev; a bare STAT means
 * rtt_us.STAT) from the latency rows, msg_rate (or msg_s) and gbps from the
 * bandwidth rows. Times take ns, us (the default), ms or s; rates K, M or G
 * (powers of 1000).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_gate.h"
#include "opts.h"

static const char *const stats[] = {
	"min", "p50", "p90", "p99", "p99_9", "max", "mean", "stdev", NULL,
};

#define METRICS_HELP "p50, p90, p99, p99_9, min, max, mean, stdev (rtt_us.STAT " \
	"or one_way_us.STAT), msg_rate (msg_s), gbps"

static int stat_index(const char *s)
{
	int i;

	if (!strcmp(s, "p99.9"))
		return 4;
	for (i = 0; stats[i]; i++)
		if (!strcmp(stats[i], s))
			return i;
	return -1;
}

static int parse_metric(const char *s, struct gate_metric *m)
{
	*m = (struct gate_metric){ .kind = GATE_TIME };
	if (!strcmp(s, "msg_rate") || !strcmp(s, "msg_s")) {
		m->kind = GATE_RATE;
		return 0;
	}
	if (!strcmp(s, "gbps")) {
		m->kind = GATE_GBPS;
		return 0;
	}
	if (!strncmp(s, "rtt_us.", 7)) {
		s += 7;
	} else if (!strncmp(s, "one_way_us.", 11)) {
		s += 11;
		m->one_way = true;
	}
	m->stat = stat_index(s);
	return m->stat < 0 ? -1 : 0;
}

const char *bench_metric_name(const struct gate_metric *m, char *buf, size_t len)
{
	if (m->kind == GATE_RATE)
		snprintf(buf, len, "msg_rate");
	else if (m->kind == GATE_GBPS)
		snprintf(buf, len, "gbps");
	else
		snprintf(buf, len, "%s.%s", m->one_way ? "one_way_us" : "rtt_us",
			 stats[m->stat]);
	return buf;
}

enum bench_mode bench_gate_mode(const struct bench_gate *g)
{
	return g->metric.kind == GATE_TIME ? BENCH_LAT : BENCH_BW;
}

/* The limit with its unit, converted to the metric's JSON unit. */
static int parse_limit(const char *s, enum gate_kind kind, double *out)
{
	static const struct { const char *unit; double mul; } time_units[] = {
		{ "", 1 }, { "ns", 1e-3 }, { "us", 1 }, { "ms", 1e3 }, { "s", 1e6 },
	}, rate_units[] = {
		{ "", 1 }, { "K", 1e3 }, { "k", 1e3 }, { "M", 1e6 }, { "G", 1e9 },
	};
	char *end;
	double v;
	size_t i;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || errno || !isfinite(v) || v < 0 || !isdigit((unsigned char)*s))
		return -1;
	for (i = 0; i < 5; i++) {
		if (kind == GATE_TIME && !strcmp(end, time_units[i].unit)) {
			*out = v * time_units[i].mul;
			return 0;
		}
		if (kind == GATE_RATE && !strcmp(end, rate_units[i].unit)) {
			*out = v * rate_units[i].mul;
			return 0;
		}
	}
	if (kind == GATE_GBPS && !*end) {
		*out = v;
		return 0;
	}
	return -1;
}

static bool known_protocol(const char *p, const char *const *protos, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(protos[i], p))
			return true;
	return false;
}

/* PROTO:SIZE: into @g; *@rest after the second colon. */
static int parse_row(const char *s, const char *const *protos, int n_protos,
		     struct bench_gate *g, const char **rest, char *err, size_t len)
{
	const char *c1 = strchr(s, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
	char size[32];

	if (!c2) {
		snprintf(err, len, "expected PROTO:SIZE:METRIC<VALUE (or >)");
		return -1;
	}
	if ((size_t)(c1 - s) >= sizeof(g->protocol) ||
	    (size_t)(c2 - c1 - 1) >= sizeof(size)) {
		snprintf(err, len, "protocol or size too long");
		return -1;
	}
	snprintf(g->protocol, sizeof(g->protocol), "%.*s", (int)(c1 - s), s);
	snprintf(size, sizeof(size), "%.*s", (int)(c2 - c1 - 1), c1 + 1);
	if (!strcmp(g->protocol, "*")) {
		g->protocol[0] = '\0';
	} else if (!known_protocol(g->protocol, protos, n_protos)) {
		snprintf(err, len, "protocol '%s' is not '*' or one of the run's "
			 "protocols (--protocol)", g->protocol);
		return -1;
	}
	if (strcmp(size, "*") && (opts_parse_size(size, &g->size) || !g->size)) {
		snprintf(err, len, "size '%s' is not '*' or a size (64, 4K, 1M)", size);
		return -1;
	}
	*rest = c2 + 1;
	return 0;
}

int bench_gate_parse(const char *s, const char *const *protos, int n_protos,
		     struct bench_gate *g, char *err, size_t len)
{
	const char *rest, *op;
	char metric[32];

	*g = (struct bench_gate){ .text = s };
	if (parse_row(s, protos, n_protos, g, &rest, err, len))
		return -1;
	op = rest + strcspn(rest, "<>");
	if (!*op) {
		snprintf(err, len, "no comparison: expected METRIC<VALUE or METRIC>VALUE");
		return -1;
	}
	snprintf(metric, sizeof(metric), "%.*s", (int)(op - rest), rest);
	if (parse_metric(metric, &g->metric)) {
		snprintf(err, len, "'%s' is not a metric (%s)", metric, METRICS_HELP);
		return -1;
	}
	g->greater = *op++ == '>';
	g->or_equal = *op == '=';
	op += g->or_equal;
	if (parse_limit(op, g->metric.kind, &g->limit)) {
		snprintf(err, len, "'%s' is not a limit: %s", op,
			 g->metric.kind == GATE_TIME ? "a time, e.g. 20us, 1.5ms, 800ns" :
			 g->metric.kind == GATE_RATE ? "a rate, e.g. 50000, 50K, 1.5M" :
			 "Gb/s, e.g. 10 or 2.5");
		return -1;
	}
	return 0;
}

/* The metric's value in @x; false if @x has none (another mode). */
static bool metric_of(const struct gate_metric *m, const struct bench_result *x,
		      double *v)
{
	const struct hist *h = x->rtt;
	static const double pct[] = { 0, 50, 90, 99, 99.9 };

	if (m->kind != GATE_TIME) {
		if (x->mode != BENCH_BW)
			return false;
		*v = m->kind == GATE_RATE ? x->msg_rate : x->gbps;
		return true;
	}
	if (x->mode != BENCH_LAT || !h)
		return false;
	if (m->stat == 0)
		*v = (double)hist_min(h) / 1e3;
	else if (m->stat <= 4)
		*v = (double)hist_percentile(h, pct[m->stat]) / 1e3;
	else if (m->stat == 5)
		*v = (double)hist_max(h) / 1e3;
	else
		*v = (m->stat == 6 ? hist_mean(h) : hist_stdev(h)) / 1e3;
	if (m->one_way)
		*v /= 2;
	return true;
}

static bool gate_matches(const struct bench_gate *g, const struct bench_result *x)
{
	return (!g->protocol[0] || !strcmp(g->protocol, x->protocol)) &&
	       (!g->size || g->size == x->size);
}

static bool violated(const struct bench_gate *g, double v)
{
	if (g->greater)
		return g->or_equal ? v >= g->limit : v > g->limit;
	return g->or_equal ? v <= g->limit : v < g->limit;
}

static void row_name(const struct bench_result *x, char *buf, size_t len)
{
	char sz[32];

	snprintf(buf, len, "%s %s %s conns %d", x->protocol,
		 opts_format_size(x->size, sz, sizeof(sz)),
		 x->mode == BENCH_LAT ? "lat" : "bw", x->conns);
}

int bench_gate_check(const struct bench_gate *g, int n, const struct bench_report *r,
		     FILE *f)
{
	char name[64], row[96];
	int i, k, hits, bad = 0;
	double v;

	for (i = 0; i < n; i++) {
		bench_metric_name(&g[i].metric, name, sizeof(name));
		for (k = 0, hits = 0; k < r->n_results; k++) {
			if (!gate_matches(&g[i], &r->results[k]) ||
			    !metric_of(&g[i].metric, &r->results[k], &v))
				continue;
			hits++;
			if (!violated(&g[i], v))
				continue;
			row_name(&r->results[k], row, sizeof(row));
			fprintf(f, "  --fail-if '%s': %s: %s = %.6g\n", g[i].text, row,
				name, v);
			bad++;
		}
		if (!hits) {
			fprintf(f, "  --fail-if '%s': no result row measured %s\n",
				g[i].text, name);
			bad++;
		}
	}
	return bad;
}

/* ------------------------------------------------------------ --baseline */

static int base_row(struct bench_baseline *b, int idx)
{
	struct bench_base_row *rows;

	if (idx < b->n)
		return 0;
	if (idx > 1000000)
		return -1;
	rows = realloc(b->rows, (size_t)(idx + 1) * sizeof(*rows));
	if (!rows)
		return -1;
	memset(rows + b->n, 0, (size_t)(idx + 1 - b->n) * sizeof(*rows));
	for (; b->n <= idx; b->n++)
		rows[b->n].p50_us = rows[b->n].msg_rate = NAN;
	b->rows = rows;
	return 0;
}

struct load {
	struct bench_baseline *b;
	bool oom;
};

static void take_field(struct bench_base_row *x, const char *key,
		       const char *str, double num)
{
	if (str && !strcmp(key, "protocol"))
		snprintf(x->protocol, sizeof(x->protocol), "%s", str);
	else if (str && !strcmp(key, "mode"))
		x->mode = !strcmp(str, "lat") ? BENCH_LAT : !strcmp(str, "bw") ? BENCH_BW : 0;
	else if (!str && !strcmp(key, "size") && num >= 0)
		x->size = (uint64_t)num;
	else if (!str && !strcmp(key, "conns") && num >= 0 && num < 1e6)
		x->conns = (int)num;
	else if (!str && !strcmp(key, "rtt_us.p50"))
		x->p50_us = num;
	else if (!str && !strcmp(key, "msg_rate"))
		x->msg_rate = num;
}

/* results.N.KEY: one field of row N. */
static void load_field(void *arg, const char *path, const char *str, double num)
{
	struct load *l = arg;
	char *end;
	long idx;

	if (strncmp(path, "results.", 8) || !isdigit((unsigned char)path[8]))
		return;
	idx = strtol(path + 8, &end, 10);
	if (*end != '.' || base_row(l->b, (int)idx)) {
		l->oom = l->oom || *end == '.';
		return;
	}
	take_field(&l->b->rows[idx], end + 1, str, num);
}

static char *read_all(const char *path, char *err, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n = 0, cap = 0;
	char *buf = NULL, *nb;

	if (!f) {
		snprintf(err, len, "cannot open it: %s", strerror(errno));
		return NULL;
	}
	do {
		if (n + 4096 + 1 > cap && cap < (64u << 20)) {
			cap = cap ? cap * 2 : 65536;
			nb = realloc(buf, cap);
			if (!nb)
				break;
			buf = nb;
		}
		n += fread(buf + n, 1, cap - n - 1, f);
	} while (!feof(f) && !ferror(f) && n + 1 < cap);
	if (ferror(f) || !feof(f)) {
		snprintf(err, len, "cannot read it (error or larger than 64 MiB)");
		free(buf);
		buf = NULL;
	} else {
		buf[n] = '\0';
	}
	fclose(f);
	return buf;
}

int bench_baseline_load(const char *path, struct bench_baseline *b,
			char *err, size_t len)
{
	struct load l = { .b = b };
	char *text = read_all(path, err, len);
	int rc = -1, i;

	*b = (struct bench_baseline){ 0 };
	if (!text)
		return -1;
	if (bench_json_scan(text, load_field, &l, err, len))
		goto free_rows;
	if (l.oom) {
		snprintf(err, len, "out of memory, or too many rows");
		goto free_rows;
	}
	for (i = 0; i < b->n; i++) {
		if (!b->rows[i].protocol[0] || !b->rows[i].mode || !b->rows[i].size) {
			snprintf(err, len, "result %d lacks protocol, mode or size", i);
			goto free_rows;
		}
	}
	if (!b->n) {
		snprintf(err, len, "no result rows (not an rdmx bench --json file?)");
		goto free_rows;
	}
	rc = 0;
	goto free_text;
free_rows:
	bench_baseline_free(b);
free_text:
	free(text);
	return rc;
}

void bench_baseline_free(struct bench_baseline *b)
{
	free(b->rows);
	*b = (struct bench_baseline){ 0 };
}

static const struct bench_base_row *base_find(const struct bench_baseline *b,
					      const struct bench_result *x)
{
	int i;

	for (i = 0; i < b->n; i++)
		if (b->rows[i].mode == x->mode && b->rows[i].size == x->size &&
		    b->rows[i].conns == x->conns &&
		    !strcmp(b->rows[i].protocol, x->protocol))
			return &b->rows[i];
	return NULL;
}

int bench_baseline_check(const struct bench_baseline *b, double pct,
			 const struct bench_report *r, FILE *f)
{
	const struct bench_base_row *o;
	const struct bench_result *x;
	char row[96];
	double now, was;
	int i, bad = 0, compared = 0;

	for (i = 0; i < r->n_results; i++) {
		x = &r->results[i];
		o = base_find(b, x);
		if (!o || (x->mode == BENCH_LAT && !x->rtt))
			continue;
		compared++;
		now = x->mode == BENCH_LAT ?
		      (double)hist_percentile(x->rtt, 50) / 1e3 : x->msg_rate;
		was = x->mode == BENCH_LAT ? o->p50_us : o->msg_rate;
		if (!isfinite(was) || was <= 0) {
			compared--;
			continue;
		}
		if (x->mode == BENCH_LAT ? now <= was * (1 + pct / 100) :
					   now >= was * (1 - pct / 100))
			continue;
		row_name(x, row, sizeof(row));
		fprintf(f, "  --baseline: %s: %s %.6g, was %.6g (%+.1f%%, limit %g%%)\n",
			row, x->mode == BENCH_LAT ? "rtt_us.p50" : "msg_rate", now,
			was, (now - was) / was * 100, pct);
		bad++;
	}
	if (!compared) { /* a gate comparing nothing must not pass */
		fprintf(f, "  --baseline: no row of this run is in the baseline "
			"(same protocol, mode, size and conns)\n");
		bad++;
	}
	return bad;
}
