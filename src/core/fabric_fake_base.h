/* SPDX-License-Identifier: MIT */
/*
 * The fake fabric's ground floor, shared by every file above it: the model's
 * types (endpoints, queues, completions), all of its state behind one mutex,
 * its clock, and memory: registered regions, the rights checks every access
 * passes, and the stores and loads a remote access makes. The files above:
 * fabric_fake_qp.c (CQs, SRQs, QPs), fabric_fake_post.c (posting, execution,
 * completions), fabric_fake_cm.c (rdma_cm), fabric_fake_dgram.c (UD, UC),
 * and fabric_fake.c, which names them in the seam's ops table and describes
 * the model. Not part of the seam.
 */
#ifndef RDMX_CORE_FABRIC_FAKE_BASE_H
#define RDMX_CORE_FABRIC_FAKE_BASE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "fabric.h"

#define EPHEMERAL_FIRST 49152
#define FIRST_QPN 0x11
#define RNR_INFINITE 7
#define RNR_STEP_NS 1000000LL

#if defined(__SANITIZE_THREAD__)
#define FAKE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FAKE_TSAN 1
#endif
#endif

/* vendor_status of error completions: the ibv_wc_status number. */
enum {
	VS_LOC_LEN = 1,
	VS_LOC_PROT = 4,
	VS_FLUSH = 5,
	VS_REM_INV_REQ = 9,
	VS_REM_ACCESS = 10,
	VS_REM_OP = 11,
	VS_RETRY = 12,
	VS_RNR_RETRY = 13,
};

/* A memory region, or a memory window (@mw set): pub.rkey is the
 * window's key, pub.addr/len its bound range, @qpn the QP it is bound to
 * (0: not bound, no access passes), @parent the region it lies in. */
struct fmr {
	struct rdmx__mr pub;
	int access;
	struct fmr *next;
	struct rdmx__mw mw;
	int is_mw;
	uint32_t qpn;
	const struct fmr *parent;
	struct rdmx__mw_bind bind; /* an RC bind posted, applied when it runs */
};

/* Posted receives: a QP's own receive queue, or an SRQ. */
struct rq {
	struct rdmx__wr *w;
	uint32_t cap, head, count;
	unsigned long posts;       /* post calls into it (doorbells) */
};

struct rdmx__srq {
	struct rq rq;
	struct rdmx__wr ring[];
};

struct cqe {
	struct rdmx__wc wc;
	struct rdmx__ep *owner; /* send completions: QP whose slots it frees */
	uint32_t slots;
};

struct rdmx__cq {
	uint32_t cap, head, count;
	int overflow;
	int efd;     /* the completion channel: an eventfd, -1 if none */
	int notify;  /* armed: the next completion writes efd */
	int armed;   /* armed and no notification taken since (cq_arm) */
	struct cqe ring[];
};

/* A posted send WR not executed yet (it is, or waits behind, RNR). */
struct pend {
	struct rdmx__wr wr;
	int64_t deadline; /* RNR give-up time once refused, 0 before */
	int retry;        /* deadline is the transport's: the peer is silent */
};

struct rdmx__fabric {
	int unused;
};

enum ep_kind { EP_LISTENER, EP_CLIENT, EP_CHILD };
enum cm_state { CM_IDLE, CM_CONNECTING, CM_CONNECTED, CM_DISCONNECTED };
enum qp_state { QP_NONE, QP_INIT, QP_RTS, QP_ERR };

struct rdmx__ep {
	struct rdmx__fabric *fab;
	enum ep_kind kind;
	uint16_t port;             /* listener, child: local; client: remote */
	struct rdmx__ep *lnext;    /* in G.listeners */
	struct rdmx__ep *reqs;     /* listener: dialers not yet picked up */
	struct rdmx__ep *rnext;    /* client: next in its listener's reqs */
	struct rdmx__ep *lis;      /* client: the listener it is queued on */
	enum cm_state cm;
	struct rdmx__ep *peer;     /* the other end, from get_request on */
	int answer;                /* client: 1 waiting, 0 or -ECONNREFUSED */
	int half_open;             /* client: never completes a handshake */
	char src[48];              /* client: the address it dialed from
				    * (resolve_src), "" for none */
	uint8_t pdata[RDMX__PDATA_BUF]; /* client: request, then the answer */
	size_t plen;

