/* SPDX-License-Identifier: MIT */
/* What the subcommands that open rdmx connections share (cli.c). */
#ifndef RDMX_TOOLS_CLI_H
#define RDMX_TOOLS_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <rdmx/rdmx.h>

#include "opts.h"

/* One side's first error, formatted but not yet printed. */
struct cli_err {
	char msg[512];
};

/** cli_set_err - record the first error; later ones are dropped. */
void cli_set_err(struct cli_err *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/**
 * cli_note - a worker's failure: its first error into @e (as
 * cli_set_err), @rc into *@rcp. Returns @rc.
 */
int cli_note(struct cli_err *e, int *rcp, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

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
 * and @gid_index; with @ib_port (-i; 0: any), that port's (rdma_cm binds
 * to the port of the address). On failure prints why (and a hint) and
 * returns EXIT_FAIL.
 */
int cli_local_addr(const char *cmd, const char *fabric, const char *device,
		   int ib_port, int gid_index, char *buf, size_t len);

/* --ring-size: bounds, and the help line both subcommands show. */
#define CLI_RING_MIN 4096ull
#define CLI_RING_MAX (1ull << 30)
#define CLI_RING_HELP "receive ring of the ring protocols: a power of 2 (default: " \
	"1M, or 4 x the largest message when that is more)"

/**
 * cli_ring_size - the ring size to use: @given (0: not given) must be a
 * power of two, else an error is printed for @cmd and -1 returned; 0 gives
 * the library's default, or 4 x @max_msg rounded up to a power of two when
 * that is larger (a ring must hold two records of the largest message).
 */
long long cli_ring_size(const char *cmd, uint64_t given, uint64_t max_msg);

/* --wait: its choices (NULL-terminated) and the help line both
 * subcommands show. */
extern const char *const cli_wait_modes[];
#define CLI_WAIT_HELP "how a waiting call waits: spin (busy-poll), block (sleep " \
	"between polls) or adaptive (spin 50 us, then as block; the default)"

/** cli_wait_mode - the enum rdmx_wait_mode of a --wait choice. */
uint8_t cli_wait_mode(const char *name);

/* --notify and --ack of the ring protocols (write_simplex, write_magic,
 * write_duplex): their choices (NULL-terminated, index = enum value) and
 * help lines. */
extern const char *const cli_notify_modes[];
extern const char *const cli_ack_modes[];
#define CLI_NOTIFY_HELP "ring protocols: how the receiver learns of a message: " \
	"poll (it polls the record), imm (WRITE with immediate, a receive " \
	"completion each), off (an inline WRITE of the new tail into a word it " \
	"polls) or rev (records laid downward, a valid byte polled); default: " \
	"the protocol's (poll); both sides must agree"
#define CLI_ACK_HELP "ring protocols: how the receiver's head returns: send " \
	"(it SENDs it, write_simplex/magic's default) or read (the sender READs " \
	"it, write_duplex's default); both sides must agree"

/** cli_is_ring - is @protocol one of the ring protocols (--notify, --ack)? */
int cli_is_ring(const char *protocol);
/* --notify and --ack name the write ring's variants: for the other
 * protocols of a run (bench, pingpong -p LIST) @o keeps their defaults. */
void cli_ring_variant_only(const char *protocol, struct rdmx_conn_opts *o);

/** cli_choice_index - the index of @name in the NULL-terminated @choices
 * (0 when absent: the "default" entry). */
uint8_t cli_choice_index(const char *const *choices, const char *name);

/** cli_elapsed_ns - @b - @a in nanoseconds. */
/* The admission caps of a benchmark's server: rdmx_listener_opts_init()'s,
 * with max_mem lifted (the sizes under test decide the memory) and
 * max_conns_per_peer lifted (a lab's clients share one host, one
 * address); the count stays capped. */
void cli_lab_caps(struct rdmx_listener_opts *lo);

uint64_t cli_elapsed_ns(const struct timespec *a, const struct timespec *b);

/*
 * The connection options every subcommand shares (cli_conn.c): one block
 * of rows, one help text each, included in each command's options table
 * (OPTS_INCLUDE). A command says where each value goes; a NULL
 * destination leaves its row out (doctor has no ring).
 */
struct cli_conn_dest {
	const char **protocol;		/* -c, --protocol */
	const char *const *protocols;	/* its choices; NULL: a list (bench) */
	const char **device;		/* -d, --device */
	long long *ib_port;		/* -i, --ib-port (0: any) */
	long long *gid_index;		/* -x, --gid-index (-1: automatic) */
	long long *port;		/* -p, --port */
	long long port_min;		/* 0, or -1 where -1 means "none" (kv) */
	long long *timeout;		/* --timeout, ms */
	const char **wait, **notify, **ack;	/* --wait, --notify, --ack */
	uint64_t *ring_size;		/* --ring-size */
	const char **fabric;		/* --fabric */
};

#define CLI_CONN_ROWS 24	/* rows cli_conn_rows() may write, terminator included */

/**
 * cli_conn_rows - the shared connection rows for @d into @rows (at most
 * CLI_CONN_ROWS, all-zero terminated), hidden old spellings included.
 * The fabric's default is RDMX_FABRIC from the environment when set.
 */
void cli_conn_rows(const struct cli_conn_dest *d, struct opt *rows);

/**
 * cli_conn_check - after parsing: --notify and --ack only with a ring
 * protocol among @protocols (a comma list; "all" has them), and
 * RDMX_FABRIC naming a fabric. Prints the usage error for @cmd and
 * returns EXIT_USAGE, else CMD_CONTINUE.
 */
int cli_conn_check(const char *cmd, const struct cli_conn_dest *d);

/**
 * cli_fake_server_refused - a server on the fake fabric (@fabric) serves
 * only its own process: refused with a message for @cmd (EXIT_USAGE);
 * CMD_CONTINUE on a real fabric.
 */
int cli_fake_server_refused(const char *cmd, const char *fabric);

#endif /* RDMX_TOOLS_CLI_H */
