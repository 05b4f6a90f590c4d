/* SPDX-License-Identifier: MIT */
/*
 * rdmx RPC internals: the contract, the frame (one place), the transport
 * ops table and the server and client objects. src/rpc sits above the
 * protocols and uses librdmx's public API; the one core hook it takes is
 * core/errors.h, so its objects keep their messages the way rdmx's do.
 */
#ifndef RDMX_RPC_INT_H
#define RDMX_RPC_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdmx/rpc.h>

#include "core/errors.h"

/* ------------------------------------------------------------- contract */

struct rpc_method {
	uint16_t id;
	char name[RDMX_RPC_NAME_MAX + 1];
	uint32_t max_req, max_resp, flags;
};

/* A checked copy of a method table, sorted by id, and its hash. */
struct rpc_contract {
	struct rpc_method *m;
	size_t n;
	uint64_t hash;
	uint32_t max_req, max_resp; /* largest of all methods */
};

int rdmx__rpc_contract_load(struct rpc_contract *k, const struct rdmx_rpc_method *m,
		      size_t n);
void rdmx__rpc_contract_free(struct rpc_contract *k);
const struct rpc_method *rdmx__rpc_contract_find(const struct rpc_contract *k, uint16_t id);
size_t rdmx__rpc_contract_index(const struct rpc_contract *k, const struct rpc_method *m);

/* --------------------------------------------------------------- frames */

/*
 * Every frame starts with this header (little-endian on the wire):
 *
 *   off size field
 *     0    4  magic   RPC_MAGIC ("RPC1")
 *     4    1  kind    enum rpc_kind
 *     5    1  flags   0
 *     6    2  method  method id (REQ, RESP), 0 otherwise
 *     8    4  status  RESP: the handler's status, 0 or -1..-4095
 *    12    4  len     payload bytes after the header
 *    16    8  call    the client's call id (REQ, RESP), 0 otherwise
 *
 * HELLO's payload: u64 contract hash, u32 methods. HELLO_REJECT's: the
 * server's table (u32 methods in it, then RPC_TABLE_ENTRY bytes each:
 * u16 id, u16 0, u32 max_req, u32 max_resp, u32 flags, name[32]
 * NUL-padded); as many entries as fit in the connection's messages.
 */
/* The RPC room's wire ids, in one place: the frame's magic and each
 * transport's setup-message magic (ASCII, little-endian). */
#define RPC_MAGIC 0x31435052u  /* "RPC1": every frame (msg, rfp, herd) */
#define RFP_MAGIC 0x31504652u  /* "RFP1": rfp's setup (rpc_rfp_ops.c) */
#define HERD_MAGIC 0x31445248u /* "HRD1": herd's setup and reply (rpc_herd_ops.c) */
#define RPC_HDR 24u
#define RPC_HELLO_LEN 12u
#define RPC_TABLE_ENTRY 48u
#define RPC_STATUS_MIN (-4095)

enum rpc_kind {
	RPC_HELLO = 1,
	RPC_HELLO_OK = 2,
	RPC_HELLO_REJECT = 3,
	RPC_REQ = 4,
	RPC_RESP = 5,
};

struct rpc_hdr {
	uint8_t kind;
	uint16_t method;
	int32_t status;
	uint32_t len;
	uint64_t call;
};

void rdmx__rpc_hdr_put(void *buf, const struct rpc_hdr *h);
/* Copy the header out of @buf (@n bytes, peer-written: read once) and
 * check it against @n; 0 or -EPROTO with the reason recorded. */
int rdmx__rpc_hdr_get(const void *buf, size_t n, struct rpc_hdr *h);
void rdmx__rpc_hello_put(void *buf, const struct rpc_contract *k);
int rdmx__rpc_hello_get(const void *buf, size_t n, uint64_t *hash, uint32_t *count);
/* Write as much of @k's table as fits in @cap bytes; returns the bytes. */
size_t rdmx__rpc_table_put(void *buf, size_t cap, const struct rpc_contract *k);
/* Name the first difference between @here and the table in @buf (@n
 * bytes, peer-written) in @out. */
