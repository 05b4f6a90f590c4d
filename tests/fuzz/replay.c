/* SPDX-License-Identifier: MIT */
/*
 * Corpus replay without libFuzzer (gcc builds): run every file named on the
 * command line, or found in a directory named there, through the harness's
 * LLVMFuzzerTestOneInput() once. A crash or a broken invariant aborts, so
 * the committed corpus (crash reproducers included) is a regression test.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

#define REPLAY_MAX_INPUT (1u << 20)

/* Run one file; 0, or -1 when it cannot be read. */
static int replay_file(const char *path)
{
	static uint8_t buf[REPLAY_MAX_INPUT];
	FILE *f = fopen(path, "rb");
	size_t n;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	return 0;
}

/* Run every regular file in @dir; the number run, or -1. */
static long replay_dir(const char *dir)
{
	char path[4096];
	struct dirent *e;
	struct stat st;
	long count = 0;
	DIR *d = opendir(dir);

	if (!d) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (stat(path, &st) || !S_ISREG(st.st_mode))
			continue;
		if (replay_file(path)) {
			count = -1;
			break;
		}
		count++;
	}
	closedir(d);
	return count;
}

int main(int argc, char **argv)
{
	long total = 0, n;
	struct stat st;

	for (int i = 1; i < argc; i++) {
		if (stat(argv[i], &st)) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		n = S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : !replay_file(argv[i]) ? 1 : -1;
		if (n < 0)
			return 1;
		total += n;
	}
	if (!total) {
		fprintf(stderr, "replay: no input run (an empty corpus tests nothing)\n");
		return 1;
	}
	printf("replay: %ld inputs, no crash\n", total);
	return 0;
}
