/* SPDX-License-Identifier: MIT */
/*
 * The memcached ASCII protocol over the rdmx KV store: a parser and
 * executor with no sockets (mc_proto.c). The server (mc_server.c) feeds a
 * session the bytes a client sent and writes back what the session put in
 * its output buffer.
 */
#ifndef RDMX_KV_MC_PROTO_H
#define RDMX_KV_MC_PROTO_H

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
};

/* One client connection's protocol state. */
struct rdmx__mc_sess {
	struct rdmx__kv *kv;
	struct rdmx__mc_counters *count; /* shared, may be NULL */
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
};

int rdmx__mc_sess_init(struct rdmx__mc_sess *s, struct rdmx__kv *kv,
		       struct rdmx__mc_counters *count, const char *version);
void rdmx__mc_sess_fini(struct rdmx__mc_sess *s);
size_t rdmx__mc_execute(struct rdmx__mc_sess *s, const uint8_t *in, size_t n);
void rdmx__mc_out_consume(struct rdmx__mc_sess *s, size_t n);

#endif /* RDMX_KV_MC_PROTO_H */
