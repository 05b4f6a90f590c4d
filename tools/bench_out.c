// SPDX-License-Identifier: MIT
/* rdmx bench: the table on stdout, the JSON and the CSV files. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "bench.h"
#include "json_out.h"
#include "opts.h"

/* Nanoseconds as microseconds. */
static double us(uint64_t ns)
{
	return (double)ns / 1e3;
}

static const char *mode_name(enum bench_mode m)
{
	return m == BENCH_LAT ? "lat" : "bw";
}

static bool has_mode(const struct bench_report *r, enum bench_mode m)
{
	int i;

	for (i = 0; i < r->n_results; i++)
		if (r->results[i].mode == m)
			return true;
	return false;
}

static bool single_receiver(const struct bench_report *r)
{
	int i;

	for (i = 0; i < r->n_results; i++)
		if (r->results[i].single_receiver)
			return true;
	return false;
}

/* "user/sys" percentages of one core over the row's wall time. */
static const char *cpu_text(const struct bench_cpu *c, uint64_t wall,
			    char *buf, size_t len)
{
	snprintf(buf, len, "%.0f/%.0f", bench_pct(c->user_ns, wall),
		 bench_pct(c->sys_ns, wall));
	return buf;
}

/* @d: 1 for round-trip columns, 2 for one-way (--latency one-way). */
static void lat_row(const struct bench_result *x, double d, FILE *f)
{
	const struct hist *h = x->rtt;
	char sz[32], a[32], b[32];
	size_t i;

	fprintf(f, "%-14s %5d %6s %9" PRIu64 " %9.2f", x->protocol, x->conns,
		opts_format_size(x->size, sz, sizeof(sz)), x->msgs, us(hist_min(h)) / d);
	for (i = 0; i < JW_N_PCTS; i++)
		fprintf(f, " %9.2f", us(hist_percentile(h, jw_pcts[i])) / d);
	fprintf(f, " %9.2f %9.2f %9.2f %9.2f %9s %9s\n", us(hist_max(h)) / d,
		hist_mean(h) / 1e3 / d, hist_stdev(h) / 1e3 / d,
		us(hist_percentile(h, 50)) / 2,
		cpu_text(&x->client, x->wall_ns, a, sizeof(a)),
		cpu_text(&x->server, x->wall_ns, b, sizeof(b)));
}

/* Under a latency row of several connections: their round trips/s. */
static void lat_conns_row(const struct bench_result *x, FILE *f)
{
	if (x->conns > 1)
		fprintf(f, "  %d conns: round trips/s per conn min %.0f max %.0f, "
			"jain %.3f\n", x->conns, x->conn_min, x->conn_max, x->jain);
}

/* @mbs: the throughput column in MB/s (1e6 bytes) rather than Gb/s. */
static void bw_row(const struct bench_result *x, bool mbs, FILE *f)
{
	char sz[32], a[32], b[32];

	fprintf(f, "%-14s %5d %6s %9" PRIu64 " %12.0f %10.4g %12.0f %12.0f %5.3f "
		"%9s %9s %5d\n",
		x->protocol, x->conns, opts_format_size(x->size, sz, sizeof(sz)),
		x->msgs, x->msg_rate, mbs ? x->gbps * 1e3 / 8 : x->gbps, x->conn_min,
		x->conn_max, x->jain,
		cpu_text(&x->client, x->wall_ns, a, sizeof(a)),
		cpu_text(&x->server, x->wall_ns, b, sizeof(b)), x->batch);
}

/* --coalesce of the run (every row has the same). */
static const char *coalesce_of(const struct bench_report *r)
{
	return r->n_results && r->results[0].coalesce ? r->results[0].coalesce :
	       "default";
}

/* --sendv: the rdmx rows sent each burst with one rdmx_sendv. */
static const char *sendv_of(const struct bench_report *r)
{
	for (int i = 0; i < r->n_results; i++)
		if (r->results[i].sendv)
			return ", one rdmx_sendv a burst";
	return "";
}

