/* SPDX-License-Identifier: MIT */
/*
 * The ring engine's private state, shared by its files, bottom first:
 * write_ring_notify.c (how a receiver learns of a record - notify
 * POLL/IMM/OFF/REV - record geometry, and the doorbell of a sleeping
 * receiver), write_ring_progress.c (reaping the CQs, head updates),
 * write_ring_send.c (flow control and the send side), write_ring_recv.c
 * (the receive side, releases, a sleeping receiver's announcement) and
 * write_ring_conn.c (set-up and hello; the design at its top). It includes
 * the family's face, write_ring.h. Not for other protocols.
 */
#ifndef RDMX_PROTOCOLS_WRITE_RING_PRIV_H
#define RDMX_PROTOCOLS_WRITE_RING_PRIV_H

#include "core/doorbell.h"
#include "core/ring.h"
#include "core/conn.h"
#include "core/fabric.h"
#include "core/msg.h"
#include "core/protocol.h"
#include "write_ring.h"
#include "write_ring_burst.h"

#define N_CTRL 16        /* head-update receive buffers the sender posts */
#define WC_BATCH 16

/* wr_id tags (bits 62-63); data WRITEs carry their record's end offset. */
#define TAG_SHIFT 62
#define TAG_DATA 0ull
#define TAG_UPD 1ull
#define TAG_ASK 2ull
#define TAG_READ 3ull
#define SUB_WAKE (1ull << 61) /* under TAG_ASK: a doorbell SEND */
#define SUB_GEN (1ull << 60)  /* under TAG_ASK: our sleep_gen WRITE */

/* Most work requests one record posts: notify REV's pre-clear, pad,
 * pre-clear, record; OFF's pad, record, tail word. */
#define WRING_WRS_MAX 4

/* Registered control words; rbuf[] follows (16 bytes per receive). */
struct ctl {
	uint64_t ask;      /* written by the peer: "tell me when >= ask" */
	uint64_t released; /* read by the peer (ack READ): records released */
	uint64_t ask_src;  /* source of our ask WRITE */
	uint64_t read_dst; /* target of our head READ */
	uint64_t upd_src;  /* source of our update SEND */
	uint64_t sleep_gen; /* written by the peer: its sleep count */
	uint64_t gen_src;  /* source of our sleep_gen WRITE */
	uint64_t tail;     /* written by the peer (notify OFF): its tail */
	uint64_t tail_src; /* source of our tail WRITE (inline) */
	uint64_t zero;     /* source of REV's pre-clear byte (inline) */
	uint64_t pad_[2];
	uint64_t rbuf[][2];
};

struct wring {
	int ack_read;             /* ack READ: the sender reads our head */
	int imm;                  /* notify = IMM */
	uint8_t notify;           /* enum rdmx_notify, resolved */
	int local_magic;          /* our two rings are double-mapped */
	uint8_t *ring, *stage;    /* own receive ring, staging mirror */
	struct ctl *ctl;
	size_t ctl_len;
	struct rdmx__mr *ring_mr, *stage_mr, *ctl_mr;
	struct rdmx__ring_geo rgeo, sgeo; /* own ring, peer's ring */
	uint64_t rseed, sseed;
	uint64_t peer_ring, peer_ctl;
	uint32_t peer_ring_rkey, peer_ctl_rkey;
	uint32_t nrecv;           /* receives posted (ctrl, + window if IMM) */
	uint32_t win_out, win_in; /* message windows, see write_ring_conn.c */
	/* sender */
	uint64_t tail, sent, acked, head, done;
	uint64_t *ends;           /* win_out + 1 record end offsets */
	uint32_t data_out;        /* data WRITEs not completed */
	struct rdmx__one_buf ob;   /* the buffer rdmx_msg_alloc handed out */
	uint64_t asked;
	int ask_out, read_out;
	/* receiver */
	uint64_t rd;              /* offset of the next record to take */
	uint64_t tail_seen;       /* notify OFF: the peer's tail word, checked */
	uint64_t torn;            /* ... its last word that failed the check */
	int64_t torn_since;       /* ... since when (ms) */
	struct rdmx__ring_rel rel;
	uint64_t reported, reported_head;
	int upd_out;
	uint32_t imm_ready;       /* IMM completions not matched to records */
	struct rdmx__bell bell;    /* our sleeps, the peer's we rang for */
	struct rdmx__wburst burst; /* held records (write_ring_burst.h) */
	struct rdmx__wring_stats st;
};

