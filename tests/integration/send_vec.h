/* SPDX-License-Identifier: MIT */
/*
 * Vector send (rdmx_sendv; issue 10): conformance tests for every
 * protocol, in send_vec.c, run by conformance.c's groups.
 */
#ifndef RDMX_TESTS_SEND_VEC_H
#define RDMX_TESTS_SEND_VEC_H

void test_sendv_in_order(void **state);
void test_sendv_partial(void **state);
void test_sendv_bad_args(void **state);
void test_sendv_peer_close(void **state);

#endif