void rdmx__rpc_table_diff(const struct rpc_contract *here, const void *buf, size_t n,
		    char *out, size_t outlen);
/* The largest frame a side of @k sends or takes. */
size_t rdmx__rpc_frame_max(const struct rpc_contract *k);
/* Options of a transport's rdmx connection: the default protocol, messages
 * of @k's largest frame + @extra bytes, send and receive queues of @o's
 * window (at least RPC_DEPTH_MIN), @o's connect timeout. */
#define RPC_DEPTH_MIN 16u
void rdmx__rpc_conn_opts(const struct rdmx_rpc_opts *o, const struct rpc_contract *k,
			 size_t extra, struct rdmx_conn_opts *co);

/* ----------------------------------------------------------- transports */

/* A buffer to send a frame from (the transport owns it until sent). */
struct rpc_buf {
	void *data;
	size_t cap;
	struct rdmx_msg msg;
};

/* A frame received (in place until released). */
struct rpc_rx {
	const void *data;
	size_t len;
	struct rdmx_msg msg;
	int slot;          /* rfp: the slot it is in, -1 in a message */
};

enum rpc_sev_type { RPC_SEV_CONN = 1, RPC_SEV_FRAME, RPC_SEV_CLOSED };

struct rpc_sev {
	enum rpc_sev_type type;
	void *t;          /* the transport's connection */
	struct rpc_rx rx; /* RPC_SEV_FRAME */
};

struct rpc_server;
struct rpc_client;

/*
 * A transport: one file per transport, ending in its table. A
 * connection is the transport's void * (@t); frames go out of buffers it
 * lends (alloc, then send or drop) and come in as rpc_rx it takes back
 * (release). One thread calls next(); alloc/send/release/drop come from
 * the workers too.
 */
struct rpc_transport_ops {
	const char *name;
	int (*listen)(struct rdmx_rpc_server *s, const char *addr, uint16_t port);
	uint16_t (*port)(const struct rdmx_rpc_server *s);
	int (*next)(struct rdmx_rpc_server *s, struct rpc_sev *ev, int timeout_ms);
	void (*unlisten)(struct rdmx_rpc_server *s);
	int (*dial)(struct rdmx_rpc_client *c, const char *addr, uint16_t port);
	int (*alloc)(void *t, size_t size, struct rpc_buf *b, int timeout_ms);
	int (*send)(void *t, struct rpc_buf *b, size_t len);
	void (*drop)(void *t, struct rpc_buf *b);
	int (*recv)(void *t, struct rpc_rx *rx, int timeout_ms);
	void (*release)(void *t, struct rpc_rx *rx);
	int (*flush)(void *t, int timeout_ms);
	const char *(*error)(const void *t);
	void (*set_user)(void *t, void *user);
	void *(*get_user)(const void *t);
	rdmx_conn *(*conn)(const void *t);   /* the rdmx connection under @t */
	/* server: the listener (its admission caps) */
	rdmx_listener *(*listener)(const struct rdmx_rpc_server *s);
	/* server: the requests @t's client may have pending, its window (a
	 * request in a call slot at or above it is refused: the client broke
	 * its window); 0 where the protocol's flow control bounds them (msg:
	 * a request holds its receive buffer) */
	uint32_t (*window)(const void *t);
	void (*close)(void *t);
	/* optional: outbound work requests the listener posted outside the
	 * connections (herd: its UD SENDs) */
	uint64_t (*posts)(const struct rdmx_rpc_server *s);
};

extern const struct rpc_transport_ops rdmx__rpc_transport_msg;
extern const struct rpc_transport_ops rdmx__rpc_transport_rfp;
extern const struct rpc_transport_ops rdmx__rpc_transport_herd;
/* herd: the server's responses sent over UD and over the control connection. */
void rdmx__rpc_herd_counts(const struct rdmx_rpc_server *s, uint64_t *ud_sends,
			   uint64_t *ctrl_sends);
