/* SPDX-License-Identifier: MIT */
/*
 * The fabric seam: every verbs and rdma_cm call rdmx makes on the data and
 * connection path goes through one struct rdmx__fabric_ops. There are two
 * implementations:
 *   fabric_verbs.c - libibverbs + librdmacm, the real thing;
 *   fabric_fake.c  - an in-process double: SEND/RECV through queues, WRITE
 *                    and READ as memcpy, FETCH_ADD as an atomic, so protocol
 *                    logic (rings, many senders) is unit-tested natively.
 * Both report failures as negative errno with a detail message recorded by
 * rdmx__fail() (see errors.h).
 */
#ifndef RDMX_CORE_FABRIC_H
#define RDMX_CORE_FABRIC_H

#include <stddef.h>
#include <stdint.h>

struct rdmx__fabric; /* one implementation instance (owns PDs etc.) */
struct rdmx__ep;     /* an rdma_cm id: listening, or one end of an RC QP */
struct rdmx__cq;
struct rdmx__srq;
struct rdmx__dqp;    /* a UD or UC QP, made with the verbs, not rdma_cm */
struct rdmx__ah;     /* a UD address handle: where a SEND goes */
struct rdmx__dgram_ops;

/* Largest private_data on connect (RC over IB/RoCE: 56) and accept (196). */
#define RDMX__PDATA_CONNECT_MAX 56
#define RDMX__PDATA_ACCEPT_MAX 196
#define RDMX__PDATA_REJECT_MAX 148
#define RDMX__PDATA_BUF 196

/* Registered memory. Implementations embed this as their first member. */
struct rdmx__mr {
	void *addr;
	size_t len;
	uint32_t lkey;
	uint32_t rkey;
};

enum rdmx__access {
	RDMX__ACCESS_LOCAL = 1 << 0,   /* local write */
	RDMX__ACCESS_WRITE = 1 << 1,   /* remote write */
	RDMX__ACCESS_READ = 1 << 2,    /* remote read */
	RDMX__ACCESS_ATOMIC = 1 << 3,  /* remote atomic */
	RDMX__ACCESS_MW_BIND = 1 << 4, /* memory windows may be bound to it
					* (reg_mr; ignored where the device
					* has none: see mw_alloc) */
};

/*
 * A memory window (type 2B): a remote key to part of a registration that
 * works over ONE queue pair only, the one it is bound to, with the rights
 * of its bind. An access through its rkey arriving on any other QP, after
 * it was deallocated, or beyond its range or rights is refused by the
 * device as a bad rkey: RC completes the requester's WR with a remote
 * access error and both QPs go to error; UC drops the WRITE. Made with
 * mw_alloc() in an ep's protection domain, bound by mw_bind() (a work
 * request on the QP's send queue: its completion, signaled, comes on that
 * QP's send CQ; rkey is the new key from then on), unmade (and
 * invalidated) by mw_dealloc(), before the QP and the registration go.
 * Implementations embed this as their first member.
 */
struct rdmx__mw {
	uint32_t rkey;
};

struct rdmx__mw_bind {
	struct rdmx__ep *ep;    /* the QP it is bound to: an RC ep's, or ... */
	struct rdmx__dqp *qp;   /* ... (ep NULL) a UC QP */
	struct rdmx__mr *mr;    /* registered with RDMX__ACCESS_MW_BIND */
	void *addr;             /* within @mr; the window is not zero-based */
	size_t len;             /* > 0 */
	int access;             /* RDMX__ACCESS_WRITE | READ | ATOMIC */
	uint64_t wr_id;         /* of the bind's completion */
};

enum rdmx__op {
	RDMX__OP_SEND,
	RDMX__OP_SEND_IMM,
	RDMX__OP_WRITE,
	RDMX__OP_WRITE_IMM,
	RDMX__OP_READ,
	RDMX__OP_FETCH_ADD,
	RDMX__OP_CMP_SWAP, /* 8 bytes: swap in @swap if equal to @compare */
	RDMX__OP_RECV,     /* completions only: a receive consumed a SEND */
	RDMX__OP_RECV_IMM, /* completions only: a receive consumed a WRITE_IMM */
	RDMX__OP_BIND_MW,  /* completions only: mw_bind() */
};

enum rdmx__wr_flags {
	RDMX__WR_SIGNALED = 1 << 0,
	RDMX__WR_INLINE = 1 << 1,
};

