/* SPDX-License-Identifier: MIT */
/*
 * Per-send completions (rdmx_send_tok + rdmx_wait), the buffer of a
 * failed send and rdmx_conn_close with sends in flight: conformance tests
 * for every protocol, in send_tokens.c, run by conformance.c's groups.
 */
#ifndef RDMX_TESTS_SEND_TOKENS_H
#define RDMX_TESTS_SEND_TOKENS_H

#include <rdmx/rdmx.h>

/* conformance.c: the protocol under test and its options; a connected
 * pair with server options @so and client options @co (a failure to
 * connect fails the test, saying why). */
struct th_pair;
const char *cf_protocol(void);
struct rdmx_conn_opts cf_opts(void);
void cf_pair(struct th_pair *p, const struct rdmx_conn_opts *so,
	     const struct rdmx_conn_opts *co);

void test_send_tokens_in_order(void **state);
void test_send_tokens_no_flush(void **state);
void test_send_tokens_bad(void **state);
void test_send_tokens_peer_gone(void **state);
void test_send_failed_keeps_buffer(void **state);
void test_send_close_no_drain(void **state);

#endif
