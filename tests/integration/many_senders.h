/* SPDX-License-Identifier: MIT */
#ifndef RDMX_TESTS_MANY_SENDERS_H
#define RDMX_TESTS_MANY_SENDERS_H

#include <stdint.h>

/* 8 senders on 8 threads, @per_sender messages each, into one listener
 * read with rdmx_listener_recv(); fails the current cmocka test on any
 * loss, duplicate, reordering within a sender or corrupted byte. */
void th_many_senders(const char *protocol, uint64_t per_sender);

#endif
