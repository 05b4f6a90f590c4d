/* SPDX-License-Identifier: MIT */
/*
 * Transport "herd", private: the wire's sizes, the connection and the
 * listener, and the calls between its files (the design: rpc_herd_ops.c).
 *   rpc_herd_conn.c    what both sides do with a connection
 *   rpc_herd_server.c  the listener: set-up, slot polling, UD responses
 *   rpc_herd_client.c  the dialer: set-up, slot WRITEs, UD receives
 *   rpc_herd_ops.c         the transport's table and its both-sides calls
 */
#ifndef RDMX_RPC_HERD_PRIV_H
#define RDMX_RPC_HERD_PRIV_H

#include <stdatomic.h>

#include "core/dgram.h"
#include "core/mw.h"
#include "rpc/rpc_int.h"

#define HERD_QKEY 0x48455244u
#define HERD_TRAILER 5u         /* u32 length, u8 mark */
#define HERD_NONCE 8u           /* before every UD response: the client's nonce */
#define HERD_SETUP_LEN (8u + 2 * RDMX__QP_DESC_WIRE + HERD_NONCE)
#define HERD_REPLY_LEN (24u + 2 * RDMX__QP_DESC_WIRE)
#define HERD_SLOT_MAX (1u << 24)
#define HERD_UC_DEPTH 16u
#define HERD_UD_DEPTH 64u

/* One UD QP of the server, per worker; its lock makes a responder the
 * QP's one thread for a post and its completion. */
struct herd_ud {
	pthread_mutex_t lock;
	struct rdmx__dgram *g;
	struct rdmx__mr *mr;
	uint8_t *buf;                 /* dev.ud_max bytes: the SEND's source */
};

struct herd_conn;

/* The listener side: s->tstate. */
struct herd_srv {
	struct rdmx_rpc_server *s;
	rdmx_listener *lis;
	struct herd_ud *ud;
	unsigned nud, next_ud;
	uint32_t slot;                /* bytes per request slot */
	enum rdmx__iso iso;           /* how the slots are kept to their client
				       * (0 until the first set-up) */
	struct herd_conn *conns;      /* every connection; set up: slots polled */
	unsigned idle;                /* empty rounds since the last peer check */
	struct herd_conn *cur;        /* round robin: the next conn ... */
	uint32_t cur_slot;            /* ... and its next slot */
	_Atomic uint64_t ud_sends, ctrl_sends;
};

/* A connection, either side (@hs set on the server's). */
struct herd_conn {
	rdmx_conn *conn;
	void *user;
	struct herd_srv *hs;
	int timeout_ms;
	struct rdmx__dgram *uc;       /* requests: the client's WRITEs land in mem */
	struct rdmx__mr *mr;
	struct rdmx__export exp;      /* server: the slots, to this client only */
	uint8_t *mem;                 /* server: the slots; client: tx, then rx */
	size_t memlen;
	uint8_t *tx;                  /* a frame to send (alloc) */
	size_t txcap;
	uint32_t window, slot;
	uint32_t slots;               /* server: polled (window once set up) */
	uint64_t nonce;               /* the client's: heads its UD responses */
	bool setup, linked;
	struct rdmx__err err;
	/* server */
	struct herd_ud *ud;
	struct rdmx__ah *ah;
	struct rdmx__qp_desc peer_ud, peer_uc;
	struct herd_conn *prev, *next;
	/* client */
	struct rdmx__dgram *udq;
	uint8_t *rx;                  /* window receive buffers of rxlen */
	uint32_t rxlen, rkey;
	uint64_t raddr;
	uint32_t srv_qpn;             /* the server's UD QP: the one source taken */
	uint64_t foreign;             /* datagrams from any other QP, dropped */
};

/* rpc_herd_conn.c */
void rdmx__herd_conn_opts(const struct rdmx_rpc_opts *o, const struct rpc_contract *k,
			  struct rdmx_conn_opts *co);
int rdmx__herd_mem_alloc(struct herd_conn *h, size_t len);
int rdmx__herd_mem_get(struct herd_conn *h, size_t len, int access);
void rdmx__herd_conn_free(struct herd_conn *h);
int rdmx__herd_ctrl_send(struct herd_conn *h, const void *buf, size_t len);

/* rpc_herd_server.c */
int rdmx__herd_listen(struct rdmx_rpc_server *s, const char *addr, uint16_t port);
uint16_t rdmx__herd_port(const struct rdmx_rpc_server *s);
int rdmx__herd_next(struct rdmx_rpc_server *s, struct rpc_sev *ev, int timeout_ms);
void rdmx__herd_unlisten(struct rdmx_rpc_server *s);
void rdmx__herd_conn_unlink(struct herd_srv *hs, struct herd_conn *h);
int rdmx__herd_ud_send(struct herd_conn *h, const void *buf, size_t len);

/* rpc_herd_client.c */
int rdmx__herd_dial(struct rdmx_rpc_client *c, const char *addr, uint16_t port);
int rdmx__herd_recv(void *t, struct rpc_rx *rx, int timeout_ms);
int rdmx__herd_slot_write(struct herd_conn *h, size_t len);

#endif
