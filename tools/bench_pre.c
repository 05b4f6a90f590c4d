// SPDX-License-Identifier: MIT
/*
 * rdmx bench: what is checked before the first test, so that a run of many
 * minutes does not end in "cannot write out.json" or a missing gnuplot:
 * the output paths, the plot directory, gnuplot itself, and whether the
 * buffers the sizes need can fit in this machine's memory.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_pre.h"
#include "opts.h"

/* The directory part of @path ("." if none) into @buf. */
static void dir_of(const char *path, char *buf, size_t len)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(buf, len, ".");
	else if (slash == path)
		snprintf(buf, len, "/");
	else
		snprintf(buf, len, "%.*s", (int)(slash - path), path);
}

/* A file @opt will write at @path: not a directory, in a writable one. */
static int check_file(const char *opt, const char *path, char *err, size_t len)
{
	char dir[PATH_MAX];
	struct stat st;

	if (!strcmp(path, "-"))
		return 0;
	if (!stat(path, &st) && S_ISDIR(st.st_mode)) {
		snprintf(err, len, "%s %s: is a directory", opt, path);
		return -1;
	}
	dir_of(path, dir, sizeof(dir));
	if (access(dir, W_OK | X_OK)) {
		snprintf(err, len, "%s %s: cannot write in %s: %s", opt, path, dir,
			 strerror(errno));
		return -1;
	}
	return 0;
}

int bench_check_file(const char *opt, const char *path, char *err, size_t len)
{
	return check_file(opt, path, err, len);
}

/* Two options naming one file: by name, or the same existing file. */
static bool same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	if (!strcmp(a, b))
		return true;
	return !stat(a, &sa) && !stat(b, &sb) && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* The plot directory: an existing writable directory, or creatable. */
static int check_plot_dir(const char *dir, char *err, size_t len)
{
	char parent[PATH_MAX];
	struct stat st;

	if (!stat(dir, &st)) {
		if (!S_ISDIR(st.st_mode)) {
			snprintf(err, len, "--plot %s: not a directory", dir);
			return -1;
		}
		if (access(dir, W_OK | X_OK)) {
			snprintf(err, len, "--plot %s: cannot write in it: %s", dir,
				 strerror(errno));
			return -1;
		}
		return 0;
	}
	dir_of(dir, parent, sizeof(parent));
	if (access(parent, W_OK | X_OK)) {
		snprintf(err, len, "--plot %s: cannot create it in %s: %s", dir, parent,
			 strerror(errno));
		return -1;
	}
	return 0;
}

int bench_find_program(const char *name, char *buf, size_t len)
{
	const char *path = getenv("PATH"), *p;
	size_t n;

	for (p = path ? path : "/usr/bin:/bin"; *p; p += n + (p[n] == ':')) {
		n = strcspn(p, ":");
		if ((size_t)snprintf(buf, len, "%.*s/%s", (int)n, n ? p : ".",
				     name) >= len)
			continue;
		if (!access(buf, X_OK))
			return 0;
	}
	return -ENOENT;
}

bool bench_have_program(const char *name)
{
	char file[PATH_MAX];

	return bench_find_program(name, file, sizeof(file)) == 0;
}

int bench_check_outputs(const char *json, const char *csv, const char *plot,
			char *err, size_t len)
{
	if (json && csv && !strcmp(json, "-") && !strcmp(csv, "-")) {
		snprintf(err, len, "--json - and --csv -: only one can go to stdout");
		return -1;
	}
	if (json && check_file("--json", json, err, len))
		return -1;
	if (csv && check_file("--csv", csv, err, len))
		return -1;
	if (json && csv && same_file(json, csv)) {
		snprintf(err, len, "--json and --csv name the same file (%s)", csv);
		return -1;
	}
	if (plot && ((json && same_file(json, plot)) || (csv && same_file(csv, plot)))) {
		snprintf(err, len, "--plot %s is also an output file", plot);
		return -1;
	}
	if (plot && check_plot_dir(plot, err, len))
		return -1;
	if (plot && !bench_have_program("gnuplot")) {
		snprintf(err, len, "--plot needs gnuplot, which is not in PATH "
			 "(Debian: apt install gnuplot-nox)");
		return -1;
	}
	return 0;
}

uint64_t bench_mem_estimate(const struct bench_mem *m)
{
	/* per connection and side: each send and receive slot can hold one
	 * message of the largest size, and a ring protocol's ring */
	uint64_t slots = m->send_depth + m->recv_depth, per_side, all;

	if (__builtin_mul_overflow(slots, m->max_msg, &per_side) ||
	    __builtin_add_overflow(per_side, m->ring_size, &per_side) ||
	    __builtin_mul_overflow(per_side, m->conns * (m->self_test ? 2 : 1), &all))
		return UINT64_MAX;
	return all;
}

uint64_t bench_mem_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	unsigned long long kb = 0;
	char line[128];

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			break;
	fclose(f);
	return (uint64_t)kb * 1024;
}
