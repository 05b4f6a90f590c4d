/* SPDX-License-Identifier: MIT */
/*
 * The fake fabric's insides, shared by its two files: fabric_fake.c (memory,
 * queues, execution of work requests, the seam's ops table) and
 * fabric_fake_cm.c (rdma_cm: listeners, requests, connect and accept). The
 * model is described at the top of fabric_fake.c. Not part of the seam.
 */
#ifndef RDMX_CORE_FABRIC_FAKE_H
#define RDMX_CORE_FABRIC_FAKE_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

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

struct fmr {
	struct rdmx__mr pub;
	int access;
	struct fmr *next;
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

static inline int64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
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

/* fabric_fake.c */
void rdmx__fake_mem_copy(void *dst, const void *src, size_t len);
void rdmx__fake_qp_error(struct rdmx__ep *qp);
void rdmx__fake_qp_free_rings(struct rdmx__ep *ep);
void rdmx__fake_qp_release(struct rdmx__ep *qp);

/* fabric_fake.c, for fabric_fake_dgram.c: push a completion; is the
 * local range readable (@write: writable by the NIC); WRITE @wr into
 * registered memory (0: the rkey or range is refused, nothing written). */
void rdmx__fake_cq_push(struct rdmx__cq *cq, const struct rdmx__wc *wc,
			struct rdmx__ep *owner, uint32_t slots);
int rdmx__fake_local_ok(uint32_t lkey, const void *addr, uint64_t len,
			int write);
int rdmx__fake_remote_write(const struct rdmx__wr *wr);

/* fabric_fake_cm.c: the seam's rdma_cm operations */
int rdmx__fake_listen(struct rdmx__fabric *fab, const char *addr, uint16_t port,
		      struct rdmx__ep **out);
uint16_t rdmx__fake_local_port(const struct rdmx__ep *ep);
int rdmx__fake_get_request(struct rdmx__ep *lis, int timeout_ms,
			   struct rdmx__ep **child, void *pdata, size_t *plen);
int rdmx__fake_resolve(struct rdmx__fabric *fab, const char *addr,
		       uint16_t port, int timeout_ms, struct rdmx__ep **out);
int rdmx__fake_resolve_src(struct rdmx__fabric *fab, const char *src,
			   const char *addr, uint16_t port, int timeout_ms,
			   struct rdmx__ep **out);
int rdmx__fake_connect(struct rdmx__ep *ep, const void *pdata, size_t plen,
		       int timeout_ms, void *reply, size_t *rlen);
int rdmx__fake_accept(struct rdmx__ep *ep, const void *pdata, size_t plen,
		      int timeout_ms);
int rdmx__fake_accept_poll(struct rdmx__ep *ep);
int rdmx__fake_reject(struct rdmx__ep *ep, const void *pdata, size_t plen);
int rdmx__fake_disconnect(struct rdmx__ep *ep);
int rdmx__fake_check_event(struct rdmx__ep *ep);
/* ep_fd(): @ep's rdma_cm "channel", an eventfd written on its events; and
 * the write (under the lock). */
int rdmx__fake_ep_fd(struct rdmx__ep *ep);
void rdmx__fake_cm_signal(struct rdmx__ep *ep);
void rdmx__fake_destroy_ep(struct rdmx__ep *ep);

#endif /* RDMX_CORE_FABRIC_FAKE_H */
