/* SPDX-License-Identifier: MIT */
/* Helpers of write_atomic's two test files (atomic_tests.c, atomic_holes.c). */
#ifndef RDMX_TESTS_ATOMIC_COMMON_H
#define RDMX_TESTS_ATOMIC_COMMON_H

#include "harness.h"

#define SMALL_RING (16u * 1024)
#define SMALL_MAX 1024u

/* write_atomic through a SMALL_RING ring, messages up to SMALL_MAX. */
struct rdmx_conn_opts small_opts(void);
/* th_pair_open with @o on both sides; fails the test if it cannot. */
void open_pair(struct th_pair *p, const struct rdmx_conn_opts *o);
/* A second dialer on @p's listener. */
void dial_second(struct th_pair *p, const struct rdmx_conn_opts *o,
		 rdmx_conn **client, rdmx_conn **server);
/* Send @size bytes of th_fill's pattern @seq (imm @seq, @flags). */
void send_seq(rdmx_conn *c, size_t size, uint64_t seq, uint32_t flags);
/* @m is message @seq of @size bytes. */
void check_seq(const struct rdmx_msg *m, size_t size, uint64_t seq);

/* @m's seq (sender id << 32 | its number) into *@seq, and the sender's
 * id: below @senders, and @m must be its message @next[id]. */
uint32_t seq_in_order(const struct rdmx_msg *m, const uint64_t *next, uint32_t senders,
		      uint64_t *seq);
/* The next message on @lis (10 s) is @from's message @seq of @size bytes;
 * it is released. */
void lis_expect(rdmx_listener *lis, rdmx_conn *from, size_t size, uint64_t seq);
/* The next message on @c (10 s) is message @seq of @size bytes; released. */
void recv_expect(rdmx_conn *c, size_t size, uint64_t seq);
/* Close open_two's second pair, then @p. */
void close_two(struct th_pair *p, rdmx_conn *c2, rdmx_conn *s2);

#endif /* RDMX_TESTS_ATOMIC_COMMON_H */
