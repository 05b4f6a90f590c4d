/* SPDX-License-Identifier: MIT */
/*
 * Options: the defaults, the caller's struct loaded by its size, and the
 * range checks the core and the protocols' check_opts() share.
 */
#ifndef RDMX_CORE_OPTS_H
#define RDMX_CORE_OPTS_H

#include <stdint.h>
#include <rdmx/rdmx.h>

/* Load the caller's @in into @out by its size (defaults for what it does
 * not know); -EINVAL with a message for a bad size or src_addr. */
int rdmx__conn_opts_copy(const struct rdmx_conn_opts *in,
			 struct rdmx_conn_opts *out);
int rdmx__ctx_opts_copy(const struct rdmx_ctx_opts *in,
			struct rdmx_ctx_opts *out);
/* The fields every protocol reads (sizes, depths, retries, timeouts,
 * wait mode): 0, or -EINVAL with a message. */
int rdmx__opts_check(const struct rdmx_conn_opts *o);

/* -EINVAL with "@what V out of range LO..HI" unless @lo <= @v <= @hi. */
int rdmx__check_range(const char *what, uint32_t v, uint32_t lo, uint32_t hi);
/* The ring protocols' ring_size (a power of two in RDMX__RING_SIZE_MIN..
 * RDMX__RING_SIZE_MAX) and notify (an enum rdmx_notify value). */
#define RDMX__RING_SIZE_MIN 4096u
#define RDMX__RING_SIZE_MAX (1u << 30)
int rdmx__check_ring_opts(const struct rdmx_conn_opts *o);

/* Fill @o's wait_mode and spin_us left at their defaults from @ctx. */
void rdmx__wait_resolve(const rdmx_ctx *ctx, struct rdmx_conn_opts *o);

#endif /* RDMX_CORE_OPTS_H */