/* One work request with a single scatter/gather element. */
struct rdmx__wr {
	uint64_t wr_id;
	enum rdmx__op op;
	unsigned flags;
	void *addr;           /* local buffer */
	uint32_t len;
	uint32_t lkey;
	uint64_t remote_addr; /* WRITE/READ/FETCH_ADD */
	uint32_t rkey;
	uint32_t imm;         /* host order; SEND_IMM/WRITE_IMM */
	uint64_t add;         /* FETCH_ADD operand; old value lands at addr */
	uint64_t compare;     /* CMP_SWAP: expected value; old lands at addr */
	uint64_t swap;        /* CMP_SWAP: value stored when it matched */
	struct rdmx__ah *ah;  /* UD SEND: where to (rdmx__dgram_ops) */
	uint32_t remote_qpn;  /* UD SEND: the destination QP */
	uint32_t remote_qkey; /* UD SEND: its qkey */
};

enum rdmx__wc_status {
	RDMX__WC_OK = 0,
	RDMX__WC_FLUSHED,      /* QP went to error; WR not executed */
	RDMX__WC_REMOTE_ACCESS,
	RDMX__WC_RNR_RETRY,    /* receiver had no receive posted, retries out */
	RDMX__WC_RETRY,        /* transport retries exceeded (peer gone) */
	RDMX__WC_LOCAL_LENGTH, /* message longer than the posted receive */
	RDMX__WC_OTHER,
};

struct rdmx__wc {
	uint64_t wr_id;
	enum rdmx__op op;
	enum rdmx__wc_status status;
	uint32_t byte_len;
	uint32_t imm;         /* host order, valid when has_imm */
	int has_imm;
	uint32_t qp_num;      /* which QP (for shared receive queues) */
	int vendor_status;    /* implementation's own code, for messages */
	uint32_t src_qp;      /* UD receives: the sender's QP number */
};

struct rdmx__qp_caps {
	struct rdmx__cq *send_cq;
	struct rdmx__cq *recv_cq;
	struct rdmx__srq *srq;       /* NULL: the QP has its own receive queue */
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_inline;
	uint8_t rnr_retry;
	uint8_t retry_count;
	uint8_t rd_atomic;           /* outstanding READ/atomic, 0: device max */
	uint8_t ack_timeout;         /* local ACK timeout 4.096 us * 2^n;
				      * 0: rdma_cm's default (n = 17, 0.54 s) */
};

struct rdmx__fabric_ops {
	const char *name;
	int (*create)(struct rdmx__fabric **out);
	void (*destroy)(struct rdmx__fabric *fab);

	/* Connection management (rdma_cm). */
	int (*listen)(struct rdmx__fabric *fab, const char *addr, uint16_t port,
		      struct rdmx__ep **out);
	uint16_t (*local_port)(const struct rdmx__ep *ep);
	/* Next connect request on a listening ep; its private data is copied
	 * to @pdata (RDMX__PDATA_BUF bytes) and its length to @plen. None
	 * within @timeout_ms: -ETIMEDOUT, or for 0 rdmx__again() (-EAGAIN,
	 * no message formatted). */
	int (*get_request)(struct rdmx__ep *lis, int timeout_ms,
			   struct rdmx__ep **child, void *pdata, size_t *plen);
	/* Client side: create an ep and resolve address and route. */
	int (*resolve)(struct rdmx__fabric *fab, const char *addr,
		       uint16_t port, int timeout_ms, struct rdmx__ep **out);
	/* Connect a resolved ep with a QP; on success the listener's accept
	 * data, on -ECONNREFUSED its reject data (may be empty), land in
	 * @reply/@rlen (RDMX__PDATA_BUF bytes). */
	int (*connect)(struct rdmx__ep *ep, const void *pdata, size_t plen,
		       int timeout_ms, void *reply, size_t *rlen);
	/* Send the accept reply and wait up to @timeout_ms for the dialer to
	 * complete (ESTABLISHED): 0, -ETIMEDOUT, or -errno. With 0 it does
	 * not wait: -EAGAIN while the handshake is still open, then ask
	 * accept_poll(). */
	int (*accept)(struct rdmx__ep *ep, const void *pdata, size_t plen,
		      int timeout_ms);
	/* Non-blocking: 0 once an accepted ep is established, -EAGAIN while
	 * the dialer has not completed, -errno when the handshake failed. */
	int (*accept_poll)(struct rdmx__ep *ep);
	/* Reject a request from get_request(); the ep is destroyed. */
	int (*reject)(struct rdmx__ep *ep, const void *pdata, size_t plen);
	int (*disconnect)(struct rdmx__ep *ep);
	/* Non-blocking: 0 while connected, -ECONNRESET once disconnected. */
	int (*check_event)(struct rdmx__ep *ep);
	void (*destroy_ep)(struct rdmx__ep *ep);

