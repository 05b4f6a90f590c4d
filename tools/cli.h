/* SPDX-License-Identifier: MIT */
/* What the subcommands that open rdmx connections share (cli.c). */
#ifndef RDMX_TOOLS_CLI_H
#define RDMX_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <rdmx/rdmx.h>

/* One side's first error, formatted but not yet printed. */
struct cli_err {
	char msg[512];
};

/** cli_set_err - record the first error; later ones are dropped. */
void cli_set_err(struct cli_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/**
 * cli_fail - record "<what>: <rdmx_strerror(rc)> (<detail>)", the detail of
 * @conn if any, else the thread's last error. Returns EXIT_FAIL.
 */
int cli_fail(struct cli_err *e, const char *what, int rc, const rdmx_conn *conn);

/** cli_print_err - "rdmx <cmd>: <msg>" on stderr, if there is an error. */
void cli_print_err(const char *cmd, const struct cli_err *e);

/**
 * cli_local_addr - the local address for a server or a self-test: "fake"
 * on the fake fabric, else the one rdmx_pick_address() picks for @device
 * and @gid_index. On failure prints why (and a hint) and returns EXIT_FAIL.
 */
int cli_local_addr(const char *cmd, const char *fabric, const char *device,
		   int gid_index, char *buf, size_t len);

/** cli_elapsed_ns - @b - @a in nanoseconds. */
uint64_t cli_elapsed_ns(const struct timespec *a, const struct timespec *b);

#endif /* RDMX_TOOLS_CLI_H */