	enum qp_state qp;
	uint32_t qpn;
	struct rdmx__qp_caps caps;
	struct rq rq;
	struct pend *sq;           /* ring of max_send_wr */
	uint8_t *inl;              /* inline copies: max_inline per sq slot */
	uint32_t sq_head, sq_count;
	uint32_t sq_used;          /* slots whose completion is not polled */
	uint32_t unsig;            /* unsignaled WRs since the last completion */
	unsigned long posts;       /* post_send calls (doorbells) */
	unsigned long signaled;    /* signaled WRs posted */
	uint32_t nfaa;             /* FETCH_ADDs run (rdmx__fake_stale_faa) */
	uint64_t last_faa;         /* the result of the previous one */
	int silent;                /* rdmx__fake_silence(): the host is dead */
	int cm_fd;                 /* ep_fd(): an eventfd, -1 until asked for */
	struct rdmx__ep *qnext;    /* in G.qps */
};

struct rdmx__fake_globals {
	pthread_mutex_t lock;
	pthread_cond_t cm;         /* broadcast on every rdma_cm change */
	struct rdmx__ep *listeners;
	struct rdmx__ep *qps;
	struct fmr *mrs;
	uint32_t next_key;
	uint32_t next_qpn;
	uint16_t next_port;
};

/* All of the fake's state, behind one mutex. */
extern struct rdmx__fake_globals rdmx__fake_g;
#define G rdmx__fake_g

static inline void lock(void)
{
	pthread_mutex_lock(&G.lock);
}

static inline void unlock(void)
{
	pthread_mutex_unlock(&G.lock);
}

/* ------------------------------------------------------------------ time */

/* The fake device's time (retry timers, rdma_cm waits) is the library's
 * clock; the rdma_cm condition variable waits on CLOCK_MONOTONIC too. */
static inline int64_t now_ns(void)
{
	return rdmx__now_ns();
}

static inline int64_t deadline_in(int timeout_ms)
{
	return timeout_ms < 0 ? -1 : now_ns() + (int64_t)timeout_ms * 1000000;
}

/* Wait for an rdma_cm change until @deadline (< 0: forever). */
static inline int cm_wait(int64_t deadline)
{
	struct timespec t;

	if (deadline < 0)
		return pthread_cond_wait(&G.cm, &G.lock);
	t.tv_sec = deadline / 1000000000;
	t.tv_nsec = deadline % 1000000000;
	return pthread_cond_timedwait(&G.cm, &G.lock, &t);
}


/* ---------------------------------------------------------------- memory */

static inline void mem_copy(void *dst, const void *src, size_t len)
{
	if (len)
		memmove(dst, src, len);
}

/* Bytes into memory its owner may be polling (see the model at the top
 * of fabric_fake.c). */
static inline void remote_store(uint64_t raddr, const void *src, size_t len)
{
#ifdef FAKE_TSAN
	uint8_t *d = (uint8_t *)(uintptr_t)raddr;
	const uint8_t *s = src;

	for (size_t i = 0; i < len; i++)
		__atomic_store_n(d + i, s[i], __ATOMIC_RELEASE);
#else
	/* In increasing address order, as rxe and HCAs place a WRITE (a
	 * memmove may store its last bytes first): bytes up to an 8-byte
	 * boundary, 8-byte release stores, then the tail bytes. */
	uint8_t *d = (uint8_t *)(uintptr_t)raddr;
	const uint8_t *s = src;
	size_t i = 0;
	uint64_t w;

	for (; i < len && ((uintptr_t)(d + i) & 7); i++)
		__atomic_store_n(d + i, s[i], __ATOMIC_RELEASE);
	for (; i + 8 <= len; i += 8) {
		memcpy(&w, s + i, 8);
		__atomic_store_n((uint64_t *)(void *)(d + i), w, __ATOMIC_RELEASE);
	}
	for (; i < len; i++)
		__atomic_store_n(d + i, s[i], __ATOMIC_RELEASE);
#endif
}

