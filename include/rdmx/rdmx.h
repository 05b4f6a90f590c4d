/* SPDX-License-Identifier: MIT */
/*
 * rdmx: RDMA messaging with one interface over several connection protocols.
 *
 * Conventions (every function below):
 *  - returns 0 (or a non-negative count) on success and a negative errno on
 *    failure; rdmx_strerror() names the code;
 *  - a failing call records a readable detail message on the object it was
 *    called on (rdmx_ctx_error(), rdmx_listener_error(), rdmx_conn_error())
 *    and in the calling thread (rdmx_last_error());
 *  - no function aborts on bad input.
 *
 * Threading:
 *  - a context may be shared by threads;
 *  - a listener is used by one thread at a time (rdmx_accept and
 *    rdmx_listener_recv may not overlap on one listener);
 *  - a connection's calls (rdmx_msg_alloc, rdmx_send, rdmx_flush, rdmx_recv,
 *    rdmx_msg_release) may come from any threads: each runs under the
 *    connection's lock, so they never overlap and the ones that wait
 *    (a finite or infinite timeout) hold the connection meanwhile - two
 *    threads blocking on one connection wait for each other. What one
 *    thread allocated, another may send, once the handoff is synchronized
 *    by the application; buffers are sent in the order they were
 *    allocated on the ring protocols (write_*), so one thread allocating
 *    and sending per connection is the simple rule;
 *  - the server pattern is supported for every protocol: ONE thread calls
 *    rdmx_listener_recv while worker threads reply on the member
 *    connections (rdmx_msg_alloc/rdmx_send/rdmx_flush) and release the
 *    received messages, and close members (rdmx_conn_close), all
 *    concurrently. rdmx_listener_recv never blocks on a member a worker
 *    is using: it skips it and comes back. Do not call rdmx_recv on a
 *    member while another thread is in rdmx_listener_recv;
 *  - rdmx_conn_close(c) may run while the listener receives, but not
 *    concurrently with another call on @c, and the handles of @c's
 *    messages are void after it; rdmx_conn_error() and
 *    rdmx_listener_error() are for the thread whose call failed.
 */
#ifndef RDMX_RDMX_H
#define RDMX_RDMX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RDMX_VERSION_MAJOR 0
#define RDMX_VERSION_MINOR 1
#define RDMX_DEFAULT_PORT 7471

typedef struct rdmx_ctx rdmx_ctx;
typedef struct rdmx_listener rdmx_listener;
typedef struct rdmx_conn rdmx_conn;
struct rdmx_msg;

/* ---------------------------------------------------------------- errors */

/** rdmx_strerror - a static, readable name for a return code (0 or -errno). */
const char *rdmx_strerror(int rc);

/** rdmx_last_error - detail message of the calling thread's last failure. */
const char *rdmx_last_error(void);

/* ------------------------------------------------------- device discovery */

enum rdmx_gid_type {
	RDMX_GID_IB = 0,
	RDMX_GID_ROCE_V1 = 1,
	RDMX_GID_ROCE_V2 = 2,
};

struct rdmx_gid_info {
	int index;
	enum rdmx_gid_type type;
	char gid[40];      /* colon-separated hex, as in sysfs */
	char addr[48];     /* IPv4 or IPv6 text for RoCE GIDs, "" for IB */
	char netdev[32];   /* netdev the GID belongs to, "" if none */
};

struct rdmx_port_info {
	int port;          /* 1-based port number */
	int state;         /* enum ibv_port_state value */
	char state_name[16];
	int active_mtu;    /* bytes */
	int max_mtu;       /* bytes */
	char link_layer[16];
	int n_gids;
	struct rdmx_gid_info *gids;
	int picked_gid;    /* index into gids[] rdmx would use, -1 if none */
};

struct rdmx_device_info {
	char name[64];
	char node_guid[24];
	int n_ports;
	struct rdmx_port_info *ports;
};

/**
 * rdmx_devices_list - enumerate RDMA devices, their ports and GID tables.
 * @out: receives an array of @count entries, freed with rdmx_devices_free().
 * Returns 0 (also with *count == 0 when there is no device) or -errno.
 */
int rdmx_devices_list(struct rdmx_device_info **out, int *count);

/** rdmx_devices_free - free the array returned by rdmx_devices_list(). */
void rdmx_devices_free(struct rdmx_device_info *devs, int count);

/**
 * rdmx_pick_address - the IP address rdmx would use on a device.
 * @device: device name, or NULL for the first device with an ACTIVE port.
 * @gid_index: GID table index to use, or -1 to pick automatically (the
 *             RoCEv2 GID with an IPv4 address, else RoCEv2 IPv6, else RoCEv1).
 * @buf/@len: receives the address text.
 * Returns 0, -ENODEV (no such device or no active port) or -EADDRNOTAVAIL.
 */