/* herd, for tests: WRITE @n raw bytes ending on the last byte of the
 * client's slot @i (a hostile client); the slots' size. */
int rdmx__rpc_herd_poke(struct rdmx_rpc_client *c, uint32_t i, const void *bytes,
			size_t n);
uint32_t rdmx__rpc_herd_slot(const struct rdmx_rpc_client *c);
/* herd, for tests: the key to a client's slots the server gave it; and a
 * WRITE from @c's UC QP into the slot @i of a key @k (another client's,
 * or a closed one's: a client trying memory not granted to it). */
struct rdmx__herd_key {
	uint32_t rkey, slot;
	uint64_t raddr;
};
void rdmx__rpc_herd_key(const struct rdmx_rpc_client *c, struct rdmx__herd_key *k);
int rdmx__rpc_herd_poke_key(struct rdmx_rpc_client *c, const struct rdmx__herd_key *k,
			    uint32_t i, const void *bytes, size_t n);
/* herd: how the server keeps a client's slots to it (enum rdmx__iso; 0
 * before a client set up). */
int rdmx__rpc_herd_iso(const struct rdmx_rpc_server *s);
/* rfp, for tests: the bytes of a client's buffers; its slots' size. */
/* Test hook: the next rfp response's (RESP) or request's (REQ) trailer
 * shows torn (its seq, a wrong len: NEAR its own, ZERO, or BIG, above the
 * slot) for @ms before the real one. */
enum { RDMX__RFP_TEAR_RESP = 0, RDMX__RFP_TEAR_REQ = 1 };
enum { RDMX__RFP_TEAR_NEAR = 0, RDMX__RFP_TEAR_ZERO, RDMX__RFP_TEAR_BIG };
void rdmx__rpc_rfp_tear(int side, unsigned ms, int how);
size_t rdmx__rpc_rfp_client_mem(const struct rdmx_rpc_client *c);
/* rfp, for tests: WRITE @n frame bytes into the server's request slot @s
 * with the slot's next seq, whatever call the frame names (a hostile
 * client). */
int rdmx__rpc_rfp_poke(struct rdmx_rpc_client *c, uint32_t s, const void *frame, size_t n);
/* rfp, for tests: WRITE 8 bytes into the client's response slots (the
 * server exports them READ only) through a descriptor the client forged
 * with WRITE access: the rc of the WRITE and its wait. */
int rdmx__rpc_rfp_write_resp(struct rdmx_rpc_client *c);
/* rfp, for tests: WRITE 8 bytes from @c into @victim's request slots with
 * @victim's descriptor (another client's key). */
int rdmx__rpc_rfp_write_as(struct rdmx_rpc_client *c, const struct rdmx_rpc_client *victim);
uint32_t rdmx__rpc_rfp_slot(const struct rdmx_rpc_client *c);
/* herd, for tests: the next herd dial names @c's UD QP as its own in its
 * setup (a client pointing the server's responses at another's QP). */
void rdmx__rpc_herd_ud_as(const struct rdmx_rpc_client *c);
/* herd, for tests: a UD SEND of @n raw bytes from @from's UD QP to @to's
 * (a third party that knows @to's QPN and the QKey). */
int rdmx__rpc_herd_spoof(struct rdmx_rpc_client *from, const struct rdmx_rpc_client *to,
			 const void *bytes, size_t n);
const struct rpc_transport_ops *rdmx__rpc_transport_by_name(const char *name);
int rdmx__rpc_opts_load(const struct rdmx_rpc_opts *in, struct rdmx_rpc_opts *out,
		  const struct rpc_transport_ops **ops);

/* Call ids: a sequence number above the slot's index. */
#define RPC_SLOT_BITS 12u
#define RPC_WINDOW_MAX (1u << RPC_SLOT_BITS)

/* ---------------------------------------------------------------- server */

/* A frame waiting in its connection's queue (rpc_server_queue.c). */
struct rpc_qent {
	struct rpc_qent *next;
	struct rpc_hdr h;
	unsigned char payload[]; /* h.len bytes */
};

