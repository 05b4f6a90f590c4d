/* SPDX-License-Identifier: MIT */
/*
 * A memcached session's state (the protocol: mc_proto.h; its output and
 * buffer caps: mc_out.h). A header of structs, below both.
 */
#ifndef RDMX_KV_MC_SESS_H
#define RDMX_KV_MC_SESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv/kv_internal.h"

#define RDMX__MC_LINE_MAX 2048          /* a command line (not get/gets) */
#define RDMX__MC_GET_LINE_MAX (1 << 20) /* a get/gets line with many keys */
#define RDMX__MC_OUT_HIGH (1u << 20)    /* replies held before reading stops */

/* What a server counts across its sessions (for "stats"). */
struct rdmx__mc_counters {
	uint64_t started;   /* store clock at start */
	uint64_t curr_conns, total_conns, rejected_conns;
	uint64_t cmd_get, get_hits, cmd_set, cmd_touch, cmd_flush;
	uint64_t listen_disabled; /* accepting paused: out of descriptors */
	uint64_t accept_failed;   /* accept4 calls that failed */
	uint64_t idle_kicks;      /* connections closed for idleness */
};

/*
 * The memory a server's sessions may hold for buffered requests and
 * replies: per connection (its input buffer, data block and output) and
 * all connections together. The server (one thread) shares one struct
 * among its sessions; NULL: no caps (the tests, the fuzz harness).
 */
struct rdmx__mc_mem {
	size_t conn_max;  /* bytes one connection may hold */
	size_t total_max; /* bytes all connections may hold together */
	size_t total;     /* bytes they hold now */
	uint64_t refused; /* growths refused (stats: rdmx_buffer_refused) */
};

/* One client connection's protocol state. */
struct rdmx__mc_sess {
	struct rdmx__kv *kv;
	struct rdmx__mc_counters *count; /* shared, may be NULL */
	struct rdmx__mc_mem *mem;        /* shared caps, may be NULL */
	size_t held;                     /* bytes charged to mem by this session */
	const char *version;
	struct rdmx__kv_reader rd;
	/* A storage command waiting for its data block. */
	bool pending;
	struct rdmx__kv_put put;
	char key[RDMX__KV_KEY_MAX];
	bool noreply;
	uint8_t *data;            /* value + "\r\n" */
	size_t data_len, data_need;
	uint64_t swallow;         /* bytes of a refused data block to drop */
	size_t get_pos;           /* a get line stopped at its output bound: where
				   * in the line its next key is (0: none) */
	bool closing;             /* quit, or a line too long: close after output */
	uint8_t *out;             /* replies not yet sent */
	size_t out_len, out_cap;
	bool out_failed;          /* no memory for a reply: close */
	size_t scanned;           /* bytes of the partial line at the input's
				   * start already searched for its newline */
	uint64_t scan_bytes;      /* bytes searched for newlines, in all */
	uint32_t turn_max;        /* commands run per turn (0: no bound) */
	uint32_t turn_left;       /* of this turn (the server sets it) */
};

#endif /* RDMX_KV_MC_SESS_H */