int rdmx_pick_address(const char *device, int gid_index, char *buf, size_t len);

/**
 * rdmx_route - resolve @addr as rdmx_dial() would, and stop there: the
 * local RDMA device (name in @dev, @len bytes) and port (in *@port, if not
 * NULL) rdma_cm would connect from, each step bounded by @timeout_ms.
 * Returns 0, -EADDRNOTAVAIL (not an address), or the -errno of the step
 * that failed (address resolution, route), with the step in
 * rdmx_last_error().
 */
int rdmx_route(const char *addr, int timeout_ms, char *dev, size_t len, int *port);

/* ---------------------------------------------------------------- context */

struct rdmx_ctx_opts {
	const char *fabric; /* NULL or "verbs"; "fake" is the in-process test double */
};

/** rdmx_ctx_create - create a context (shared state for listeners and conns). */
int rdmx_ctx_create(rdmx_ctx **out, const struct rdmx_ctx_opts *opts);

/** rdmx_ctx_destroy - destroy a context; its listeners and conns must be gone. */
void rdmx_ctx_destroy(rdmx_ctx *ctx);

/** rdmx_ctx_error - detail message of the last failure on @ctx. */
const char *rdmx_ctx_error(const rdmx_ctx *ctx);

/* ------------------------------------------------------------ connections */

struct rdmx_conn_opts {
	const char *protocol;    /* protocol name, default "send_recv" */
	uint32_t max_msg_size;   /* largest message, default 65536 */
	uint32_t send_depth;     /* send buffers / sends in flight, default 64 */
	uint32_t recv_depth;     /* posted receive buffers, default 64; srq:
				  * shared by all connections of a listener */
	uint8_t rnr_retry;       /* 0..7 (7 = retry forever), default 7 */
	uint8_t retry_count;     /* transport retries 0..7, default 7 */
	int connect_timeout_ms;  /* address/route/connect bound, default 5000 */
	uint32_t ring_size;      /* ring protocols (write_*): bytes of each
				  * receive ring, a power of two, default 1 MiB */
	uint8_t notify;          /* ring protocols: enum rdmx_notify */
	uint32_t eager_max;      /* read: largest payload this side takes inside
				  * the descriptor SEND instead of by RDMA READ,
				  * 0..65535, default 1024; 0: every non-empty
				  * payload by READ */
	uint32_t liveness_ms;    /* a peer that stops answering (its host died,
				  * the link is cut) is declared dead within
				  * this bound: every call waiting on the
				  * connection returns -ECONNRESET, "peer
				  * stopped answering". 1000..3600000, default
				  * 10000. See "Liveness" in README.md. */
};

/* How a ring receiver notices a new message (ring protocols only). */
enum rdmx_notify {
	RDMX_NOTIFY_DEFAULT = 0, /* the protocol's own choice (see its file) */
	RDMX_NOTIFY_POLL = 1,    /* poll a completion marker in the ring */
	RDMX_NOTIFY_IMM = 2,     /* RDMA WRITE with immediate: a receive
				  * completion announces each message */
};

/** rdmx_conn_opts_init - fill @opts with the defaults listed above. */
void rdmx_conn_opts_init(struct rdmx_conn_opts *opts);

/** rdmx_protocol_names - NULL-terminated list of the protocols built in. */
const char *const *rdmx_protocol_names(void);

/**
 * rdmx_listen - listen for rdmx connections on @addr:@port.
 * @addr: local IP address (NULL or "" for any); @port: 0 for an ephemeral one.
 * @opts: what incoming connections must speak (NULL for defaults).
 */
int rdmx_listen(rdmx_ctx *ctx, const char *addr, uint16_t port,
		const struct rdmx_conn_opts *opts, rdmx_listener **out);

/*
 * Admission caps of a listener: one client must not exhaust a server. A
 * connect request over a cap is rejected, and the dialer's rdmx_dial()
 * fails with -ECONNREFUSED and a message naming the cap. Connections
 * count from their accept until rdmx_conn_close() (also after the
 * listener is destroyed); closing one gives its share back. The struct
 * may grow: fill it with rdmx_listener_opts_init(), which sets @size.
 */
struct rdmx_listener_opts {
	uint32_t size;       /* sizeof(struct rdmx_listener_opts) of the caller */
	uint32_t max_conns;  /* open accepted connections, default 256; 0: no cap */
	uint64_t max_mem;    /* bytes of memory the accepted connections register
			      * for themselves (buffers, rings: what their
			      * options and the negotiated max message need),
			      * default 1 GiB; 0: no cap */
};

