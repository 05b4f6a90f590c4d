/* SPDX-License-Identifier: MIT */
/*
 * Transport "rfp" (RFP, EuroSys'17: remote fetching). Each client gets
 * @slots request slots and as many response slots in server memory, one
 * registration exported to it at connect (REMOTE_WRITE on the request
 * half, REMOTE_READ on the response half). A call's slot is its call id's
 * slot index (rpc_client.c), the hello's slot 0.
 *
 *   client: WRITE the frame into its request slot, then WRITE the slot's
 *           trailer (len and seq, the slot's last 8 bytes, trailer_word):
 *           the validity mark is written last, by a second WRITE that RC
 *           places after the first.
 *   server: polls the trailers of every slot (one 8-byte acquire load,
 *           the copy is what is checked: seq one above the slot's last,
 *           len within the slot), hands the frame in place to the RPC
 *           layer, and writes the response frame into the response slot,
 *           then its trailer (release store). No work request is posted.
 *   client: RDMA-READs the response trailer; when it carries the call's
 *           seq, READs the frame (two READs: the frame was complete before
 *           its trailer was stored, so no reliance on the order within one
 *           READ). After @fetch_retries READs that found nothing it asks the
 *           server to push (an 8-byte message: slot, seq); the server SENDs
 *           that response on the control connection (hybrid mode). While
 *           a response is fetched the client spins (READs, yielding the
 *           CPU between passes); once every awaited response is to be
 *           pushed it sleeps in rdmx_recv on the control connection, in
 *           that connection's wait mode, until one comes or time is up.
 *
 * The control connection (an rdmx send_recv connection) carries the
 * set-up (slots, slot size, the two region descriptors), push requests
 * and pushed responses, and its liveness is the call's: a server that
 * goes away fails the client's waits with -ECONNRESET. A malformed slot
 * or push request is handed to the RPC layer as an empty frame, which
 * drops that client (rpc_server.c). Copies: the server copies a response
 * from the request's buffer into its response slot (one more than msg).
 */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
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
	rdmx_mr *mr;
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
};

static unsigned char *slot_at(struct rfp_conn *r, int resp, uint32_t s)
{
	return r->mem + ((size_t)resp * r->slots + s) * r->ssize;
}

/*
 * The trailer: u32 seq << 32 | (seq & 0xff) << 24 | len (len < 16 MiB).
 * An 8-byte store is not one 8-byte placement for every NIC (rxe's READ
 * showed a new seq with the old len): the seq byte beside len makes a
 * torn trailer read as "not yet", not as a wrong length.
 */
static uint64_t trailer_word(uint32_t len, uint32_t seq)
{
	return (uint64_t)seq << 32 | (uint64_t)(seq & 0xff) << 24 | len;
}

/* 1 with the length in *@len when the trailer carries @seq whole. */
static int trailer_load(const unsigned char *slot, uint32_t ssize, uint32_t seq,
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
 * use, or above the slot): such a trailer is torn, read again (torn_again
 * bounds it). The header is peer-written: its length is copied once, and
 * only compared. @frame may be NULL: the range alone.
 */
static int trailer_whole(const unsigned char *frame, uint32_t len, uint32_t ssize)
{
	uint32_t plen;

	if (len < RPC_HDR || len > ssize - RFP_TRAILER)
		return 0;
	if (!frame)
		return 1;
	memcpy(&plen, frame + 12, sizeof(plen)); /* rpc_hdr.len, little-endian */
	return le32toh(plen) == len - RPC_HDR;
}

/*
 * Slot @s's trailer read torn: 0 to read it again, or -EPROTO once it has
 * read torn for RFP_TORN_MS (a copy in flight settles by the next read; a
 * peer that wrote a bad length or header keeps it).
 */
static int torn_again(struct rfp_conn *r, uint32_t s, uint32_t len)
{
	int64_t t = rdmx__now_ms();

	if (!r->torn[s]) {
		r->torn[s] = t;
		return 0;
	}
	if (t - r->torn[s] < RFP_TORN_MS)
		return 0;
	return rdmx__fail(-EPROTO, "rpc rfp: slot %u's %s trailer says %u bytes (slots of "
			  "%u), not its frame's length, for %d ms", s,
			  r->server ? "request" : "response", len, r->ssize, RFP_TORN_MS);
}

