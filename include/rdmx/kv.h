/* SPDX-License-Identifier: MIT */
/*
 * rdmx KV: a key-value server over rdmx (issue 12): one store, two doors.
 * The memcached ASCII front door over TCP, and the RDMA door: rdmx RPC
 * methods (get, put with set/add/replace, delete, cas, layout) and the
 * table and slab regions registered and exported, so that a client GETs
 * by one-sided RDMA READ of the self-verifying entries (rdmx_kv_get with
 * RDMX_KV_GET_READ), falling back to the RPC when a read stays torn.
 *
 * Conventions as in rdmx.h: 0 or a negative errno, a readable message in
 * rdmx_kv_server_error() (and rdmx_last_error()) on failure, opaque
 * handles. One thread runs rdmx_kv_server_run(); rdmx_kv_server_stop() may
 * be called from any thread or a signal handler.
 */
#ifndef RDMX_KV_H
#define RDMX_KV_H

#include <stddef.h>
#include <stdint.h>

#include <rdmx/rdmx.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rdmx_kv_server rdmx_kv_server;

/* What a store with no room does (rdmx_kv_server_opts.evict). */
enum rdmx_kv_evict {
	RDMX_KV_EVICT_NONE = 0, /* refuse: -ENOSPC, memcached's SERVER_ERROR out of memory */
	RDMX_KV_EVICT_LRU = 1,  /* evict the least recently used entry in the way */
};

