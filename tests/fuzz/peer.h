/* SPDX-License-Identifier: MIT */
/*
 * A hostile peer for the fuzz harnesses: a listener of the library on the
 * fake fabric, and a raw endpoint that connects to it through the fabric
 * seam with whatever private data the fuzzer chose, then WRITEs and SENDs
 * whatever it likes. No cmocka: a set-up failure aborts (FZ_CHECK).
 */
#ifndef RDMX_TESTS_FUZZ_PEER_H
#define RDMX_TESTS_FUZZ_PEER_H

#include <stddef.h>
#include <stdint.h>

#include <rdmx/rdmx.h>

#include "core/fabric.h"
#include "core/wire.h"

/* The process's fake-fabric context (created once). */
rdmx_ctx *fz_ctx(void);

/* The harnesses' connection options: @protocol, messages up to @max_msg,
 * 8 send and receive buffers, a ring of @ring_size bytes (0: the default). */
struct rdmx_conn_opts fz_opts(const char *protocol, uint32_t max_msg, uint64_t ring_size);

/* A listener on fz_ctx() with @opts (port 0), created once per @slot
 * (0..7: one per protocol/option set a harness uses), kept
 * with its options for the process's life. */
rdmx_listener *fz_listener(int slot, const struct rdmx_conn_opts *opts);

/* Destroy the listener of @slot (the next fz_listener() makes a new one):
 * for state a listener keeps across connections (write_atomic's ring). */
void fz_listener_drop(int slot);

/* The raw peer: its ep, one CQ, and a registered 64 KiB buffer. */
struct fz_peer {
	struct rdmx__ep *ep;
	struct rdmx__cq *cq;
	struct rdmx__mr *mr;
	uint8_t *buf;
	int connected;
	int broken; /* a post failed or never completed: post no more */
	uint8_t reply[RDMX__PDATA_BUF];
	size_t rlen;
};

#define FZ_PEER_BUF 65536u
/* Bytes at the start of the buffer that fz_peer_post() sends from. */
#define FZ_PEER_SCRATCH 16384u

/* Create @p's ep (resolved to the listener of @slot), CQ, QP, registered
 * buffer and 8 posted receives. */
void fz_peer_open(struct fz_peer *p, int slot);

/*
 * Connect @p (from fz_peer_open) to the listener of @slot with @plen bytes of @pd while a
 * thread accepts; 0 (*@server the accepted conn, the reply in @p) or the
 * connect's or accept's -errno. After a reject the accept is ended by a
 * dial with the listener's own options (rdmx_accept goes on after one).
 */
int fz_peer_connect(struct fz_peer *p, int slot, const void *pd, size_t plen,
		    rdmx_conn **server);

/* Post one work request on @p (local buffer: @p->buf + @at, within
 * FZ_PEER_SCRATCH) and poll its completion (boundedly); 0 or -errno. */
int fz_peer_post(struct fz_peer *p, enum rdmx__op op, size_t at, uint32_t len,
		 uint64_t raddr, uint32_t rkey, uint32_t imm);

/* FETCH_ADD @add at @raddr (scratch byte 0 takes the result); the old
 * value, 0 if it failed. */
uint64_t fz_peer_faa(struct fz_peer *p, uint64_t raddr, uint32_t rkey, uint64_t add);

/* Post @n receives of 256 bytes each (from the end of @p->buf). */
void fz_peer_recvs(struct fz_peer *p, int n);

/* Disconnect and free @p's resources. */
void fz_peer_close(struct fz_peer *p);

#endif /* RDMX_TESTS_FUZZ_PEER_H */