/** rdmx_listener_opts_init - fill @opts with the defaults listed above. */
void rdmx_listener_opts_init(struct rdmx_listener_opts *opts);

/**
 * rdmx_listener_set_opts - set @lis's admission caps (NULL: the defaults).
 * Applies to requests handled from now on; connections already accepted
 * stay. Returns 0 or -EINVAL (@opts->size not set by
 * rdmx_listener_opts_init()).
 */
int rdmx_listener_set_opts(rdmx_listener *lis,
			   const struct rdmx_listener_opts *opts);

/** rdmx_listener_port - the port a listener is bound to. */
uint16_t rdmx_listener_port(const rdmx_listener *lis);

/**
 * rdmx_accept - wait up to @timeout_ms (-1: forever) for a connection.
 * Requests that do not speak rdmx, or that do not match the listener's
 * protocol, version or limits, or that would break its admission caps
 * (rdmx_listener_set_opts), are rejected with a reason the dialer sees;
 * the listener keeps serving. Establishment is asynchronous: accepted
 * requests whose dialer has not completed the handshake are kept (and
 * dropped after connect_timeout_ms) while further requests are taken, and
 * the first connection that is up is returned. Returns 0, -ETIMEDOUT,
 * -ESHUTDOWN (rdmx_listener_shutdown), or -errno.
 */
int rdmx_accept(rdmx_listener *lis, int timeout_ms, rdmx_conn **out);

/** rdmx_listener_rejected - number of connect requests rejected so far. */
unsigned rdmx_listener_rejected(const rdmx_listener *lis);

/**
 * rdmx_listener_recv - wait up to @timeout_ms (0: poll once, -1: forever)
 * for the next message on any connection accepted on @lis; the connection
 * is rdmx_msg_conn(@msg). For `srq` and `write_atomic` these connections
 * share one receive queue or ring and messages come in arrival order;
 * for the other protocols the listener polls its connections in turn.
 * When a connection's peer has gone and everything it sent was delivered,
 * returns -ECONNRESET once for it, with rdmx_msg_conn(@msg) naming it (close
 * it). Returns 0, -EAGAIN, -ETIMEDOUT, -ENOTCONN (no open connection),
 * -ESHUTDOWN (rdmx_listener_shutdown), or -errno. Release the message
 * with rdmx_msg_release(rdmx_msg_conn(@msg), ...).
 */
int rdmx_listener_recv(rdmx_listener *lis, struct rdmx_msg *msg,
		       int timeout_ms);

/**
 * rdmx_listener_shutdown - wake every thread blocked in rdmx_accept() or
 * rdmx_listener_recv() on @lis, and make later calls of those fail: they
 * return -ESHUTDOWN (within ~50 ms). Connections accepted on @lis stay
 * usable. Safe to call from any thread, more than once.
 */
void rdmx_listener_shutdown(rdmx_listener *lis);

/** rdmx_listener_destroy - stop listening and free the listener.
 * Shuts it down first (rdmx_listener_shutdown) and waits until no thread
 * is left in rdmx_accept() or rdmx_listener_recv() on it before freeing.
 * Connections accepted on it stay usable and are closed one by one. */
void rdmx_listener_destroy(rdmx_listener *lis);

/** rdmx_listener_error - detail message of the last failure on @lis. */
const char *rdmx_listener_error(const rdmx_listener *lis);

/**
 * rdmx_dial - connect to an rdmx listener at @addr:@port.
 * Fails with -ECONNREFUSED (nobody listening, or rejected: the detail
 * message carries the listener's reason), -EHOSTUNREACH, -ETIMEDOUT.
 */
int rdmx_dial(rdmx_ctx *ctx, const char *addr, uint16_t port,
	      const struct rdmx_conn_opts *opts, rdmx_conn **out);

/** rdmx_conn_close - disconnect (if connected) and free the connection. */
void rdmx_conn_close(rdmx_conn *conn);

/** rdmx_conn_error - detail message of the last failure on @conn. */
const char *rdmx_conn_error(const rdmx_conn *conn);

/** rdmx_conn_protocol - name of the protocol the connection speaks. */
const char *rdmx_conn_protocol(const rdmx_conn *conn);

/** rdmx_conn_max_msg - the negotiated largest message size in bytes. */
size_t rdmx_conn_max_msg(const rdmx_conn *conn);

/* --------------------------------------------------------------- messages */

#define RDMX_MSG_IMM 0x1u /* imm carries immediate data (send and receive) */

