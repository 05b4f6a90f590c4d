/* SPDX-License-Identifier: MIT */
/*
 * Vector receive and release (rdmx_recv_many, rdmx_msg_release_many;
 * issue 10): conformance tests for every protocol, in recv_many.c, run by
 * conformance.c's groups.
 */
#ifndef RDMX_TESTS_RECV_MANY_H
#define RDMX_TESTS_RECV_MANY_H

void test_recv_many_in_order(void **state);
void test_recv_many_max_smaller(void **state);
void test_recv_many_ring_wrap(void **state);
void test_recv_many_again(void **state);
void test_recv_many_peer_close(void **state);
void test_recv_many_bad_args(void **state);

#endif