static void trailer_store(unsigned char *slot, uint32_t ssize, uint32_t len, uint32_t seq)
{
	__atomic_store_n((uint64_t *)(void *)(slot + ssize - RFP_TRAILER),
			 trailer_word(len, seq), __ATOMIC_RELEASE);
}

/* Test hook (rdmx__rpc_rfp_tear): ms to show the next response's or
 * request's trailer torn (the new seq, a wrong len of kind @how) before
 * the real one. */
static unsigned tear_ms[2], tear_how[2];

void rdmx__rpc_rfp_tear(int side, unsigned ms, int how)
{
	__atomic_store_n(&tear_how[side != 0], (unsigned)how, __ATOMIC_RELAXED);
	__atomic_store_n(&tear_ms[side != 0], ms, __ATOMIC_RELAXED);
}

/* The hook's wrong len for a frame of @len bytes in slots of @ssize. */
static uint32_t tear_len(unsigned how, uint32_t len, uint32_t ssize)
{
	if (how == RDMX__RFP_TEAR_ZERO)
		return 0; /* a slot's first use: the old trailer is 0 */
	if (how == RDMX__RFP_TEAR_BIG)
		return RFP_LEN_MASK; /* above any slot */
	return len + 8 <= ssize - RFP_TRAILER ? len + 8 : len - 8;
}

struct rfp_conn;

/* The torn trailer of the hook, if armed for @side: stored into @slot,
 * which @show (if any) then WRITEs to @r's slot @s, and left there for
 * the hook's ms. */
static int tear_first(int side, unsigned char *slot, uint32_t ssize, uint32_t len,
		      uint32_t seq, int (*show)(struct rfp_conn *, uint32_t),
		      struct rfp_conn *r, uint32_t s)
{
	unsigned ms = __atomic_exchange_n(&tear_ms[side], 0, __ATOMIC_RELAXED);
	unsigned how = __atomic_load_n(&tear_how[side], __ATOMIC_RELAXED);
	int rc = 0;

	if (!ms)
		return 0;
	trailer_store(slot, ssize, tear_len(how, len, ssize), seq);
	if (show)
		rc = show(r, s);
	usleep(ms * 1000);
	return rc;
}

/* The slot a frame of ours goes to: its call id's slot index. */
static int frame_slot(const struct rfp_conn *r, const void *frame, size_t len, uint32_t *s,
		      uint8_t *kind)
{
	struct rpc_hdr h;
	int rc = rdmx__rpc_hdr_get(frame, len, &h);

	if (rc)
		return rc;
	*kind = h.kind;
	*s = (uint32_t)(h.call & (RPC_WINDOW_MAX - 1));
	if (*s >= r->slots)
		return rdmx__fail(-EPROTO, "rpc rfp: call slot %u, %u slots", *s, r->slots);
	return 0;
}

