/* SPDX-License-Identifier: MIT */
/*
 * Transport "rfp", private: the slots' sizes, the connection and the
 * listener, the trailer (inline: every poll and fetch reads one), and the
 * calls between its files (the design: rpc_rfp_ops.c).
 *   rpc_rfp_slot.c    a connection's slots: made, freed, a frame's slot,
 *                     a torn trailer's bound, the tear test hook
 *   rpc_rfp_server.c  the listener: set-up, slot scan, responses, pushes
 *   rpc_rfp_client.c  the dialer: set-up, request WRITEs, fetch and push
 *   rpc_rfp_ops.c         the transport's table and its both-sides calls
 */
#ifndef RDMX_RPC_RFP_PRIV_H
#define RDMX_RPC_RFP_PRIV_H

#include <endian.h>
#include <stdbool.h>
#include <string.h>

#include "core/onesided.h"
#include "rpc/rpc_int.h"

#define RFP_TRAILER 8u
#define RFP_SETUP_LEN (12u + 2 * RDMX_REGION_DESC_LEN)
#define RFP_PUSH_LEN 8u
#define RFP_ALIGN 64u
#define RFP_LEN_MASK 0xffffffu
#define RFP_SLOT_MAX (1u << 24)
/* A trailer read torn settles by the next read (a byte copy in flight);
 * one that stays torn this long is a peer's garbage. */
#define RFP_TORN_MS 1000

enum { SLOT_FREE = 0, SLOT_WAIT, SLOT_PUSHED };

struct rfp_conn {
	rdmx_conn *c;
	void *user;
	uint32_t slots, ssize;
	size_t bufs;             /* slot-sized buffers in mem */
	unsigned char *mem;      /* server: requests then responses; client:
				  * scratch then a fetch buffer per slot of
				  * its window */
	rdmx_mr *mr;             /* client: its buffers */
	struct rdmx__export exp[2]; /* server: the requests (remote WRITE only)
				     * and the responses (remote READ only),
				     * to this client alone (core/mw.h) */
	unsigned char qdesc[RDMX_REGION_DESC_LEN]; /* client: the requests' */
	unsigned char rdesc[RDMX_REGION_DESC_LEN]; /* client: the responses' */
	uint32_t *seq;           /* the seq of the call in each slot */
	uint32_t *done, *push;   /* server: answered seq, push asked for seq */
	uint32_t *fails;         /* client: empty fetches of each slot */
	int64_t *torn;           /* when each slot's trailer first read torn (ms) */
	uint8_t *state;          /* client: enum above */
	unsigned char *scratch;  /* server: the buffer alloc lends */
	rdmx_region *rreq, *rresp;
	uint32_t retries;
	int timeout_ms;
	pthread_mutex_t lock;    /* server: seq/done/push between threads */
	bool server;
	struct rfp_lis *lis;     /* server: whose poll list it is on */
	struct rfp_conn *prev, *next;
};

struct rfp_lis {
	rdmx_listener *lis;
	struct rfp_conn *conns;
	struct rfp_conn *cur;    /* the client the next scan starts at */
};

static inline unsigned char *slot_at(struct rfp_conn *r, int resp, uint32_t s)
{
	return r->mem + ((size_t)resp * r->slots + s) * r->ssize;
}

/*
 * The trailer: u32 seq << 32 | (seq & 0xff) << 24 | len (len < 16 MiB).
 * An 8-byte store is not one 8-byte placement for every NIC (rxe's READ
 * showed a new seq with the old len): the seq byte beside len makes a
 * torn trailer read as "not yet", not as a wrong length.
 */
static inline uint64_t trailer_word(uint32_t len, uint32_t seq)
{
	return (uint64_t)seq << 32 | (uint64_t)(seq & 0xff) << 24 | len;
}

/* 1 with the length in *@len when the trailer carries @seq whole. */
static inline int trailer_load(const unsigned char *slot, uint32_t ssize, uint32_t seq,
			       uint32_t *len)
{
	uint64_t t = __atomic_load_n((const uint64_t *)(const void *)(slot + ssize -
								      RFP_TRAILER),
				     __ATOMIC_ACQUIRE);

	*len = (uint32_t)t & RFP_LEN_MASK;
	return (uint32_t)(t >> 32) == seq && ((uint32_t)t >> 24) == (seq & 0xff);
}

/*
 * 1 when @len (a trailer's, with the new seq) is within a slot of @ssize
 * bytes and the frame at @frame (complete: it was placed before any byte
 * of its trailer changed) is @len bytes long by its own header. rxe places
 * and READs memory with a byte copy (emulated byte by byte under TCG), so
 * a trailer can read with the new seq byte and the new seq word but some
 * bytes of the old len (any mix of old and new bytes: 0 in a slot's first
 * use, or above the slot): such a trailer is torn, read again
 * (rdmx__rfp_torn_again bounds it). The header is peer-written: its length is copied once, and
 * only compared. @frame may be NULL: the range alone.
 */
static inline int trailer_whole(const unsigned char *frame, uint32_t len, uint32_t ssize)
{
	uint32_t plen;

	if (len < RPC_HDR || len > ssize - RFP_TRAILER)
		return 0;
	if (!frame)
		return 1;
	memcpy(&plen, frame + 12, sizeof(plen)); /* rpc_hdr.len, little-endian */
	return le32toh(plen) == len - RPC_HDR;
}

static inline void trailer_store(unsigned char *slot, uint32_t ssize, uint32_t len,
				 uint32_t seq)
{
	__atomic_store_n((uint64_t *)(void *)(slot + ssize - RFP_TRAILER),
			 trailer_word(len, seq), __ATOMIC_RELEASE);
}

/* rpc_rfp_slot.c */
int rdmx__rfp_torn_again(struct rfp_conn *r, uint32_t s, uint32_t len);
int rdmx__rfp_tear_first(int side, unsigned char *slot, uint32_t ssize, uint32_t len,
			 uint32_t seq, int (*show)(struct rfp_conn *, uint32_t),
			 struct rfp_conn *r, uint32_t s);
int rdmx__rfp_frame_slot(const struct rfp_conn *r, const void *frame, size_t len,
			 uint32_t *s, uint8_t *kind);
void rdmx__rfp_free(struct rfp_conn *r);
struct rfp_conn *rdmx__rfp_new(uint32_t slots, uint32_t ssize, size_t bufs);

/* rpc_rfp_server.c */
int rdmx__rfp_listen(struct rdmx_rpc_server *s, const char *addr, uint16_t port);
uint16_t rdmx__rfp_port(const struct rdmx_rpc_server *s);
void rdmx__rfp_unlisten(struct rdmx_rpc_server *s);
int rdmx__rfp_next(struct rdmx_rpc_server *s, struct rpc_sev *ev, int timeout_ms);
int rdmx__rfp_server_alloc(struct rfp_conn *r, size_t size, struct rpc_buf *b);
int rdmx__rfp_server_send(struct rfp_conn *r, struct rpc_buf *b, size_t len);

/* rpc_rfp_client.c */
int rdmx__rfp_dial(struct rdmx_rpc_client *c, const char *addr, uint16_t port);
int rdmx__rfp_client_send(struct rfp_conn *r, struct rpc_buf *b, size_t len);
int rdmx__rfp_client_recv(struct rfp_conn *r, struct rpc_rx *rx, int timeout_ms);

#endif
