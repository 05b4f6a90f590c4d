// SPDX-License-Identifier: MIT
/* Result writers' shared pieces: JSON values, provenance, whole files. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "json_out.h"

const double jw_pcts[JW_N_PCTS] = { 50, 90, 99, 99.9 };
const char *const jw_pct_names[JW_N_PCTS] = { "p50", "p90", "p99", "p99_9" };

/* Nanoseconds as microseconds. */
static double us(uint64_t ns)
{
	return (double)ns / 1e3;
}

void jw_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", (unsigned char)*s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

void jw_num(FILE *f, double v)
{
	if (isfinite(v))
		fprintf(f, "%.9g", v);
	else
		fputs("null", f);
}

void jw_key(FILE *f, const char *k, bool first)
{
	if (!first)
		fputs(", ", f);
	jw_str(f, k);
	fputs(": ", f);
}

void jw_kv_num(FILE *f, const char *k, double v, bool first)
{
	jw_key(f, k, first);
	jw_num(f, v);
}

void jw_kv_u64(FILE *f, const char *k, uint64_t v, bool first)
{
	jw_key(f, k, first);
	fprintf(f, "%" PRIu64, v);
}

void jw_kv_str(FILE *f, const char *k, const char *v, bool first)
{
	jw_key(f, k, first);
	jw_str(f, v);
}

void jw_lat(FILE *f, const char *k, const struct hist *h, double div)
{
	size_t i;

	jw_key(f, k, false);
	fputc('{', f);
	jw_kv_num(f, "min", us(hist_min(h)) / div, true);
	for (i = 0; i < JW_N_PCTS; i++)
		jw_kv_num(f, jw_pct_names[i], us(hist_percentile(h, jw_pcts[i])) / div,
			  false);
	jw_kv_num(f, "max", us(hist_max(h)) / div, false);
	jw_kv_num(f, "mean", hist_mean(h) / 1e3 / div, false);
	jw_kv_num(f, "stdev", hist_stdev(h) / 1e3 / div, false);
	fputc('}', f);
}

void jw_csv_lat(FILE *f, const struct hist *h)
{
	size_t i;

	fprintf(f, "%.3f,", us(hist_min(h)));
	for (i = 0; i < JW_N_PCTS; i++)
		fprintf(f, "%.3f,", us(hist_percentile(h, jw_pcts[i])));
	fprintf(f, "%.3f,%.3f,%.3f,", us(hist_max(h)), hist_mean(h) / 1e3,
		hist_stdev(h) / 1e3);
}

void jw_config_head(char *buf, size_t len, const char *key, const char *const *names,
		    int n, const uint64_t *sizes, int n_sizes)
{
	int i;

	snprintf(buf, len, "{\"%s\": [", key);
	for (i = 0; i < n; i++)
		snprintf(buf + strlen(buf), len - strlen(buf), "%s\"%s\"", i ? ", " : "",
			 names[i]);
	snprintf(buf + strlen(buf), len - strlen(buf), "], \"sizes\": [");
	for (i = 0; i < n_sizes; i++)
		snprintf(buf + strlen(buf), len - strlen(buf), "%s%" PRIu64, i ? ", " : "",
			 sizes[i]);
	snprintf(buf + strlen(buf), len - strlen(buf), "]");
}

int jw_save(const char *cmd, const char *json, const char *csv, bool final,
	    const void *arg, int (*json_fn)(const void *, FILE *),
	    int (*csv_fn)(const void *, FILE *))
{
	int rc = 0;

	if (json && (final || strcmp(json, "-")) && jw_write_file(cmd, json, arg, json_fn))
		rc = -1;
	if (csv && (final || strcmp(csv, "-")) && jw_write_file(cmd, csv, arg, csv_fn))
		rc = -1;
	return rc;
}

void jw_provenance(struct jw_prov *p, int argc, char **argv)
{
	struct utsname u;
	int i;

	snprintf(p->cmdline, sizeof(p->cmdline), "rdmx");
	for (i = 0; i < argc; i++) /* not shell-quoted */
		snprintf(p->cmdline + strlen(p->cmdline),
			 sizeof(p->cmdline) - strlen(p->cmdline), " %s", argv[i]);
	if (uname(&u))
		memset(&u, 0, sizeof(u));
	snprintf(p->host, sizeof(p->host), "%s", u.nodename);
	snprintf(p->kernel, sizeof(p->kernel), "%s %s %s", u.sysname, u.release,
		 u.machine);
}

void jw_head_where(FILE *f, const char *tool, const struct jw_head *h)
{
	fputs("{\n  ", f);
	jw_kv_str(f, "tool", tool, true);
	fputs(",\n  ", f);
	jw_kv_str(f, "timestamp", h->timestamp, true);
	jw_kv_str(f, "device", h->device, false);
	jw_kv_str(f, "fabric", h->fabric, false);
	jw_kv_str(f, "peer", h->peer, false);
}

void jw_head_prov(FILE *f, const struct jw_head *h)
{
	fputs(",\n  ", f);
	jw_kv_str(f, "rdmx_version", h->version, true);
	jw_kv_str(f, "command_line", h->cmdline, false);
	jw_kv_str(f, "host", h->host, false);
	jw_kv_str(f, "kernel", h->kernel, false);
}

void jw_head_config(FILE *f, const struct jw_head *h)
{
	if (h->config_json) {
		jw_key(f, "config", false);
		fputs(h->config_json, f);
	}
}

void jw_write_head(FILE *f, const char *tool, const struct jw_head *h)
{
	jw_head_where(f, tool, h);
	jw_head_prov(f, h);
	jw_head_config(f, h);
}

int jw_write_results(FILE *f, const void *report, int n,
		     void (*row)(const void *report, int i, FILE *f))
{
	fputs(",\n  \"results\": [\n", f);
	for (int i = 0; i < n; i++) {
		row(report, i, f);
		fputs(i + 1 < n ? ",\n" : "\n", f);
	}
	fputs("  ]\n}\n", f);
	return ferror(f) ? -EIO : 0;
}

FILE *jw_table_file(const char *json, const char *csv)
{
	return (json && !strcmp(json, "-")) || (csv && !strcmp(csv, "-")) ? stderr : stdout;
}

int jw_write_file(const char *cmd, const char *path, const void *arg,
		  int (*fn)(const void *arg, FILE *f))
{
	char tmp[4096];
	int rc = -ENAMETOOLONG;
	FILE *f;

	if (!strcmp(path, "-")) { /* stdout: written once, at the end */
		rc = fn(arg, stdout);
		return fflush(stdout) ? -errno : rc;
	}
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		goto fail;
	f = fopen(tmp, "w");
	if (!f) {
		rc = -errno;
		goto fail;
	}
	rc = fn(arg, f);
	if (fclose(f) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (!rc)
		return 0;
	unlink(tmp);
fail:
	fprintf(stderr, "rdmx %s: cannot write %s: %s\n", cmd, path, strerror(-rc));
	return rc;
}