_Static_assert(sizeof(struct wring) <= RDMX__WRING_PRIV_SIZE,
	       "raise RDMX__WRING_PRIV_SIZE");

static inline struct wring *wr_of(const rdmx_conn *c)
{
	return c->priv;
}

/* Is @m the buffer rdmx_msg_alloc handed out on @c (not yet sent)? */
static inline int rdmx__wring_live_alloc(rdmx_conn *c, const struct rdmx_msg *m)
{
	return rdmx__one_buf_is(c, &wr_of(c)->ob, m);
}

/* Does the receiver have a doorbell to be woken by (not with IMM: each
 * record is a completion there)? */
static inline int rdmx__wring_has_doorbell(const struct wring *p)
{
	return !p->imm;
}

/* write_ring_progress.c: poll both CQs and answer the peer (head
 * updates); > 0 if anything happened, 0, -errno (the connection down). */
int rdmx__wring_progress(rdmx_conn *c);
/* Post head-update receive @idx of the control block. */
int rdmx__wring_post_ctrl_recv(rdmx_conn *c, uint32_t idx);
/* Report our released count to the peer when due (ack SEND). */
int rdmx__wring_maybe_update(rdmx_conn *c);

/* write_ring_notify.c */
/* "poll", "imm", "off", "rev"; "send", "read". */
const char *rdmx__wring_notify_name(unsigned n);
const char *rdmx__wring_ack_name(unsigned a);
/* The notify and ack a connection with @o runs (defaults resolved). */
uint8_t rdmx__wring_notify_of(const struct rdmx_conn_opts *o);
uint8_t rdmx__wring_ack_of(const struct rdmx_protocol_ops *proto,
			   const struct rdmx_conn_opts *o);
/* -EINVAL with the reason for a notify x ack x protocol that cannot work. */
int rdmx__wring_check_variant(const struct rdmx_protocol_ops *proto,
			      const struct rdmx_conn_opts *o);
/* Does a record of @rsize at the tail fit before @head (REV also keeps the
 * next slot's valid byte free, its pre-clear writes there)? */
int rdmx__wring_fits(const struct wring *p, uint64_t head, uint64_t rsize);
/* Bytes a record of @len payload bytes takes in the peer's ring. */
uint64_t rdmx__wring_rec_size(const struct wring *p, uint64_t len);
/* Where the record at peer offset @off of @rsize bytes starts, as a byte
 * index of the ring (REV lays records downward). */
uint64_t rdmx__wring_at(const struct wring *p, const struct rdmx__ring_geo *g,
			uint64_t off, uint64_t rsize);
/* Work requests before a record or pad at @start (REV: the pre-clear of
 * the slot after it); returns how many were put in @wr. */
int rdmx__wring_notify_pre(rdmx_conn *c, uint64_t end, struct rdmx__wr *wr);
/* After the record WRITE wr[n - 1] (OFF: the tail WRITE, which takes over
 * the signal); returns how many were added at @wr + @n. */
int rdmx__wring_notify_post(rdmx_conn *c, uint64_t end, struct rdmx__wr *wr,
			    int n);
/* How long a tail word may fail its check before it is a forgery (torn
 * by a WRITE landing, it is whole again within microseconds). */
#define RDMX__WRING_TORN_MS 1000
extern int rdmx__wring_torn_ms; /* tests lower it */
/* Receiver: 1 when a record may be at rd (IMM: a completion; OFF: the
 * tail word, read once and checked), 0 none yet, -EPROTO. */
int rdmx__wring_announced(rdmx_conn *c);
/* Receiver: the record at rd (1), nothing (0), or -EPROTO. */
int rdmx__wring_peek(rdmx_conn *c, struct rdmx__ring_rec_view *v);
/* Sender: ring the peer's doorbell if it published a sleep. */
int rdmx__wring_ring_if_asleep(rdmx_conn *c);

#endif /* RDMX_PROTOCOLS_WRITE_RING_PRIV_H */