struct rpc_sconn {
	void *t;
	uint64_t id;           /* the server's count at connect: names it */
	char peer[64];         /* the peer's address, as rdmx_conn_peer_addr */
	unsigned worker;
	unsigned pending;      /* requests handed out, not yet answered */
	uint64_t busy[RPC_WINDOW_MAX / 64]; /* call slots with a request pending */
	pthread_mutex_t send_lock; /* one frame at a time: alloc, copy, send;
				    * and the queue below */
	struct rpc_qent *qhead, *qtail; /* frames the connection could not take */
	uint32_t qn;
	uint64_t qbytes;
	int64_t qmoved_ms;     /* when the queue last moved (or began) */
	int64_t hello_by_ms;   /* closed if not ready by then (run thread) */
	int64_t linger_by_ms;  /* refused: closed once its frames are out, or then */
	bool ready, gone, closing, linger;
	struct rpc_sconn *prev, *next, *close_next;
};

struct rdmx_rpc_req {
	struct rdmx_rpc_server *srv;
	struct rpc_sconn *sc;
	const struct rpc_method *m;
	struct rpc_hdr h;      /* the request's validated header copy */
	struct rpc_rx rx;
	struct rdmx_rpc_req *next;          /* a worker's queue, the spares */
	struct rdmx_rpc_req *oprev, *onext; /* the server's outstanding */
	unsigned char resp[];               /* the response, k.max_resp bytes */
};

struct rpc_worker {
	struct rdmx_rpc_server *srv;
	pthread_t t;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct rdmx_rpc_req *head, *tail;
	bool stop, started;
};

struct rpc_handler {
	rdmx_rpc_handler fn;
	void *arg;
};

struct rdmx_rpc_server {
	rdmx_ctx *ctx;
	struct rdmx_rpc_opts o;
	const struct rpc_transport_ops *ops;
	struct rpc_contract k;
	struct rpc_handler *h;        /* by contract index */
	void *tstate;                 /* the transport's listener */
	struct rpc_worker *w;
	unsigned next_worker;
	pthread_mutex_t lock;         /* conns, pending, closing, stats */
	struct rpc_sconn *conns, *to_close;
	struct rdmx_rpc_req *outstanding; /* handed out, not answered */
	struct rdmx_rpc_req *spare;   /* answered requests kept for reuse */
	unsigned spares, spares_max;
	struct rdmx_rpc_server_stats st;
	uint64_t conn_ids;            /* connections so far (run thread) */
	atomic_uint queued;           /* connections with frames queued */
	unsigned lingering;           /* refused, closed once flushed (run thread) */
	int64_t sweep_ms, swept_ns;   /* the run thread's next and last look */
	_Atomic int64_t qmoved_ms;    /* when a queue last began or moved */
	uint64_t wr_closed;           /* work requests of closed connections */
	atomic_int stop;
	struct rdmx__err err;
};

/* Clients of @s whose contract matched, connected now, from @host (as
 * rdmx__conn_peer_host, core/admit.h, names it): KV's read door matches
 * its grants with them. */
unsigned rdmx__rpc_server_clients_from(rdmx_rpc_server *s, const char *host);

/* ---------------------------------------------------------------- client */

enum rpc_call_state { CALL_FREE = 0, CALL_SENT, CALL_DONE, CALL_ABANDONED };

struct rpc_call {
	uint64_t id;
	enum rpc_call_state state;
	uint16_t method;
	void *resp;
	size_t cap, len;
	int status, rc;
};

struct rdmx_rpc_client {
	rdmx_ctx *ctx;
	struct rdmx_rpc_opts o;
	const struct rpc_transport_ops *ops;
	struct rpc_contract k;
	void *t;
	struct rpc_call *calls;       /* o.window of them */
	uint32_t inflight;            /* SENT, DONE or ABANDONED */
	uint64_t seq;
	int dead;                     /* 0, or the error every call gets */
	struct rdmx__err err;
};

#endif /* RDMX_RPC_INT_H */
