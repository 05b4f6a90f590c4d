/* SPDX-License-Identifier: MIT */
/*
 * Bursts of sends (rdmx_send_flags with RDMX_SEND_MORE, issue 10):
 * conformance tests for every protocol, in send_burst.c, run by
 * conformance.c's groups.
 */
#ifndef RDMX_TESTS_SEND_BURST_H
#define RDMX_TESTS_SEND_BURST_H

#include <rdmx/rdmx.h>

void test_send_burst_in_order(void **state);
void test_send_burst_pushed(void **state);
void test_send_burst_bad(void **state);
void test_send_burst_deep(void **state);
void test_send_burst_slow_receiver(void **state);
void test_send_burst_peer_closes(void **state);
void test_send_burst_ring_wrap(void **state);
void test_send_burst_backpressure(void **state);
void test_send_burst_peer_close(void **state);

#endif