static void rfp_free(struct rfp_conn *r)
{
	if (r->rreq)
		rdmx_region_free(r->rreq);
	if (r->rresp)
		rdmx_region_free(r->rresp);
	if (r->mr)
		rdmx_mr_dereg(r->mr);
	free(r->mem);
	free(r->seq);
	free(r->done);
	free(r->push);
	free(r->fails);
	free(r->torn);
	free(r->state);
	free(r->scratch);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static struct rfp_conn *rfp_new(uint32_t slots, uint32_t ssize, size_t bufs)
{
	struct rfp_conn *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	pthread_mutex_init(&r->lock, NULL);
	r->slots = slots;
	r->ssize = ssize;
	r->bufs = bufs;
	r->seq = calloc(slots, sizeof(*r->seq));
	r->done = calloc(slots, sizeof(*r->done));
	r->push = calloc(slots, sizeof(*r->push));
	r->fails = calloc(slots, sizeof(*r->fails));
	r->torn = calloc(slots, sizeof(*r->torn));
	r->state = calloc(slots, sizeof(*r->state));
	if (posix_memalign((void **)&r->mem, RFP_ALIGN, bufs * ssize))
		r->mem = NULL;
	if (!r->seq || !r->done || !r->push || !r->fails || !r->torn || !r->state ||
	    !r->mem) {
		rfp_free(r);
		return NULL;
	}
	memset(r->mem, 0, bufs * ssize);
	return r;
}

static uint32_t slot_size(const struct rpc_contract *k)
{
	size_t n = rdmx__rpc_frame_max(k) + RFP_TRAILER;

	return (uint32_t)((n + RFP_ALIGN - 1) & ~(size_t)(RFP_ALIGN - 1));
}

/* ----------------------------------------------------------------- server */

static int rfp_listen(struct rdmx_rpc_server *s, const char *addr, uint16_t port)
{
	struct rdmx_conn_opts co;
	struct rfp_lis *l = calloc(1, sizeof(*l));
	int rc;

	if (!l)
		return rdmx__fail(-ENOMEM, "rpc rfp: out of memory");
	if (slot_size(&s->k) > RFP_SLOT_MAX) {
		free(l);
		return rdmx__fail(-EMSGSIZE, "rpc rfp: slots of %u bytes, at most %u",
				  slot_size(&s->k), RFP_SLOT_MAX);
	}
	rdmx__rpc_conn_opts(&s->o, &s->k, RFP_PUSH_LEN, &co);
	rc = rdmx_listen(s->ctx, addr, port, &co, &l->lis);
	if (rc) {
		free(l);
		return rc;
	}
	s->tstate = l;
	return 0;
}

static uint16_t rfp_port(const struct rdmx_rpc_server *s)
{
	const struct rfp_lis *l = s->tstate;

	return rdmx_listener_port(l->lis);
}

static void rfp_unlisten(struct rdmx_rpc_server *s)
{
	struct rfp_lis *l = s->tstate;

	rdmx_listener_destroy(l->lis);
	free(l);
	s->tstate = NULL;
}

/* Register a new client's slots and send it the set-up. */
static int setup_send(struct rdmx_rpc_server *s, struct rfp_conn *r)
{
	size_t half = (size_t)r->slots * r->ssize, dl = RDMX_REGION_DESC_LEN;
	uint32_t head[3] = { RFP_MAGIC, r->slots, r->ssize };
	struct rdmx_msg m;
	int rc = rdmx_mr_reg(s->ctx, r->mem, 2 * half,
			     RDMX_ACCESS_REMOTE_WRITE | RDMX_ACCESS_REMOTE_READ, &r->mr);

	if (rc)
		return rc;
	rc = rdmx_msg_alloc(r->c, RFP_SETUP_LEN, &m, s->o.timeout_ms);
	if (rc)
		return rc;
	memcpy(m.data, head, sizeof(head));
	rc = rdmx_mr_export(r->c, r->mr, 0, half, RDMX_ACCESS_REMOTE_WRITE,
			    (char *)m.data + 12, &dl);
	dl = RDMX_REGION_DESC_LEN;
	if (!rc)
		rc = rdmx_mr_export(r->c, r->mr, half, half, RDMX_ACCESS_REMOTE_READ,
				    (char *)m.data + 12 + RDMX_REGION_DESC_LEN, &dl);
	if (rc) {
		rdmx_msg_release(r->c, &m);
		return rc;
	}
	m.len = RFP_SETUP_LEN;
	return rdmx_send(r->c, &m);
}

static struct rfp_conn *server_conn(struct rdmx_rpc_server *s, rdmx_conn *c)
{
	uint32_t ssize = slot_size(&s->k);
	struct rfp_conn *r = rfp_new(s->o.window, ssize, 2 * (size_t)s->o.window);

	if (!r)
		return NULL;
	r->c = c;
	r->scratch = malloc(ssize);
	if (!r->scratch || setup_send(s, r)) {
		rfp_free(r);
		return NULL;
	}
	rdmx_conn_set_user(c, r);
	return r;
}

/*
 * Push slot @s's response on the control connection (r->lock held). No
 * wait for a send buffer: this runs in the server's poll thread (a push
 * asked for) or a worker, under r->lock, and a client that asks for pushes
 * and never takes them (its receives gone, our SENDs stuck on RNR) would
 * hold every client's requests for the timeout. A client that follows the
 * protocol has at most its window of pushes unread, within the send depth.
 */
static int push_send(struct rfp_conn *r, uint32_t s)
{
	unsigned char *slot = slot_at(r, 1, s);
	uint32_t len, head[2] = { s, r->seq[s] };
	struct rdmx_msg m;
	int rc;

	if (!trailer_load(slot, r->ssize, r->seq[s], &len))
		return -EIO; /* not answered: cannot happen under r->lock */
	rc = rdmx_msg_alloc(r->c, RFP_PUSH_LEN + len, &m, 0);
	if (rc)
		return rdmx__fail(rc, "rpc rfp: no send buffer free for a push to a client "
				  "(it takes no pushed responses): %s", rdmx_conn_error(r->c));
	memcpy(m.data, head, sizeof(head));
	memcpy((char *)m.data + RFP_PUSH_LEN, slot, len);
	m.len = RFP_PUSH_LEN + len;
	r->push[s] = 0;
	return rdmx_send(r->c, &m);
}

/* A client asks for a push: 0, or -EPROTO (malformed: drop it). */
static int push_asked(struct rfp_conn *r, const struct rdmx_msg *m)
{
	uint32_t p[2];
	int rc = 0;

	if (m->len != RFP_PUSH_LEN)
		return -EPROTO;
	memcpy(p, m->data, sizeof(p));
	if (p[0] >= r->slots)
		return -EPROTO;
	/* the ask may overtake the request's WRITE: remember it for seq + 1 */
	pthread_mutex_lock(&r->lock);
	if (p[1] == r->seq[p[0]] && r->done[p[0]] == p[1])
		rc = push_send(r, p[0]);
	else if (p[1] == r->seq[p[0]] || p[1] == r->seq[p[0]] + 1)
		r->push[p[0]] = p[1];
	pthread_mutex_unlock(&r->lock);
	return rc ? -EIO : 0;
}

/* A malformed record: an empty frame the RPC layer drops the client for. */
static void bad_record(struct rfp_conn *r, struct rpc_sev *ev)
{
	*ev = (struct rpc_sev){ .type = RPC_SEV_FRAME, .t = r, .rx = { .slot = -1 } };
}

/* Look at every slot of every client once; 1 with a frame in @ev. */
static int slots_scan(struct rfp_lis *l, struct rpc_sev *ev)
{
	for (struct rfp_conn *r = l->conns; r; r = r->next)
		for (uint32_t s = 0; s < r->slots; s++) {
			unsigned char *slot = slot_at(r, 0, s);
			uint32_t len;
			int whole;

			if (!trailer_load(slot, r->ssize, r->seq[s] + 1, &len))
				continue;
			whole = trailer_whole(slot, len, r->ssize);
			if (!whole && !torn_again(r, s, len))
				continue; /* torn: this slot's next turn */
			r->torn[s] = 0;
			pthread_mutex_lock(&r->lock);
			r->seq[s]++;
			pthread_mutex_unlock(&r->lock);
			if (!whole) {
				bad_record(r, ev);
				return 1;
			}
			*ev = (struct rpc_sev){ .type = RPC_SEV_FRAME, .t = r,
				.rx = { .data = slot, .len = len, .slot = (int)s } };
			return 1;
		}
	return 0;
}

/* One listener event, translated; 1 with an event for the RPC layer. */
static int lis_event(struct rdmx_rpc_server *s, struct rfp_lis *l,
		     const struct rdmx_event *e, struct rpc_sev *ev)
{
	struct rfp_conn *r;

	if (e->type == RDMX_EVENT_CONN) {
		r = server_conn(s, e->conn);
		if (!r) {
			rdmx_conn_close(e->conn);
			return 0;
		}
		r->timeout_ms = s->o.timeout_ms;
		r->server = true;
		r->lis = l;
		r->next = l->conns;
		if (l->conns)
			l->conns->prev = r;
		l->conns = r;
		*ev = (struct rpc_sev){ .type = RPC_SEV_CONN, .t = r };
		return 1;
	}
	r = rdmx_conn_get_user(e->conn);
	if (e->type == RDMX_EVENT_CLOSED) {
		*ev = (struct rpc_sev){ .type = RPC_SEV_CLOSED, .t = r };
		return 1;
	}
	if (!push_asked(r, &e->msg)) {
		rdmx_msg_release(e->conn, (struct rdmx_msg *)&e->msg);
		return 0;
	}
	rdmx_msg_release(e->conn, (struct rdmx_msg *)&e->msg);
	bad_record(r, ev);
	return 1;
}

static int rfp_next(struct rdmx_rpc_server *s, struct rpc_sev *ev, int timeout_ms)
{
	struct rfp_lis *l = s->tstate;
	struct rdmx__deadline d;
	struct rdmx_event e;

	rdmx__deadline_start(&d, timeout_ms);
	rdmx__deadline_arm(&d);
	for (unsigned i = 0;; i++) {
		/* a wait, now and then, is where departures are noticed */
		int rc = rdmx_listener_next(l->lis, &e, i % 128 == 127 ? 1 : 0);

		if (!rc && lis_event(s, l, &e, ev))
			return 0;
		if (rc && rc != -ETIMEDOUT && rc != -EAGAIN && rc != -ENOTCONN)
			return rc;
		if (slots_scan(l, ev))
			return 0;
		if (!rdmx__deadline_left_ms(&d))
			return -ETIMEDOUT;
		if (i % 64 == 63)
			sched_yield();
	}
}

static int rfp_server_alloc(struct rfp_conn *r, size_t size, struct rpc_buf *b)
{
	if (size > r->ssize - RFP_TRAILER)
		return rdmx__fail(-EMSGSIZE, "rpc rfp: a frame of %zu bytes, slots of %u",
				  size, r->ssize - RFP_TRAILER);
	b->data = r->scratch;
	b->cap = r->ssize - RFP_TRAILER;
	return 0;
}

/* A response: into its slot, the trailer last; pushed if asked for, and
 * a refusal always (the server drops the connection once it is flushed,
 * so the client could not READ it any more). */
static int rfp_server_send(struct rfp_conn *r, struct rpc_buf *b, size_t len)
{
	uint8_t kind;
	uint32_t s;
	int rc = frame_slot(r, b->data, len, &s, &kind);

	if (rc)
		return rc;
	memcpy(slot_at(r, 1, s), b->data, len);
	pthread_mutex_lock(&r->lock);
	tear_first(RDMX__RFP_TEAR_RESP, slot_at(r, 1, s), r->ssize, (uint32_t)len, r->seq[s],
		   NULL, r, s);
	trailer_store(slot_at(r, 1, s), r->ssize, (uint32_t)len, r->seq[s]);
	r->done[s] = r->seq[s];
	if (r->push[s] == r->seq[s] || kind == RPC_HELLO_REJECT)
		rc = push_send(r, s);
	pthread_mutex_unlock(&r->lock);
	return rc;
}

/* ----------------------------------------------------------------- client */

/* Read the server's set-up (peer-written: copied once, then checked). */
static int setup_take(struct rdmx_rpc_client *c, rdmx_conn *conn, unsigned char *out)
{
	struct rdmx_msg m;
	int rc = rdmx_recv(conn, &m, c->o.timeout_ms);

	if (rc)
		return rdmx__fail(rc, "rpc rfp: no set-up from the server within %d ms: %s",
				  c->o.timeout_ms, rdmx_conn_error(conn));
	if (m.len != RFP_SETUP_LEN) {
		rdmx_msg_release(conn, &m);
		return rdmx__fail(-EPROTO, "rpc rfp: a set-up of %zu bytes, want %u", m.len,
				  RFP_SETUP_LEN);
	}
	memcpy(out, m.data, RFP_SETUP_LEN);
	rdmx_msg_release(conn, &m);
	return 0;
}

static int client_regions(struct rdmx_rpc_client *c, struct rfp_conn *r,
			  const unsigned char *setup)
{
	size_t half = (size_t)r->slots * r->ssize;
	int rc = rdmx_mr_reg(c->ctx, r->mem, r->bufs * r->ssize, RDMX_ACCESS_LOCAL, &r->mr);

	if (!rc)
		rc = rdmx_region_import(r->c, setup + 12, RDMX_REGION_DESC_LEN, &r->rreq);
	if (!rc)
		rc = rdmx_region_import(r->c, setup + 12 + RDMX_REGION_DESC_LEN,
					RDMX_REGION_DESC_LEN, &r->rresp);
	if (!rc && (rdmx_region_len(r->rreq) != half || rdmx_region_len(r->rresp) != half))
		rc = rdmx__fail(-EPROTO, "rpc rfp: regions of %zu and %zu bytes, want %zu",
				rdmx_region_len(r->rreq), rdmx_region_len(r->rresp), half);
	return rc;
}

static int client_setup(struct rdmx_rpc_client *c, rdmx_conn *conn, struct rfp_conn **out)
{
	unsigned char setup[RFP_SETUP_LEN];
	uint32_t head[3];
	struct rfp_conn *r;
	int rc = setup_take(c, conn, setup);

	if (rc)
		return rc;
	memcpy(head, setup, sizeof(head));
	if (head[0] != RFP_MAGIC || head[1] < 1 || head[1] > RPC_WINDOW_MAX ||
	    head[2] < RPC_HDR + RPC_HELLO_LEN + RFP_TRAILER || head[2] > RFP_SLOT_MAX ||
	    head[2] % RFP_ALIGN)
		return rdmx__fail(-EPROTO, "rpc rfp: a set-up of %u slots of %u bytes "
				  "(magic %08x)", head[1], head[2], head[0]);
	if (c->o.window > head[1])
		return rdmx__fail(-EINVAL, "rpc rfp: window %u above the server's %u slots",
				  c->o.window, head[1]);
	/* scratch and a fetch buffer per slot our calls use (our window, not
	 * the server's slot count: 4096 slots of 16 MiB would be 64 GiB) */
	r = rfp_new(head[1], head[2], 1 + (size_t)c->o.window);
	if (!r)
		return rdmx__fail(-ENOMEM, "rpc rfp: out of memory for %u slots", head[1]);
	r->c = conn;
	r->retries = c->o.fetch_retries;
	r->timeout_ms = c->o.timeout_ms;
	rc = client_regions(c, r, setup);
	if (rc) {
		rfp_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

static int rfp_dial(struct rdmx_rpc_client *c, const char *addr, uint16_t port)
{
	struct rdmx_conn_opts co;
	struct rfp_conn *r = NULL;
	rdmx_conn *conn;
	int rc;

	rdmx__rpc_conn_opts(&c->o, &c->k, RFP_PUSH_LEN, &co);
	rc = rdmx_dial(c->ctx, addr, port, &co, &conn);
	if (rc)
		return rc;
	rc = client_setup(c, conn, &r);
	if (rc) {
		rdmx_conn_close(conn);
		return rc;
	}
	c->t = r;
	return 0;
}

/* One one-sided operation, waited for. */
static int onesided(struct rfp_conn *r, int write, const rdmx_region *reg, size_t roff,
		    size_t off, size_t len)
{
	rdmx_token tok;
	int rc = write ? rdmx_write(r->c, reg, roff, r->mr, off, len, &tok)
		       : rdmx_read(r->c, reg, roff, r->mr, off, len, &tok);

	return rc ? rc : rdmx_wait(r->c, tok, r->timeout_ms);
}

static int push_ask(struct rfp_conn *r, uint32_t s);

/* WRITE the trailer in our scratch into request slot @s. */
static int trailer_write(struct rfp_conn *r, uint32_t s)
{
	size_t tr = r->ssize - RFP_TRAILER;

	return onesided(r, 1, r->rreq, (size_t)s * r->ssize + tr, tr, RFP_TRAILER);
}

/* A request: the frame into its slot, then the trailer (fetch_retries 0:
 * and ask for the push at once). */
static int rfp_client_send(struct rfp_conn *r, struct rpc_buf *b, size_t len)
{
	uint8_t kind;
	uint32_t s;
	int rc = frame_slot(r, b->data, len, &s, &kind);

	if (rc)
		return rc;
	r->seq[s]++;
	rc = onesided(r, 1, r->rreq, (size_t)s * r->ssize, 0, len);
	if (!rc)
		rc = tear_first(RDMX__RFP_TEAR_REQ, r->mem, r->ssize, (uint32_t)len, r->seq[s],
				trailer_write, r, s);
	trailer_store(r->mem, r->ssize, (uint32_t)len, r->seq[s]);
	if (!rc)
		rc = trailer_write(r, s);
	if (rc)
		return rc;
	r->state[s] = SLOT_WAIT;
	r->fails[s] = 0;
	r->torn[s] = 0;
	return r->retries ? 0 : push_ask(r, s);
}

static int push_ask(struct rfp_conn *r, uint32_t s)
{
	uint32_t p[2] = { s, r->seq[s] };
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(r->c, RFP_PUSH_LEN, &m, r->timeout_ms);

	if (rc)
		return rc;
	memcpy(m.data, p, sizeof(p));
	m.len = RFP_PUSH_LEN;
	rc = rdmx_send(r->c, &m);
	if (!rc)
		r->state[s] = SLOT_PUSHED;
	return rc;
}

/* Fetch slot @s's response: 1 with it in @rx, 0 not there yet, -errno. */
static int fetch(struct rfp_conn *r, uint32_t s, struct rpc_rx *rx)
{
	size_t roff = (size_t)s * r->ssize, off = (size_t)(1 + s) * r->ssize;
	size_t tr = r->ssize - RFP_TRAILER;
	uint32_t len;
	int rc = onesided(r, 0, r->rresp, roff + tr, off + tr, RFP_TRAILER);

	if (rc)
		return rc;
	if (!trailer_load(r->mem + off, r->ssize, r->seq[s], &len)) {
		if (++r->fails[s] >= r->retries)
			return push_ask(r, s);
		return 0;
	}
	if (!trailer_whole(NULL, len, r->ssize))
		return torn_again(r, s, len); /* fetch again (not a failed fetch) */
	rc = onesided(r, 0, r->rresp, roff, off, len);
	if (rc)
		return rc;
	if (!trailer_whole(r->mem + off, len, r->ssize))
		return torn_again(r, s, len);
	r->torn[s] = 0;
	r->state[s] = SLOT_FREE;
	*rx = (struct rpc_rx){ .data = r->mem + off, .len = len, .slot = (int)s };
	return 1;
}

/* A pushed response: 1 with it in @rx, 0 none within @wait_ms, -errno. */
static int pushed(struct rfp_conn *r, struct rpc_rx *rx, int wait_ms)
{
	uint32_t p[2];
	int rc = rdmx_recv(r->c, &rx->msg, wait_ms);

	if (rc == -EAGAIN || rc == -ETIMEDOUT)
		return 0;
	if (rc)
		return rc;
	if (rx->msg.len >= RFP_PUSH_LEN)
		memcpy(p, rx->msg.data, sizeof(p));
	if (rx->msg.len < RFP_PUSH_LEN || p[0] >= r->slots || r->state[p[0]] == SLOT_FREE ||
	    p[1] != r->seq[p[0]]) {
		rdmx_msg_release(r->c, &rx->msg);
		return rdmx__fail(-EPROTO, "rpc rfp: a pushed response for no pushed call");
	}
	r->state[p[0]] = SLOT_FREE;
	rx->data = (const char *)rx->msg.data + RFP_PUSH_LEN;
	rx->len = rx->msg.len - RFP_PUSH_LEN;
	rx->slot = -1;
	return 1;
}

/* Is a response awaited by fetching (READs) rather than by a push? */
static bool fetching(const struct rfp_conn *r)
{
	for (uint32_t s = 0; s < r->slots; s++)
		if (r->state[s] == SLOT_WAIT)
			return true;
	return false;
}

static int rfp_client_recv(struct rfp_conn *r, struct rpc_rx *rx, int timeout_ms)
{
	struct rdmx__deadline d;

	rdmx__deadline_start(&d, timeout_ms);
	for (;;) {
		int rc = pushed(r, rx, 0);

		for (uint32_t s = 0; !rc && s < r->slots; s++)
			if (r->state[s] == SLOT_WAIT)
				rc = fetch(r, s, rx);
		/* the server went away: what it pushed before is still taken
		 * (it flushes a refusal of the contract before it closes) */
		if (rc < 0 && rc != -EPROTO && pushed(r, rx, 0) == 1)
			return 0;
		if (rc)
			return rc < 0 ? rc : 0;
		if (!d.forever && !rdmx__deadline_left_ms(&d))
			return timeout_ms ? -ETIMEDOUT : -EAGAIN;
		if (fetching(r)) {
			sched_yield();
			continue;
		}
		/* only pushes to come: sleep until one does (a departure of
		 * the server ends the wait too), then look again */
		rc = pushed(r, rx, d.forever ? -1 : rdmx__deadline_left_ms(&d));
		if (rc)
			return rc < 0 ? rc : 0;
	}
}

size_t rdmx__rpc_rfp_client_mem(const struct rdmx_rpc_client *c)
{
	const struct rfp_conn *r = c->t;

	return r->bufs * r->ssize;
}

uint32_t rdmx__rpc_rfp_slot(const struct rdmx_rpc_client *c)
{
	return ((const struct rfp_conn *)c->t)->ssize;
}

/* ------------------------------------------------------------ both sides */

static int rfp_alloc(void *t, size_t size, struct rpc_buf *b, int timeout_ms)
{
	struct rfp_conn *r = t;

	(void)timeout_ms;
	if (r->server)
		return rfp_server_alloc(r, size, b);
	if (size > r->ssize - RFP_TRAILER)
		return rdmx__fail(-EMSGSIZE, "rpc rfp: a frame of %zu bytes, slots of %u",
				  size, r->ssize - RFP_TRAILER);
	b->data = r->mem;
	b->cap = r->ssize - RFP_TRAILER;
	return 0;
}

static int rfp_send(void *t, struct rpc_buf *b, size_t len)
{
	struct rfp_conn *r = t;

	return r->server ? rfp_server_send(r, b, len) : rfp_client_send(r, b, len);
}

static void rfp_drop(void *t, struct rpc_buf *b)
{
	(void)t;
	(void)b; /* the scratch buffer stays the connection's */
}

static int rfp_recv(void *t, struct rpc_rx *rx, int timeout_ms)
{
	return rfp_client_recv(t, rx, timeout_ms);
}

static void rfp_release(void *t, struct rpc_rx *rx)
{
	struct rfp_conn *r = t;

	if (rx->slot < 0 && rx->msg.data)
		rdmx_msg_release(r->c, &rx->msg);
}

static int rfp_flush(void *t, int timeout_ms)
{
	return rdmx_flush(((struct rfp_conn *)t)->c, timeout_ms);
}

static const char *rfp_error(const void *t)
{
	return rdmx_conn_error(((const struct rfp_conn *)t)->c);
}

static void rfp_set_user(void *t, void *user)
{
	((struct rfp_conn *)t)->user = user;
}

static void *rfp_get_user(const void *t)
{
	return ((const struct rfp_conn *)t)->user;
}

static rdmx_conn *rfp_conn(const void *t)
{
	return ((const struct rfp_conn *)t)->c;
}

static void rfp_close(void *t)
{
	struct rfp_conn *r = t;

	if (r->server) {
		if (r->prev)
			r->prev->next = r->next;
		else
			r->lis->conns = r->next;
		if (r->next)
			r->next->prev = r->prev;
	}
	if (r->rreq)
		rdmx_region_free(r->rreq);
	if (r->rresp)
		rdmx_region_free(r->rresp);
	r->rreq = r->rresp = NULL;
	rdmx_conn_close(r->c);
	rfp_free(r);
}

const struct rpc_transport_ops rdmx__rpc_transport_rfp = {
	.name = "rfp",
	.listen = rfp_listen,
	.port = rfp_port,
	.next = rfp_next,
	.unlisten = rfp_unlisten,
	.dial = rfp_dial,
	.alloc = rfp_alloc,
	.send = rfp_send,
	.drop = rfp_drop,
	.recv = rfp_recv,
	.release = rfp_release,
	.flush = rfp_flush,
	.error = rfp_error,
	.set_user = rfp_set_user,
	.get_user = rfp_get_user,
	.conn = rfp_conn,
	.close = rfp_close,
};
