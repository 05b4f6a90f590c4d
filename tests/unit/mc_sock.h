/* SPDX-License-Identifier: MIT */
/* Sockets to the memcached front door for its tests (mc_sock.c). */
#ifndef RDMX_TEST_MC_SOCK_H
#define RDMX_TEST_MC_SOCK_H

#include <stddef.h>
#include <stdint.h>

int mc_dial(int port);
void mc_say(int fd, const char *s);
const char *mc_await(int fd, const char *want, char *buf, size_t cap);
uint64_t mc_stat(int fd, const char *name);
void *mc_serve(void *srv);

#endif /* RDMX_TEST_MC_SOCK_H */