/*
 * A message handle. The sender gets one from rdmx_msg_alloc(), writes up to
 * @cap bytes at @data, sets @len (and @imm with RDMX_MSG_IMM) and passes it
 * to rdmx_send(). The receiver gets one from rdmx_recv(), reads @len bytes
 * at @data in place and hands it back with rdmx_msg_release().
 *
 * In place: with the write_* protocols @data points into a ring the peer
 * (on write_atomic, any member of the shared ring) can still RDMA-WRITE,
 * so the bytes may change until the release. @len and @imm are rdmx's
 * validated copies; for a stable view of the payload, copy it into
 * private memory first and validate and use only the copy.
 */
struct rdmx_msg {
	void *data;
	size_t len;
	size_t cap;
	uint32_t imm;
	uint32_t flags;
	uint64_t priv_[2]; /* owned by the library */
};

/**
 * rdmx_msg_alloc - get a send buffer of at least @size bytes in registered
 * memory. Waits up to @timeout_ms (0: do not wait, -1: forever) for a free
 * one. Returns 0, -EMSGSIZE (@size above the negotiated maximum), -EAGAIN
 * (@timeout_ms == 0 and none free), -ETIMEDOUT, or the connection's error.
 */
int rdmx_msg_alloc(rdmx_conn *conn, size_t size, struct rdmx_msg *msg,
		   int timeout_ms);

/**
 * rdmx_send - post @msg (from rdmx_msg_alloc) and return without waiting.
 * The buffer belongs to rdmx from here on. Returns 0, -EMSGSIZE (len > cap),
 * -EINVAL (not an allocated message), or the connection's error.
 */
int rdmx_send(rdmx_conn *conn, struct rdmx_msg *msg);

/**
 * rdmx_flush - wait up to @timeout_ms until every posted send completed.
 * Returns 0, -ETIMEDOUT, or the connection's error.
 */
int rdmx_flush(rdmx_conn *conn, int timeout_ms);

/**
 * rdmx_recv - wait up to @timeout_ms (0: poll once, -1: forever) for the next
 * message. Returns 0, -EAGAIN (@timeout_ms == 0, nothing there), -ETIMEDOUT,
 * -ECONNRESET (peer gone and every message before that delivered) or -errno.
 */
int rdmx_recv(rdmx_conn *conn, struct rdmx_msg *msg, int timeout_ms);

/**
 * rdmx_msg_conn - the connection a message handle belongs to (a buffer
 * from rdmx_msg_alloc, or a message from rdmx_recv/rdmx_listener_recv),
 * or NULL for a handle that is spent or was never filled.
 */
rdmx_conn *rdmx_msg_conn(const struct rdmx_msg *msg);

/* What rdmx_listener_next() returns. */
enum rdmx_event_type {
	RDMX_EVENT_CONN = 1,   /* a connection came up: @conn, now a member
				* whose messages arrive as RDMX_EVENT_MSG */
	RDMX_EVENT_MSG = 2,    /* a message on @conn, in @msg: release it with
				* rdmx_msg_release(@conn, &@msg) */
	RDMX_EVENT_CLOSED = 3, /* @conn's peer is gone and everything it sent
				* was delivered: close it (rdmx_conn_close) */
};

struct rdmx_event {
	enum rdmx_event_type type;
	rdmx_conn *conn;
	struct rdmx_msg msg;   /* RDMX_EVENT_MSG only */
};

/**
 * rdmx_listener_next - wait up to @timeout_ms (0: poll once, -1: forever)
 * for the next event on @lis: a new connection, a message on any member,
 * or a member whose peer is gone, in @ev. A server is one loop over it
 * (examples/echo_server.c). It does what rdmx_accept() and
 * rdmx_listener_recv() do, interleaved: a busy listener still takes new
 * connections (between every 64 events), and a new connection delays a
 * message by at most ~1 ms. The threading rules of rdmx_listener_recv()
 * apply; do not mix it with rdmx_accept()/rdmx_listener_recv() in
 * different threads on one listener. Returns 0, -ETIMEDOUT, -ESHUTDOWN
 * (rdmx_listener_shutdown), or -errno (rdmx_listener_error()).
 */
int rdmx_listener_next(rdmx_listener *lis, struct rdmx_event *ev, int timeout_ms);

/**
 * rdmx_msg_release - give back a received message, or an allocated send
 * buffer that will not be sent.
 */
int rdmx_msg_release(rdmx_conn *conn, struct rdmx_msg *msg);

#ifdef __cplusplus
}
#endif
#endif /* RDMX_RDMX_H */
