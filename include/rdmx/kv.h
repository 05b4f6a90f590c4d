/* SPDX-License-Identifier: MIT */
/*
 * rdmx KV: a key-value server over rdmx: one store, two doors.
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

/*
 * A server's sizes and doors. Fill it with rdmx_kv_server_opts_init(),
 * which sets @size and the defaults below; a field left 0 also takes its
 * default. The struct grows at its end: @size tells the library which
 * fields the caller's binary knows (as struct rdmx_ctx_opts in rdmx.h).
 *
 * The memcached front door (docs/memcached-door.md) survives what
 * memcached 1.6 survives: past @max_clients (memcached -c) or when the
 * process is out of descriptors (EMFILE, ENFILE), a newcomer is told
 * "ERROR Too many open connections" and closed (a spare descriptor is
 * kept for it), and accepting pauses with a back-off while no descriptor
 * is left, instead of spinning; a connection idle for @idle_timeout_ms is
 * closed (memcached -o idle_timeout); what a connection buffers (its
 * request, a data block, its replies) is capped per connection and for
 * all together (memcached -o read_buf_mem_limit), each refusal in
 * memcached's words ("SERVER_ERROR out of memory reading request",
 * "... writing get response", "... storing object").
 */
struct rdmx_kv_server_opts {
	uint32_t size;          /* sizeof(struct rdmx_kv_server_opts) of the caller,
				 * set by rdmx_kv_server_opts_init(); 0: a struct
				 * filled by hand as before the field existed
				 * (the fields up to @hello_ms) */
	uint64_t capacity;      /* entries at most (default 65536) */
	uint64_t memory;        /* bytes for values stored out of line (default 64 MiB) */
	uint32_t inline_max;    /* longest value kept in its entry, multiple of 8 (default 1024) */
	uint32_t item_max;      /* longest value (default 1 MiB - 512, as memcached's) */
	const char *memcached_addr; /* front door address (default "127.0.0.1",
				     * as Debian's memcached.conf: "0.0.0.0" opens
				     * it to every network) */
	int memcached_port;     /* front door TCP port: -1 none, 0 any free port
				 * (rdmx_kv_server_opts_init: 11211) */
	int max_clients;        /* front door connections at once (default 1024) */
	/* The RDMA door (both fields from here on may be left 0 by callers
	 * of the first version of this struct: it is then off). */
	rdmx_ctx *ctx;          /* the context of the RDMA door; NULL: no door */
	const char *rdma_addr;  /* RDMA door address (NULL: any) */
	int rdma_port;          /* RPC port of the door, 0 any free port
				 * (rdmx_kv_server_opts_init: RDMX_DEFAULT_PORT) */
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
	/* RDMA door: an RPC connection that sends no valid hello, and a read
	 * door connection that holds a grant while no RPC client of its host
	 * is connected, are closed after this many ms (0: 5000;
	 * docs/servers.md). */
	int hello_ms;
	/* Since @size (the front door's bounds): */
	int idle_timeout_ms;    /* close a front door connection that sent and
				 * took nothing for this long (memcached -o
				 * idle_timeout, in seconds there); 0: never (default) */
	uint64_t conn_buffer_max; /* bytes one front door connection may buffer:
				   * request, data block, replies (default
				   * 2 * item_max + 2 MiB: the longest get line,
				   * a block and a reply of the largest item;
				   * at least 64 KiB) */
	uint64_t buffer_max;    /* bytes all front door connections may buffer
				 * together (default 256 MiB, at least
				 * @conn_buffer_max) */
	int reqs_per_event;     /* commands a front door connection runs before
				 * the others have their turn (memcached -R,
				 * default 20) */
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

/** rdmx_kv_server_opts_init - fill @opts with the defaults listed above. */
void rdmx_kv_server_opts_init(struct rdmx_kv_server_opts *opts);

/**
 * rdmx_kv_server_create - a server with an empty store and, when
 * @opts->memcached_port >= 0, its memcached front door listening
 * (@opts NULL: the defaults of rdmx_kv_server_opts_init()). -EINVAL for
 * a NULL @out, bad sizes or an @opts->size this library does not know,
 * -ENOMEM, or the socket's -errno (port in use...).
 */
int rdmx_kv_server_create(const struct rdmx_kv_server_opts *opts,
			  rdmx_kv_server **out);

/**
 * rdmx_kv_server_port - the front door's TCP port (the one the system
 * chose when 0 was asked), -ENOENT when there is none, -EINVAL (NULL).
 */
int rdmx_kv_server_port(const rdmx_kv_server *srv);

/**
 * rdmx_kv_server_rdma_port - the RDMA door's RPC port, -ENOENT when
 * there is none, -EINVAL (NULL).
 */
int rdmx_kv_server_rdma_port(const rdmx_kv_server *srv);

/**
 * rdmx_kv_server_run - serve until rdmx_kv_server_stop(). Every client is
 * served by this one thread with non-blocking sockets: a slow or hostile
 * client holds only its own connection. Returns 0 after a stop, -EINVAL
 * (NULL).
 */
int rdmx_kv_server_run(rdmx_kv_server *srv);

/**
 * rdmx_kv_server_stop - make rdmx_kv_server_run() return soon (bounded by
 * its poll interval). Async-signal-safe; NULL is ignored.
 */
void rdmx_kv_server_stop(rdmx_kv_server *srv);

/**
 * rdmx_kv_server_destroy - close every connection and free the server
 * (not while rdmx_kv_server_run() runs). NULL is allowed.
 */
void rdmx_kv_server_destroy(rdmx_kv_server *srv);

/**
 * rdmx_kv_server_error - detail message of the server's last failure
 * ("no server" for NULL).
 */
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

/*
 * Client options: fill with rdmx_kv_client_opts_init() (sets @size); a
 * field left 0 takes its default.
 */
struct rdmx_kv_client_opts {
	uint32_t size;         /* sizeof(struct rdmx_kv_client_opts) of the caller,
				* set by rdmx_kv_client_opts_init(); 0: a struct
				* filled by hand as before the field existed */
	enum rdmx_kv_get_mode get_mode;
	const char *transport; /* RPC transport, as the server's */
	const char *protocol;  /* rdmx protocol under it, as the server's */
	int timeout_ms;        /* bound of connecting and of every call (default 5000) */
};

/** rdmx_kv_client_opts_init - fill @opts with the defaults listed above. */
void rdmx_kv_client_opts_init(struct rdmx_kv_client_opts *opts);

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
 * with the table and slab regions imported (@opts NULL: the defaults).
 * Returns 0, -EINVAL (@ctx, @addr or @out NULL, or an @opts->size this
 * library does not know), -EPROTO (a server of another format or
 * contract), -ETIMEDOUT, or the dial's error; rdmx_last_error() says
 * which.
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

/** rdmx_kv_client_error - detail message of @cl's last failure ("no client": NULL). */
const char *rdmx_kv_client_error(const rdmx_kv_client *cl);

/**
 * rdmx_kv_get - the value of @key (@klen bytes) into @buf (@cap bytes),
 * its length to *@len, its client flags to *@flags and its cas to *@cas
 * (each may be NULL). Returns 0, -ENOENT (absent), -EMSGSIZE (longer than
 * @cap: *@len says how long), -EINVAL (@cl or @key NULL, @buf NULL with
 * a @cap, the key's length), -EIO (the table is damaged), or the
 * connection's error (-ECONNRESET: the server is gone).
 */
int rdmx_kv_get(rdmx_kv_client *cl, const void *key, size_t klen, void *buf,
		size_t cap, size_t *len, uint32_t *flags, uint64_t *cas);

/**
 * rdmx_kv_put - store @vlen bytes at @val under @key with client @flags,
 * as @mode says; the new cas to *@cas (may be NULL). Returns 0, -EEXIST
 * (add: present), -ENOENT (replace: absent), -E2BIG (above the server's
 * item size or RDMX_KV_RPC_VALUE_MAX), -ENOSPC (the table or slab is
 * full), -EINVAL (@cl or @key NULL, @val NULL with a @vlen, a bad
 * @mode or size), or the connection's error.
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

/**
 * rdmx_kv_del - delete @key: 0, -ENOENT, -EINVAL (@cl or @key NULL, the
 * key's length), or the connection's error.
 */
int rdmx_kv_del(rdmx_kv_client *cl, const void *key, size_t klen);

/**
 * rdmx_kv_client_stats - fill @st with @cl's counters: 0, or -EINVAL
 * (either NULL).
 */
int rdmx_kv_client_stats(const rdmx_kv_client *cl,
			 struct rdmx_kv_client_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* RDMX_KV_H */