void bench_print_table(const struct bench_report *r, FILE *f)
{
	int i;

	fprintf(f, "rdmx bench %s  device %s  peer %s  wait %s", r->timestamp,
		r->device, r->peer, r->wait ? r->wait : "adaptive");
	if (r->notify && r->ack)
		fprintf(f, "  ring protocols: notify %s ack %s", r->notify, r->ack);
	fputc('\n', f);
	if (single_receiver(r))
		fprintf(f, "server: --single-receiver, one thread serves all the "
			"connections of a protocol (tcp: one thread each)\n");
	if (has_mode(r, BENCH_LAT)) {
		fprintf(f, r->one_way ?
			"\nlatency: one-way (round trip / 2) in microseconds; cpu = "
			"user/sys %% of one core\n" :
			"\nlatency: round trip (RTT) in microseconds; one-way = "
			"RTT p50 / 2; cpu = user/sys %% of one core\n");
		fprintf(f, "%-14s %5s %6s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n",
			"protocol", "conns", "size", "iters", "min", "p50", "p90",
			"p99", "p99.9", "max", "mean", "stdev", "one-way",
			"cpu cli", "cpu srv");
		for (i = 0; i < r->n_results; i++)
			if (r->results[i].mode == BENCH_LAT) {
				lat_row(&r->results[i], r->one_way ? 2 : 1, f);
				lat_conns_row(&r->results[i], f);
			}
	}
	if (has_mode(r, BENCH_BW)) {
		fprintf(f, "\nbandwidth: %d outstanding, receiver-confirmed; per-conn "
			"= slowest and fastest connection; jain = their fairness "
			"(1: even); batch = sends per burst (coalesce %s%s)\n",
			r->outstanding, coalesce_of(r), sendv_of(r));
		fprintf(f, "%-14s %5s %6s %9s %12s %10s %12s %12s %5s %9s %9s %5s\n",
			"protocol", "conns", "size", "msgs", "msg/s",
			r->mbs ? "MB/s" : "Gb/s", "per-conn min", "per-conn max",
			"jain", "cpu cli", "cpu srv", "batch");
		for (i = 0; i < r->n_results; i++)
			if (r->results[i].mode == BENCH_BW)
				bw_row(&r->results[i], r->mbs, f);
	}
}

void bench_print_counters(const struct bench_report *r, FILE *f)
{
	const struct bench_counters *c;
	int p, i;

	for (p = 0; p < r->n_protos; p++) {
		c = &r->counters[p];
		if (!c->n)
			continue;
		fprintf(f, "\nhw_counters of %s during %s (non-zero changes):\n",
			r->device, r->protos[p]);
		for (i = 0; i < c->n; i++)
			fprintf(f, "  %-28s %12" PRIu64 "\n", c->name[i], c->value[i]);
	}
}

/* ------------------------------------------------------------------- JSON */

static void json_cpu(FILE *f, const struct bench_result *x)
{
	jw_key(f, "cpu", false);
	fputc('{', f);
	jw_kv_num(f, "client_user_s", (double)x->client.user_ns / 1e9, true);
	jw_kv_num(f, "client_sys_s", (double)x->client.sys_ns / 1e9, false);
	jw_kv_num(f, "server_user_s", (double)x->server.user_ns / 1e9, false);
	jw_kv_num(f, "server_sys_s", (double)x->server.sys_ns / 1e9, false);
	jw_kv_num(f, "client_pct", bench_pct(x->client.user_ns + x->client.sys_ns,
					       x->wall_ns), false);
	jw_kv_num(f, "server_pct", bench_pct(x->server.user_ns + x->server.sys_ns,
					       x->wall_ns), false);
	fputc('}', f);
}

static void json_result(const struct bench_report *r,
			const struct bench_result *x, FILE *f)
{
	int i;

	fputs("    {", f);
	jw_kv_str(f, "protocol", x->protocol, true);
	if (x->notify)
		jw_kv_str(f, "notify", x->notify, false);
	if (x->ack)
		jw_kv_str(f, "ack", x->ack, false);
	jw_kv_str(f, "mode", mode_name(x->mode), false);
	jw_kv_u64(f, "size", x->size, false);
	jw_kv_u64(f, "conns", (uint64_t)x->conns, false);
	jw_key(f, "single_receiver", false);
	fputs(x->single_receiver ? "true" : "false", f);
	jw_kv_u64(f, "batch", (uint64_t)(x->batch ? x->batch : 1), false);
	jw_kv_str(f, "coalesce", x->coalesce ? x->coalesce : "default", false);
	jw_key(f, "sendv", false);
	fputs(x->sendv ? "true" : "false", f);
	jw_kv_str(f, "device", r->device, false);
	jw_kv_str(f, "timestamp", r->timestamp, false);
	jw_kv_u64(f, "msgs", x->msgs, false);
	jw_kv_u64(f, "warmup", x->warmup, false);
	jw_kv_num(f, "seconds", (double)x->wall_ns / 1e9, false);
	jw_kv_num(f, "msg_rate", x->msg_rate, false);
	jw_kv_num(f, "gbps", x->gbps, false);
	jw_key(f, "per_conn_msg_rate", false);
	fputc('[', f);
	for (i = 0; i < x->conns && i < BENCH_MAX_THREADS; i++) {
		if (i)
			fputs(", ", f);
		jw_num(f, x->thread_rate[i]);
	}
	fputc(']', f);
	jw_kv_num(f, "per_conn_min", x->conn_min, false);
	jw_kv_num(f, "per_conn_max", x->conn_max, false);
	jw_kv_num(f, "jain", x->jain, false);
	json_cpu(f, x);
	if (x->mode == BENCH_LAT && x->rtt) {
		jw_lat(f, "rtt_us", x->rtt, 1);
		jw_lat(f, "one_way_us", x->rtt, 2);
	}
	fputc('}', f);
}

