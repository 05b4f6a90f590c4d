/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/conn.h"
#include "harness.h"
#include "seam.h"

int th_raw_connect(rdmx_ctx *ctx, uint16_t port, const void *pd, size_t plen,
		   char *why, size_t wlen)
{
	const struct rdmx__fabric_ops *f = ctx->fops;
	uint8_t reply[RDMX__PDATA_BUF];
	struct rdmx__qp_caps caps = { .max_send_wr = 4, .max_recv_wr = 4, .rnr_retry = 7,
				      .retry_count = 7 };
	struct rdmx__ep *ep;
	struct rdmx__cq *cq;
	size_t rlen = 0;
	int rc;

	assert_int_equal(f->resolve(ctx->fab, th_addr(), port, 2000, &ep), 0);
	assert_int_equal(f->create_cq(ep, 8, &cq), 0);
	caps.send_cq = caps.recv_cq = cq;
	assert_int_equal(f->create_qp(ep, &caps), 0);
	rc = f->connect(ep, pd, plen, 5000, reply, &rlen);
	if (rc == -ECONNREFUSED)
		rdmx__reject_decode(reply, rlen, why, wlen);
	if (!rc)
		f->disconnect(ep);
	f->destroy_ep(ep);
	f->destroy_cq(cq);
	return rc;
}

int th_hello_connect(rdmx_ctx *ctx, uint16_t port, struct rdmx__hello *h,
		     const void *block, size_t blen, char *why, size_t wlen)
{
	uint8_t pd[RDMX__PDATA_CONNECT_MAX];
	int len;

	assert_true(blen <= sizeof(h->block));
	memcpy(h->block, block, blen);
	h->block_len = (uint8_t)blen;
	len = rdmx__hello_encode(h, pd, sizeof(pd));
	assert_true(len > 0);
	return th_raw_connect(ctx, port, pd, (size_t)len, why, wlen);
}
