/* SPDX-License-Identifier: MIT */
/*
 * Tests that speak to a listener through the fabric seam with hand-made
 * private data (malformed, foreign or mismatched hellos). cmocka tests
 * only: set-up failures are assertions.
 */
#ifndef RDMX_TESTS_SEAM_H
#define RDMX_TESTS_SEAM_H

#include <stddef.h>
#include <stdint.h>

#include <rdmx/rdmx.h>

#include "core/wire.h"

/*
 * Connect to @port with @plen bytes of private data @pd: 0 (then
 * disconnected at once) or the connect's -errno; on -ECONNREFUSED the
 * listener's reason is decoded into @why.
 */
int th_raw_connect(rdmx_ctx *ctx, uint16_t port, const void *pd, size_t plen,
		   char *why, size_t wlen);

/* th_raw_connect() with @h carrying the @blen-byte protocol block @block. */
int th_hello_connect(rdmx_ctx *ctx, uint16_t port, struct rdmx__hello *h,
		     const void *block, size_t blen, char *why, size_t wlen);

#endif /* RDMX_TESTS_SEAM_H */
