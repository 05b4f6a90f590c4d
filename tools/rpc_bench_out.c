// SPDX-License-Identifier: MIT
/* rdmx rpc bench: the table on stdout, the JSON and the CSV files. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "json_out.h"
#include "opts.h"
#include "rpc_bench.h"

/* Nanoseconds as microseconds. */
static double us(uint64_t ns)
{
	return (double)ns / 1e3;
}

/* "msg/send_recv", or the transport alone. */
static const char *label(const struct rb_result *x, char *buf, size_t len)
{
	if (x->protocol)
		snprintf(buf, len, "%s/%s", x->transport, x->protocol);
	else
		snprintf(buf, len, "%s", x->transport);
	return buf;
}

/* The slowest and the fastest client's calls/s. */
/* One row of the table. */
static void row(const struct rb_result *x, FILE *f)
{
	char name[64], sz[32], wrs[16];
	double lo, hi;
	size_t i;

	bench_range(x->client_rate, x->clients < RB_MAX_CLIENTS ? x->clients :
		    RB_MAX_CLIENTS, &lo, &hi);
	if (isnan(x->srv_wrs))
		snprintf(wrs, sizeof(wrs), "-");
	else
		snprintf(wrs, sizeof(wrs), "%.2f", x->srv_wrs);
	fprintf(f, "%-16s %6s %7d %9" PRIu64 " %10.0f", label(x, name, sizeof(name)),
		opts_format_size(x->size, sz, sizeof(sz)), x->clients, x->calls, x->rate);
	for (i = 0; i < JW_N_PCTS; i++)
		fprintf(f, " %8.2f", us(hist_percentile(x->rtt, jw_pcts[i])));
	fprintf(f, " %10.0f %10.0f %5.3f %8.2f %6s %6.0f\n", lo, hi, x->jain,
		x->srv_cpu_us, wrs, x->cli_cpu_pct);
}

void rb_print_table(const struct rb_report *r, FILE *f)
{
	fprintf(f, "rdmx rpc bench %s  device %s  peer %s  window %d  server workers %d\n",
		r->head.timestamp, r->head.device, r->head.peer, r->window, r->workers);
	fprintf(f, "\necho calls: round trip in microseconds; client min/max = slowest "
		"and fastest client's calls/s;\njain = fairness of the clients' calls/s "
		"(1 = even); srv = the server's CPU us and outbound work\nrequests per "
		"call; cli%% = the clients' CPU, %% of one core\n");
	fprintf(f, "%-16s %6s %7s %9s %10s %8s %8s %8s %8s %10s %10s %5s %8s %6s %6s\n",
		"transport", "size", "clients", "calls", "calls/s", "p50", "p90", "p99",
		"p99.9", "client min", "client max", "jain", "srv us", "srv wr", "cli%");
	for (int i = 0; i < r->n; i++)
		row(&r->rows[i], f);
}

/* ------------------------------------------------------------------- JSON */

/* The per-client arrays. */
static void json_clients(const struct rb_result *x, FILE *f)
{
	int i;

	jw_key(f, "per_client_calls", false);
	fputc('[', f);
	for (i = 0; i < x->clients; i++)
		fprintf(f, "%s%" PRIu64, i ? ", " : "", x->client_calls[i]);
	fputc(']', f);
	jw_key(f, "per_client_calls_per_s", false);
	fputc('[', f);
	for (i = 0; i < x->clients; i++) {
		if (i)
			fputs(", ", f);
		jw_num(f, x->client_rate[i]);
	}
	fputc(']', f);
}

/* Result row @i of the report as a JSON object. */
static void json_row(const void *report, int i, FILE *f)
{
	const struct rb_report *r = report;
	const struct rb_result *x = &r->rows[i];
	double lo, hi;

	bench_range(x->client_rate, x->clients < RB_MAX_CLIENTS ? x->clients :
		    RB_MAX_CLIENTS, &lo, &hi);
	fputs("    {", f);
	jw_kv_str(f, "transport", x->transport, true);
	jw_key(f, "protocol", false);
	if (x->protocol)
		jw_str(f, x->protocol);
	else
		fputs("null", f);
	jw_kv_u64(f, "size", x->size, false);
	jw_kv_u64(f, "clients", (uint64_t)x->clients, false);
	jw_kv_u64(f, "window", (uint64_t)r->window, false);
	jw_kv_str(f, "timestamp", r->head.timestamp, false);
	jw_kv_u64(f, "calls", x->calls, false);
	jw_kv_u64(f, "warmup", x->warmup, false);
	jw_kv_num(f, "seconds", (double)x->wall_ns / 1e9, false);
	jw_kv_num(f, "calls_per_s", x->rate, false);
	json_clients(x, f);
	jw_kv_num(f, "client_min_calls_per_s", lo, false);
	jw_kv_num(f, "client_max_calls_per_s", hi, false);
	jw_kv_num(f, "jain", x->jain, false);
	jw_kv_num(f, "server_cpu_us_per_call", x->srv_cpu_us, false);
	jw_kv_num(f, "server_cpu_pct", x->srv_cpu_pct, false);
	jw_kv_num(f, "server_wr_per_call", x->srv_wrs, false);
	jw_kv_num(f, "client_cpu_pct", x->cli_cpu_pct, false);
	jw_lat(f, "rtt_us", x->rtt, 1);
	fputc('}', f);
}

int rb_write_json(const void *report, FILE *f)
{
	const struct rb_report *r = report;

	jw_write_head(f, "rdmx rpc bench", &r->head);
	return jw_write_results(f, r, r->n, json_row);
}

/* -------------------------------------------------------------------- CSV */

static const char csv_header[] =
	"timestamp,device,fabric,transport,protocol,size,clients,window,calls,warmup,"
	"seconds,calls_per_s,rtt_min_us,rtt_p50_us,rtt_p90_us,rtt_p99_us,"
	"rtt_p99_9_us,rtt_max_us,rtt_mean_us,rtt_stdev_us,client_min_calls_per_s,"
	"client_max_calls_per_s,jain,server_cpu_us_per_call,server_cpu_pct,"
	"server_wr_per_call,client_cpu_pct\n";

/* A number, or nothing for NAN. */
static void csv_num(FILE *f, double v, const char *sep)
{
	if (isfinite(v))
		fprintf(f, "%.6g", v);
	fputs(sep, f);
}

int rb_write_csv(const void *report, FILE *f)
{
	const struct rb_report *r = report;
	double lo, hi;

	fputs(csv_header, f);
	for (int i = 0; i < r->n; i++) {
		const struct rb_result *x = &r->rows[i];

		bench_range(x->client_rate, x->clients < RB_MAX_CLIENTS ? x->clients :
		    RB_MAX_CLIENTS, &lo, &hi);
		/* names are identifiers: no commas or quotes to escape */
		fprintf(f, "%s,%s,%s,%s,%s,%" PRIu64 ",%d,%d,%" PRIu64 ",%" PRIu64
			",%.9f,%.3f,", r->head.timestamp, r->head.device, r->head.fabric, x->transport,
			x->protocol ? x->protocol : "", x->size, x->clients, r->window,
			x->calls, x->warmup, (double)x->wall_ns / 1e9, x->rate);
		jw_csv_lat(f, x->rtt);
		csv_num(f, lo, ",");
		csv_num(f, hi, ",");
		csv_num(f, x->jain, ",");
		csv_num(f, x->srv_cpu_us, ",");
		csv_num(f, x->srv_cpu_pct, ",");
		csv_num(f, x->srv_wrs, ",");
		csv_num(f, x->cli_cpu_pct, "\n");
	}
	return ferror(f) ? -EIO : 0;
}