static void json_counters(const struct bench_report *r, FILE *f)
{
	const struct bench_counters *c;
	int p, i;

	fputs("  \"hw_counters\": {", f);
	for (p = 0; p < r->n_protos; p++) {
		c = &r->counters[p];
		jw_key(f, r->protos[p] ? r->protos[p] : "?", p == 0);
		fputc('{', f);
		for (i = 0; i < c->n; i++)
			jw_kv_u64(f, c->name[i], c->value[i], i == 0);
		fputc('}', f);
	}
	fputs("}\n", f);
}

int bench_write_json(const struct bench_report *r, FILE *f)
{
	const struct jw_head h = { r->timestamp, r->device, r->fabric, r->peer, r->version,
				   r->cmdline, r->host, r->kernel, r->config_json };
	int i;

	jw_head_where(f, "rdmx bench", &h);
	jw_kv_num(f, "outstanding", r->outstanding, false);
	jw_head_prov(f, &h);
	if (r->pcap)
		jw_kv_str(f, "pcap", r->pcap, false);
	jw_head_config(f, &h);
	fputs(",\n  \"results\": [\n", f);
	for (i = 0; i < r->n_results; i++) {
		json_result(r, &r->results[i], f);
		fputs(i + 1 < r->n_results ? ",\n" : "\n", f);
	}
	fputs("  ],\n", f);
	json_counters(r, f);
	fputs("}\n", f);
	return ferror(f) ? -EIO : 0;
}

/* -------------------------------------------------------------------- CSV */

static const char csv_header[] =
	"timestamp,device,fabric,protocol,mode,size,conns,msgs,warmup,seconds,"
	"msg_rate,gbps,rtt_min_us,rtt_p50_us,rtt_p90_us,rtt_p99_us,rtt_p99_9_us,"
	"rtt_max_us,rtt_mean_us,rtt_stdev_us,one_way_p50_us,client_user_pct,"
	"client_sys_pct,server_user_pct,server_sys_pct,single_receiver,"
	"per_conn_min_msg_rate,per_conn_max_msg_rate,jain,batch,coalesce,sendv\n";

static void csv_lat(const struct hist *h, FILE *f)
{
	if (!h) {
		fputs(",,,,,,,,,", f);
		return;
	}
	jw_csv_lat(f, h);
	fprintf(f, "%.3f,", us(hist_percentile(h, 50)) / 2);
}

int bench_write_csv(const struct bench_report *r, FILE *f)
{
	const struct bench_result *x;
	int i;

	fputs(csv_header, f);
	for (i = 0; i < r->n_results; i++) {
		x = &r->results[i];
		/* names are identifiers: no commas or quotes to escape */
		fprintf(f, "%s,%s,%s,%s,%s,%" PRIu64 ",%d,%" PRIu64 ",%" PRIu64
			",%.9f,%.3f,%.6f,", r->timestamp, r->device, r->fabric,
			x->protocol, mode_name(x->mode), x->size, x->conns, x->msgs,
			x->warmup, (double)x->wall_ns / 1e9, x->msg_rate, x->gbps);
		csv_lat(x->mode == BENCH_LAT ? x->rtt : NULL, f);
		fprintf(f, "%.1f,%.1f,%.1f,%.1f,%d,%.3f,%.3f,%.4f,%d,%s,%d\n",
			bench_pct(x->client.user_ns, x->wall_ns),
			bench_pct(x->client.sys_ns, x->wall_ns),
			bench_pct(x->server.user_ns, x->wall_ns),
			bench_pct(x->server.sys_ns, x->wall_ns), x->single_receiver,
			x->conn_min, x->conn_max, x->jain, x->batch ? x->batch : 1,
			x->coalesce ? x->coalesce : "default", x->sendv);
	}
	return ferror(f) ? -EIO : 0;
}

int bench_json_writer(const void *r, FILE *f)
{
	return bench_write_json(r, f);
}

int bench_csv_writer(const void *r, FILE *f)
{
	return bench_write_csv(r, f);
}