static inline void remote_load(void *dst, uint64_t raddr, size_t len)
{
	/* An aligned 8-byte READ is one load, as on HCAs (never torn). */
	if (len == 8 && !(raddr & 7)) {
		uint64_t w = __atomic_load_n((const uint64_t *)(uintptr_t)raddr,
					     __ATOMIC_ACQUIRE);

		memcpy(dst, &w, 8);
		return;
	}
#ifdef FAKE_TSAN
	const uint8_t *s = (const uint8_t *)(uintptr_t)raddr;
	uint8_t *d = dst;

	for (size_t i = 0; i < len; i++)
		d[i] = __atomic_load_n(s + i, __ATOMIC_ACQUIRE);
#else
	mem_copy(dst, (const void *)(uintptr_t)raddr, len);
#endif
}

/* The MR with @key (an rkey if @remote) if it covers [addr, addr+len);
 * a window's key only when it arrives on the QP @at_qpn it is bound to
 * (an lkey never names a window). */
static inline struct fmr *mr_find(uint32_t key, int remote, uint32_t at_qpn,
				  uint64_t addr, uint64_t len)
{
	for (struct fmr *m = G.mrs; m; m = m->next) {
		uint64_t base = (uintptr_t)m->pub.addr;

		if ((remote ? m->pub.rkey : m->pub.lkey) != key || (m->is_mw && !remote))
			continue;
		if (m->is_mw && (!m->qpn || m->qpn != at_qpn))
			return NULL;
		if (addr < base || len > m->pub.len || addr - base > m->pub.len - len)
			return NULL;
		return m;
	}
	return NULL;
}

static inline int local_ok(uint32_t lkey, const void *addr, uint64_t len)
{
	return !len || mr_find(lkey, 0, 0, (uintptr_t)addr, len);
}

/* Memory the NIC writes locally (a receive, a READ's or FETCH_ADD's
 * destination) needs local write access, as verbs' LOCAL_WRITE. */
static inline int local_write_ok(uint32_t lkey, const void *addr,
				 uint64_t len)
{
	struct fmr *m;

	if (!len)
		return 1;
	m = mr_find(lkey, 0, 0, (uintptr_t)addr, len);
	return m && (m->access & RDMX__ACCESS_LOCAL);
}

/* An access of @wr arriving on the responder's QP @at_qpn. */
static inline int remote_ok(const struct rdmx__wr *wr, uint32_t at_qpn,
			    uint64_t len, int access)
{
	struct fmr *m;

	if (!len)
		return 1;
	m = mr_find(wr->rkey, 1, at_qpn, wr->remote_addr, len);
	return m && (m->access & access);
}

/* WRITE @wr into registered memory (UC) on the responder's QP @at_qpn: 0
 * if the rkey or range is refused, and nothing is written. */
static inline int remote_write(const struct rdmx__wr *wr, uint32_t at_qpn)
{
	if (!remote_ok(wr, at_qpn, wr->len, RDMX__ACCESS_WRITE))
		return 0;
	if (wr->len)
		remote_store(wr->remote_addr, wr->addr, wr->len);
	return 1;
}

/* fabric_fake_base.c: the fabric (one process-wide model), its domain and
 * its memory regions, for the seam's ops table. */
int rdmx__fake_create(struct rdmx__fabric **out);
void rdmx__fake_destroy(struct rdmx__fabric *fab);
const void *rdmx__fake_domain(const struct rdmx__ep *ep);
int rdmx__fake_reg_mr(struct rdmx__ep *ep, void *addr, size_t len, int access,
		      struct rdmx__mr **out);
void rdmx__fake_dereg_mr(struct rdmx__mr *mr);
/* Memory windows: made unbound; bound in fabric_fake_dgram.c (to a QP). */
int rdmx__fake_mw_alloc(struct rdmx__ep *ep, struct rdmx__mw **out);
void rdmx__fake_mw_dealloc(struct rdmx__mw *mw);
/* A fresh remote key (odd; lkeys are even); under the lock. */
uint32_t rdmx__fake_rkey_new(void);

/* fabric_fake_dgram.c: a window bound to a UC QP; a connected ep's peer's
 * GID (every fake host is 127.0.0.1). */
int rdmx__fake_mw_bind(struct rdmx__mw *mw, const struct rdmx__mw_bind *b);
int rdmx__fake_peer_gid(const struct rdmx__ep *ep, uint8_t gid[16]);

#endif /* RDMX_CORE_FABRIC_FAKE_BASE_H */
