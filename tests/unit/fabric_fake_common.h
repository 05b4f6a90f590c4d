/* SPDX-License-Identifier: MIT */
/*
 * What test_fabric_fake's files share (test_fabric_fake.c,
 * fabric_fake_data_tests.c): a pair of connected ends on the fake fabric,
 * work requests on their buffers, completions polled within WAIT_MS; and
 * the data path's cases, listed in test_fabric_fake.c's main.
 */
#ifndef RDMX_TESTS_FABRIC_FAKE_COMMON_H
#define RDMX_TESTS_FABRIC_FAKE_COMMON_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/fabric.h"

#define BUF 4096
#define DEPTH 16
#define WAIT_MS 2000

extern const struct rdmx__fabric_ops *F;

/* One end of a connection: an ep with its QP, CQs and a registered buffer. */
struct side {
	struct rdmx__ep *ep;
	struct rdmx__cq *scq, *rcq;
	struct rdmx__mr *mr;
	int access;      /* of mr; 0: all */
	int cq_depth;    /* 0: DEPTH * 4 */
	struct rdmx__qp_caps caps; /* template; CQs are filled in */
	_Alignas(64) uint8_t buf[BUF];
};

struct pair {
	struct rdmx__fabric *cfab, *sfab;
	struct rdmx__ep *lis;
	struct side c, s;
	uint8_t req[RDMX__PDATA_BUF], rep[RDMX__PDATA_BUF];
	size_t req_len, rep_len;
};

/* A dialer on its own thread (connect blocks until the answer). */
struct dial {
	pthread_t thread;
	struct rdmx__fabric *fab;
	uint16_t port;
	struct side *side;
	const char *pdata;
	int timeout_ms;
	uint8_t reply[RDMX__PDATA_BUF];
	size_t rlen;
	int rc;
};

double now_ms(void);
void sleep_ms(int ms);
struct rdmx__qp_caps default_caps(void);
/* Register the buffer, make the CQs and the QP on s->ep. */
int side_setup(struct side *s);
void side_close(struct side *s);
/* Start @d dialing @port from @fab into @side, with @pdata. */
void dial_start(struct dial *d, struct rdmx__fabric *fab, uint16_t port,
		struct side *side, const char *pdata, int timeout_ms);
/* Dial @lis from @cfab into @c and accept it into @s. */
void conn_open(struct pair *p, struct side *c, struct side *s);
/* A pair's fabrics and listener, not yet connected (pair_open). */
struct pair *pair_new(void);
void pair_open(struct pair *p);
void pair_free(struct pair *p);
/* A signaled WR on @s's buffer at @off. */
struct rdmx__wr wr_on(struct side *s, enum rdmx__op op, size_t off, uint32_t len);
uint64_t raddr(struct side *s, size_t off);
/* A signaled RDMA WR from @s's buffer at @off to @to's at @roff. */
struct rdmx__wr rdma_on(struct side *s, enum rdmx__op op, size_t off,
			uint32_t len, struct side *to, size_t roff);
int post(struct side *s, struct rdmx__wr w);
/* Post @n receives of @len bytes at @off, @off + len, ... */
void post_recvs(struct side *s, size_t off, uint32_t len, int n);
/* Poll until @n completions arrived or WAIT_MS passed; how many came. */
int poll_n(struct rdmx__cq *cq, struct rdmx__wc *wc, int n);
/* The next completion on @cq (within WAIT_MS) has @status. */
void expect_wc(struct rdmx__cq *cq, enum rdmx__wc_status status);
int poll_now(struct rdmx__cq *cq);

/* The fixture of most tests: an open pair in *state, freed after. */
int open_pair(void **state);
int free_pair(void **state);

#define pair_test(f) cmocka_unit_test_setup_teardown(f, open_pair, free_pair)

/* The data path's cases (fabric_fake_data_tests.c). */
void test_send_recv_imm_order(void **state);
void test_rnr_waits_in_order(void **state);
void test_rnr_retry_exhausted(void **state);
void test_send_too_long(void **state);
void test_inline_copied_at_post(void **state);
void test_write_then_read(void **state);
void test_remote_access_errors(void **state);
void test_local_key_error(void **state);
void test_local_write_needs_access(void **state);
void test_write_imm(void **state);
void test_fetch_add_threads(void **state);
void test_srq_shared(void **state);
void test_unsignaled(void **state);
void test_max_send_wr(void **state);
void test_cq_overflow(void **state);

#endif /* RDMX_TESTS_FABRIC_FAKE_COMMON_H */