	/* Verbs resources, on the device the ep resolved to. */
	int (*reg_mr)(struct rdmx__ep *ep, void *addr, size_t len, int access,
		      struct rdmx__mr **out);
	void (*dereg_mr)(struct rdmx__mr *mr);
	int (*create_cq)(struct rdmx__ep *ep, int depth, struct rdmx__cq **out);
	void (*destroy_cq)(struct rdmx__cq *cq);
	int (*create_srq)(struct rdmx__ep *ep, int depth,
			  struct rdmx__srq **out);
	void (*destroy_srq)(struct rdmx__srq *srq);
	/* caps->max_inline: asked for; on return, what the QP got. */
	int (*create_qp)(struct rdmx__ep *ep, struct rdmx__qp_caps *caps);
	uint32_t (*qp_num)(const struct rdmx__ep *ep);

	/* Data path: post @n chained requests; 0 or -errno. */
	int (*post_send)(struct rdmx__ep *ep, const struct rdmx__wr *wr, int n);
	int (*post_recv)(struct rdmx__ep *ep, const struct rdmx__wr *wr, int n);
	int (*post_srq_recv)(struct rdmx__srq *srq, const struct rdmx__wr *wr,
			     int n);
	/* Up to @n completions; returns how many (>= 0) or -errno. */
	int (*poll_cq)(struct rdmx__cq *cq, struct rdmx__wc *wc, int n);

	/*
	 * Completion notification (the verbs completion channel): cq_fd() is
	 * a non-blocking fd that turns readable once the CQ, armed, gets a
	 * completion (-1: none). cq_arm() first takes the notifications that
	 * came (reads and acknowledges them; one came: the CQ is no longer
	 * armed), then arms it if it is not: 1 when it armed it now (the
	 * caller must poll the CQ again before it sleeps on the fd: a
	 * completion may have landed before the arm), 0 when it was still
	 * armed (the fd turns readable on the next completion), or -errno.
	 */
	int (*cq_fd)(struct rdmx__cq *cq);
	int (*cq_arm)(struct rdmx__cq *cq);
	/* An fd readable when @ep has an rdma_cm event (a connect request on
	 * a listener, a disconnect), -1 if none. Non-blocking. */
	int (*ep_fd)(struct rdmx__ep *ep);

	/* The protection domain @ep's resources are made in (registrations
	 * are valid for every ep of the same domain): an opaque identity. */
	const void *(*domain)(const struct rdmx__ep *ep);
	/* resolve() from the local address @src (it picks the device). */
	int (*resolve_src)(struct rdmx__fabric *fab, const char *src,
			   const char *addr, uint16_t port, int timeout_ms,
			   struct rdmx__ep **out);
	/* @ep's local (@peer 0) or remote address as "addr:port" text. */
	int (*addr_str)(const struct rdmx__ep *ep, int peer, char *buf,
			size_t len);
	/* UD and UC queue pairs (below). */
	const struct rdmx__dgram_ops *dgram;

	/* Memory windows (struct rdmx__mw above). mw_alloc(): -ENOTSUP when
	 * the device of @ep has no type 2 windows. */
	int (*mw_alloc)(struct rdmx__ep *ep, struct rdmx__mw **out);
	int (*mw_bind)(struct rdmx__mw *mw, const struct rdmx__mw_bind *b);
	void (*mw_dealloc)(struct rdmx__mw *mw);
	/* The GID (network order) of @ep's connected peer, as a peer's QP
	 * descriptor carries it (all zero: not known, IB without GRH). */
	int (*peer_gid)(const struct rdmx__ep *ep, uint8_t gid[16]);
};

/*
 * UD and UC queue pairs (HERD: requests WRITTEN over UC, answers SENT
 * over UD). rdma_cm connects neither here: a dqp is made on the device and
 * in the protection domain of an ep (registrations of that domain serve
 * it), its CQs come from create_cq(), poll_cq() reaps them, and a UC QP is
 * moved INIT->RTR->RTS by hand from the peer's rdmx__qp_desc, which the
 * caller exchanges (say over an RC connection; see src/core/dgram.h for
 * its wire form and validation).
 *  - UD: SENDs of at most one path MTU (dgram_caps), to an address handle
 *    plus QPN and qkey; unreliable: a SEND meeting no posted receive (or a
 *    wrong qkey) is dropped and the sender still completes OK. A receive
 *    lands with the 40-byte GRH first (RDMX__GRH_LEN; RoCEv2 with IPv4 puts
 *    the IPv4 header in its last 20 bytes, IB without a GRH nothing): the payload starts
 *    at offset 40 and byte_len counts the 40.
 *  - UC: RDMA WRITE into a region of the peer (its rkey, REMOTE WRITE); no
 *    ACKs, no retries: a lost or refused WRITE is silently dropped, the
 *    sender completes OK.
 * Destroy a dqp before its CQs (verbs refuses the CQs with EBUSY).
 */
#define RDMX__GRH_LEN 40

enum rdmx__dqp_type {
	RDMX__DQP_UD = 1,
	RDMX__DQP_UC = 2,
};

