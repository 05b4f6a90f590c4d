/* SPDX-License-Identifier: MIT */
/*
 * rdmx KV: a key-value server over rdmx (issue 12). This step: the store
 * and its memcached ASCII front door over TCP; the RDMA side (GET by RPC
 * and by one-sided READ) comes with rdmx RPC.
 *
 * Conventions as in rdmx.h: 0 or a negative errno, a readable message in
 * rdmx_kv_server_error() (and rdmx_last_error()) on failure, opaque
 * handles. One thread runs rdmx_kv_server_run(); rdmx_kv_server_stop() may
 * be called from any thread or a signal handler.
 */
#ifndef RDMX_KV_H
#define RDMX_KV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rdmx_kv_server rdmx_kv_server;

/* A server's sizes and front door. Zero fields take the defaults. */
struct rdmx_kv_server_opts {
	uint64_t capacity;      /* entries at most (default 65536) */
	uint64_t memory;        /* bytes for values stored out of line (default 64 MiB) */
	uint32_t inline_max;    /* longest value kept in its entry, multiple of 8 (default 1024) */
	uint32_t item_max;      /* longest value (default 1 MiB - 512, as memcached's) */
	const char *memcached_addr; /* front door address (default "0.0.0.0") */
	int memcached_port;     /* front door TCP port: -1 none, 0 any free port */
	int max_clients;        /* front door connections at once (default 1024) */
};

/**
 * rdmx_kv_server_create - a server with an empty store and, when
 * @opts->memcached_port >= 0, its memcached front door listening.
 * -EINVAL for bad sizes, -ENOMEM, or the socket's -errno (port in use...).
 */
int rdmx_kv_server_create(const struct rdmx_kv_server_opts *opts,
			  rdmx_kv_server **out);

/**
 * rdmx_kv_server_port - the front door's TCP port (the one the system
 * chose when 0 was asked), or -ENOENT when there is none.
 */
int rdmx_kv_server_port(const rdmx_kv_server *srv);

/**
 * rdmx_kv_server_run - serve until rdmx_kv_server_stop(). Every client is
 * served by this one thread with non-blocking sockets: a slow or hostile
 * client holds only its own connection. Returns 0 after a stop.
 */
int rdmx_kv_server_run(rdmx_kv_server *srv);

/**
 * rdmx_kv_server_stop - make rdmx_kv_server_run() return soon (bounded by
 * its poll interval). Async-signal-safe.
 */
void rdmx_kv_server_stop(rdmx_kv_server *srv);

/**
 * rdmx_kv_server_destroy - close every connection and free the server
 * (not while rdmx_kv_server_run() runs). NULL is allowed.
 */
void rdmx_kv_server_destroy(rdmx_kv_server *srv);

/** rdmx_kv_server_error - detail message of the server's last failure. */
const char *rdmx_kv_server_error(const rdmx_kv_server *srv);

#ifdef __cplusplus
}
#endif

#endif /* RDMX_KV_H */
