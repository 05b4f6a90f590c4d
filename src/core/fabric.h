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
};

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