struct rdmx__dqp_caps {
	enum rdmx__dqp_type type;
	struct rdmx__cq *send_cq;
	struct rdmx__cq *recv_cq;
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_inline;   /* asked for; on return, what the QP got */
	uint32_t qkey;         /* UD: receives only SENDs carrying it */
};

/* What a peer needs to address this QP (UD) or connect to it (UC). */
struct rdmx__qp_desc {
	uint32_t qpn;          /* 24 bits, not 0 */
	uint32_t psn;          /* 24 bits: UC's first packet sequence number */
	uint32_t qkey;         /* UD */
	uint16_t lid;          /* IB; 0 on RoCE */
	uint8_t mtu;           /* path MTU as IBV_MTU_*: 1 (256) .. 5 (4096) */
	uint8_t type;          /* enum rdmx__dqp_type */
	uint8_t gid[16];       /* all zero: no GRH (IB without routing) */
};

struct rdmx__dgram_caps {
	int uc;                /* the device runs UC QPs (rxe: yes, iWARP: no) */
	uint32_t ud_max;       /* largest UD SEND payload: the port's MTU */
	uint8_t mtu;           /* the port's active MTU, IBV_MTU_* */
};

struct rdmx__dgram_ops {
	/* What @ep's device and port offer. */
	int (*caps)(struct rdmx__ep *ep, struct rdmx__dgram_caps *out);
	/* A UD QP ready to send and receive (RTS), or a UC QP in INIT
	 * (receives may be posted) for uc_connect(). */
	int (*create)(struct rdmx__ep *ep, struct rdmx__dqp_caps *caps,
		      struct rdmx__dqp **out);
	void (*destroy)(struct rdmx__dqp *qp);
	/* This side's descriptor, for the peer. */
	int (*desc)(struct rdmx__dqp *qp, struct rdmx__qp_desc *out);
	/* UC: RTR and RTS toward the peer's (validated) descriptor. */
	int (*uc_connect)(struct rdmx__dqp *qp, const struct rdmx__qp_desc *peer);
	/* UD: an address handle for the peer's (validated) descriptor. */
	int (*ah_create)(struct rdmx__dqp *qp, const struct rdmx__qp_desc *peer,
			 struct rdmx__ah **out);
	void (*ah_destroy)(struct rdmx__ah *ah);
	/* UD: SEND (wr->ah, remote_qpn, remote_qkey); UC: WRITE. */
	int (*post_send)(struct rdmx__dqp *qp, const struct rdmx__wr *wr, int n);
	int (*post_recv)(struct rdmx__dqp *qp, const struct rdmx__wr *wr, int n);
};

extern const struct rdmx__dgram_ops rdmx__dgram_verbs;
extern const struct rdmx__dgram_ops rdmx__dgram_fake;

/* The fake's UD SENDs dropped so far (no receive posted, bad qkey, no such
 * QP) and UC WRITEs dropped (bad rkey or range, peer not connected). */
extern unsigned long rdmx__fake_ud_drops, rdmx__fake_uc_drops;

extern const struct rdmx__fabric_ops rdmx__fabric_verbs;
extern const struct rdmx__fabric_ops rdmx__fabric_fake;

/*
 * Fault injection for tests (0: off). When N > 0, every Nth FETCH_ADD on a
 * fake QP completes with the result of that QP's previous FETCH_ADD while
 * the add itself is done once, as rxe does after a retransmission.
 */
extern unsigned rdmx__fake_stale_faa;

/*
 * Fault injection for tests: @ep's host goes silent (@on) as if it died
 * without a word: its QP executes nothing, sends no disconnect, and what
 * its peer posts toward it completes with RETRY once the peer's transport
 * retries are over ((retry_count + 1) local ACK timeouts).
 */
void rdmx__fake_silence(struct rdmx__ep *ep, int on);

/*
 * For tests: how many post_send calls (doorbells) @ep's QP had, and how
 * many signaled work requests they carried.
 */
void rdmx__fake_sq_counts(struct rdmx__ep *ep, unsigned long *posts,
			  unsigned long *signaled);

/* For tests: how many post calls (doorbells) the receive queue @ep takes
 * its receives from had (its shared receive queue if it has one). */
void rdmx__fake_rq_posts(struct rdmx__ep *ep, unsigned long *posts);

/*
 * A half-open requester for tests: connect @ep (a fresh client with a
 * QP) with @pdata and return at once, never completing the handshake
 * (an rdma_cm active side that never sends its RTU). The listener's
 * accept of it stays open until @ep is destroyed.
 */
int rdmx__fake_connect_half(struct rdmx__ep *ep, const void *pdata,
			    size_t plen);

/* Name of a completion status, for messages. */
const char *rdmx__wc_status_name(enum rdmx__wc_status st);

#endif /* RDMX_CORE_FABRIC_H */