/* A server's sizes and front door. Zero fields take the defaults. */
struct rdmx_kv_server_opts {
	uint64_t capacity;      /* entries at most (default 65536) */
	uint64_t memory;        /* bytes for values stored out of line (default 64 MiB) */
	uint32_t inline_max;    /* longest value kept in its entry, multiple of 8 (default 1024) */
	uint32_t item_max;      /* longest value (default 1 MiB - 512, as memcached's) */
	const char *memcached_addr; /* front door address (default "0.0.0.0") */
	int memcached_port;     /* front door TCP port: -1 none, 0 any free port */
	int max_clients;        /* front door connections at once (default 1024) */
	/* The RDMA door (both fields from here on may be left 0 by callers
	 * of the first version of this struct: it is then off). */
	rdmx_ctx *ctx;          /* the context of the RDMA door; NULL: no door */
	const char *rdma_addr;  /* RDMA door address (NULL: any) */
	int rdma_port;          /* RPC port of the door, 0 any free port */
	const char *transport;  /* RPC transport (NULL: rdmx RPC's default) */
	const char *protocol;   /* rdmx protocol under it (NULL: its default) */
	/*
	 * A full table (--capacity keys, or no free slot near the key's
	 * bucket) or slab: RDMX_KV_EVICT_NONE refuses the store (0, the
	 * default), RDMX_KV_EVICT_LRU evicts the least recently used live
	 * entry in the way (sampled LRU over per-entry access ticks; a GET by
	 * one-sided READ does not count as an access: the server never sees
	 * it). Evictions are counted ("evictions" in the front door's stats).
	 */
	int evict;
	/*
	 * Admission caps of the RDMA door's listeners, NULL: the defaults
	 * (rdmx_listener_opts_init: max_conns, max_conns_per_peer, max_mem).
	 * The RPC door's and the read door's are apart: a client takes one
	 * connection of each, and an auto-mode client the read door refuses
	 * (full) makes its GETs by RPC. Benchmarks lift max_conns_per_peer.
	 */
	const struct rdmx_listener_opts *rpc_caps, *read_caps;
	/* Front door connections from one peer address (default a quarter
	 * of max_clients; -1: no cap): a newcomer beyond is refused with a
	 * line naming the cap. */
	int max_clients_per_peer;
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
 * rdmx_kv_server_rdma_port - the RDMA door's RPC port, or -ENOENT when
 * there is none.
 */
int rdmx_kv_server_rdma_port(const rdmx_kv_server *srv);

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

/* ----------------------------------------------------------------- client */

typedef struct rdmx_kv_client rdmx_kv_client;

/* How rdmx_kv_get() reaches the value. */
enum rdmx_kv_get_mode {
	RDMX_KV_GET_AUTO = 0, /* READ, and the RPC for what READ cannot do */
	RDMX_KV_GET_RPC = 1,  /* always the get method */
	RDMX_KV_GET_READ = 2, /* READ; the RPC only after bounded torn retries */
};

/* How rdmx_kv_put() treats a present or absent key. */
enum rdmx_kv_put_mode {
	RDMX_KV_SET = 0,     /* store it */
	RDMX_KV_ADD = 1,     /* only if absent (-EEXIST otherwise) */
	RDMX_KV_REPLACE = 2, /* only if present (-ENOENT otherwise) */
};

#define RDMX_KV_KEY_MAX 250        /* bytes of a key */
#define RDMX_KV_RPC_VALUE_MAX 65536 /* largest value a put (or get by RPC) carries */

/* Client options. Zero fields take the defaults. */
struct rdmx_kv_client_opts {
	enum rdmx_kv_get_mode get_mode;
	const char *transport; /* RPC transport, as the server's */
	const char *protocol;  /* rdmx protocol under it, as the server's */
	int timeout_ms;        /* bound of connecting and of every call (default 5000) */
};

/* A client's counters since its creation. */
struct rdmx_kv_client_stats {
	uint64_t gets_read;  /* gets answered by READ */
	uint64_t gets_rpc;   /* gets answered by the get method */
	uint64_t reads;      /* RDMA READs posted */
	uint64_t retries;    /* torn copies read again */
	uint64_t fallbacks;  /* gets that fell back to the RPC after retries */
	uint64_t reconnects; /* times the client connected again after a loss */
};

/**
 * rdmx_kv_client_create - connect to the KV server's RDMA door at
 * @addr:@port in @ctx: the RPC client, then (modes other than RPC) the
 * layout, checked (format version, sizes, hash), and the read connection
 * with the table and slab regions imported. Returns 0, -EPROTO (a server
 * of another format or contract), -ETIMEDOUT, or the dial's error;
 * rdmx_last_error() says which.
 *
 * A lost server: a call whose connection fails or times out returns that
 * error (-ECONNRESET when the server went away, -ETIMEDOUT), with a
 * message naming the server, and closes the client's connections. The
 * next call connects again first, as memcached clients (libmemcached,
 * pymemcache) do on their next command, and learns the layout and the
 * regions anew (a restarted server's table has new keys and maybe new
 * sizes): it returns the dial's error (-ECONNREFUSED, -ETIMEDOUT...) while
 * the server is still away, and each later call tries again. A put or del
 * that failed that way may or may not have been done.
 */
int rdmx_kv_client_create(rdmx_ctx *ctx, const char *addr, uint16_t port,
			  const struct rdmx_kv_client_opts *opts,
			  rdmx_kv_client **out);

/** rdmx_kv_client_destroy - disconnect and free @cl (NULL is allowed). */
void rdmx_kv_client_destroy(rdmx_kv_client *cl);

/** rdmx_kv_client_error - detail message of @cl's last failure. */
const char *rdmx_kv_client_error(const rdmx_kv_client *cl);

/**
 * rdmx_kv_get - the value of @key (@klen bytes) into @buf (@cap bytes),
 * its length to *@len, its client flags to *@flags and its cas to *@cas
 * (each may be NULL). Returns 0, -ENOENT (absent), -EMSGSIZE (longer than
 * @cap: *@len says how long), -EINVAL (key), -EIO (the table is damaged),
 * or the connection's error (-ECONNRESET: the server is gone).
 */
int rdmx_kv_get(rdmx_kv_client *cl, const void *key, size_t klen, void *buf,
		size_t cap, size_t *len, uint32_t *flags, uint64_t *cas);

/**
 * rdmx_kv_put - store @vlen bytes at @val under @key with client @flags,
 * as @mode says; the new cas to *@cas (may be NULL). Returns 0, -EEXIST
 * (add: present), -ENOENT (replace: absent), -E2BIG (above the server's
 * item size or RDMX_KV_RPC_VALUE_MAX), -ENOSPC (the table or slab is
 * full), -EINVAL, or the connection's error.
 */
int rdmx_kv_put(rdmx_kv_client *cl, const void *key, size_t klen,
		const void *val, size_t vlen, uint32_t flags,
		enum rdmx_kv_put_mode mode, uint64_t *cas);

/**
 * rdmx_kv_put_exp - rdmx_kv_put() with an expiry, memcached's exptime: 0
 * never, up to 30 days (2592000) seconds from now, above that a Unix
 * time, negative expired at once. An expired key is a miss on both doors
 * (a GET by READ compares the expiry with this host's CLOCK_REALTIME: the
 * clocks of client and server are assumed in step).
 */
int rdmx_kv_put_exp(rdmx_kv_client *cl, const void *key, size_t klen,
		    const void *val, size_t vlen, uint32_t flags,
		    enum rdmx_kv_put_mode mode, int32_t exptime, uint64_t *cas);

/**
 * rdmx_kv_cas - store as rdmx_kv_put() but only if @key's cas is still
 * @cas (from a get): 0 (new cas to *@new_cas), -EEXIST (changed since),
 * -ENOENT (absent), or as rdmx_kv_put().
 */
int rdmx_kv_cas(rdmx_kv_client *cl, const void *key, size_t klen,
		const void *val, size_t vlen, uint32_t flags, uint64_t cas,
		uint64_t *new_cas);

/** rdmx_kv_del - delete @key: 0, -ENOENT, or the connection's error. */
int rdmx_kv_del(rdmx_kv_client *cl, const void *key, size_t klen);

/** rdmx_kv_client_stats - fill @st with @cl's counters. */
void rdmx_kv_client_stats(const rdmx_kv_client *cl,
			  struct rdmx_kv_client_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* RDMX_KV_H */
