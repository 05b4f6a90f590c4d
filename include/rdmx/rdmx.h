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
 *  - a connection's calls (rdmx_msg_alloc, rdmx_send, rdmx_send_tok,
 *    rdmx_flush, rdmx_recv, rdmx_msg_release, rdmx_wait) may come from
 *    any threads: each runs under the
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

#include <errno.h>  /* the codes rdmx returns, negated: -ETIMEDOUT ... */
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h> /* struct iovec: rdmx_sendv() */

#ifdef __cplusplus
extern "C" {
#endif

#define RDMX_VERSION_MAJOR 0
#define RDMX_VERSION_MINOR 1
#define RDMX_VERSION ((uint32_t)RDMX_VERSION_MAJOR << 16 | RDMX_VERSION_MINOR)
#define RDMX_DEFAULT_PORT 7471

typedef struct rdmx_ctx rdmx_ctx;
typedef struct rdmx_listener rdmx_listener;
typedef struct rdmx_conn rdmx_conn;
struct rdmx_msg;

/* ---------------------------------------------------------------- errors */

/**
 * rdmx_strerror - a static, readable description of a return code: "timed
 * out" for -ETIMEDOUT. 0 is "success"; a positive value is "not an error
 * code"; a code outside rdmx's table gets the C library's strerror().
 */
const char *rdmx_strerror(int rc);

/**
 * rdmx_err_name - the static name of a return code's errno: "ETIMEDOUT" for
 * -ETIMEDOUT, "OK" for 0, "EUNKNOWN" for a positive value or a code outside
 * rdmx's table (which holds every code rdmx returns itself and the system
 * errors it passes on). Comes from the same table as rdmx_strerror().
 */
const char *rdmx_err_name(int rc);

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

/* How a server keeps memory it exports to one client to that client. */
enum rdmx_isolation {
	RDMX_ISOLATION_WINDOWS = 1, /* type 2 memory windows: the key the
				     * client gets works only over its own
				     * queue pair, and not after it closed */
	RDMX_ISOLATION_RIGHTS = 2,  /* no windows: the key carries exactly the
				     * rights the client needs, but works on
				     * every queue pair of the server's
				     * protection domain */
};

/**
 * rdmx_device_isolation - the isolation an rdmx server on the RDMA device
 * @name gives memory it exports to one client (rpc herd's and rfp's slots;
 * see docs/isolation.md): RDMX_ISOLATION_WINDOWS when the device has type
 * 2 memory windows, else RDMX_ISOLATION_RIGHTS.
 * Returns the enum rdmx_isolation value (> 0), -ENODEV when no device has
 * that name, -EINVAL for a NULL @name, or -errno.
 */
int rdmx_device_isolation(const char *name);

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

/*
 * Option structs grow at their end; @size (set by the *_opts_init()
 * functions to sizeof the caller's struct) tells the library which
 * fields the caller's binary knows, so a binary built against an older
 * header keeps working: the fields it does not know take their defaults.
 * A @size larger than the library's struct is refused (-EINVAL).
 */
struct rdmx_ctx_opts {
	uint32_t size;      /* sizeof(struct rdmx_ctx_opts) of the caller;
			     * 0 (a struct filled by hand, as before
			     * rdmx_ctx_opts_init existed): @fabric only */
	const char *fabric; /* NULL or "verbs"; "fake" is the in-process test double */
	uint8_t wait_mode;  /* enum rdmx_wait_mode of connections that leave
			     * theirs at RDMX_WAIT_DEFAULT; default adaptive */
	uint32_t spin_us;   /* adaptive: microseconds to spin before
			     * sleeping, 0..1000000; 0: 50 */
};

/*
 * How a call that has to wait (rdmx_recv, rdmx_msg_alloc, rdmx_flush,
 * rdmx_listener_recv, rdmx_accept, ... with a non-zero timeout) waits:
 *  - SPIN busy-polls (lowest latency; burns a core while it waits, and
 *    yields it now and then to other runnable threads);
 *  - BLOCK sleeps in the kernel from the first empty poll (an idle wait
 *    costs almost no CPU; a message costs a wake-up of the thread);
 *  - ADAPTIVE spins for spin_us microseconds (longer where sleeps wake
 *    late: twice the measured lateness, as on a VM), then sleeps as BLOCK
 *    does: the latency of SPIN for a message that comes soon, the CPU of
 *    BLOCK for one that does not.
 * The sleeping is done by the library's one wait step (src/core/wait.c):
 * a wait sleeps on the verbs completion channel of the connection's CQs
 * and its rdma_cm channel - the fd rdmx_conn_fd() hands out - woken by a
 * completion or a disconnect; a 100 ms backstop runs the liveness checks
 * of an idle wait. send_recv, srq and read receive completions, and so do
 * the ring protocols with notify IMM. With notify POLL, OFF or REV (any
 * ack) the receiver polls ring memory that the sender's RDMA WRITE fills
 * without a completion: it naps in timed steps for its first ~0.25 ms
 * (16 us doubling: a reply that comes soon costs no doorbell), then
 * publishes its sleep to the sender (an 8-byte WRITE, once per sleep,
 * and a last look at the ring once that WRITE completed) and sleeps on
 * the fd; the sender adds a doorbell (a 0-byte SEND)
 * after its next record, or when a record it wrote completes
 * (src/protocols/write_ring.c); the sender pays one read of a word per
 * record. direct_write does the same both ways (a receiver polls its
 * buffers' footers, a sender out of descriptors its descriptor ring),
 * and buffered_read's receiver, whose sender posts nothing: the sender
 * reads one word per send and posts the doorbell only to a receiver that
 * published a sleep. write_atomic receivers take a completion per
 * message. Senders that wait for room they learn of by an RDMA READ (a
 * ring with ack READ, write_atomic, buffered_read, also its rdmx_flush)
 * sleep in timed steps instead, doubling from 16 us to 4 ms and READing
 * again (room is seen up to ~4 ms late).
 * rdmx_listener_next and rdmx_listener_recv sleep on one epoll set of
 * every member's wait set (and, for rdmx_listener_next, the listener's
 * rdma_cm channel): as a connection's wait does, unless a member sleeps
 * in timed steps, which makes the listener's sleep one too.
 */
enum rdmx_wait_mode {
	RDMX_WAIT_DEFAULT = 0,  /* the context's mode (rdmx_ctx_opts) */
	RDMX_WAIT_SPIN = 1,
	RDMX_WAIT_BLOCK = 2,
	RDMX_WAIT_ADAPTIVE = 3, /* the context's default */
};

/** rdmx_ctx_opts_init - fill @opts with the defaults and set its size. */
void rdmx_ctx_opts_init(struct rdmx_ctx_opts *opts);

/** rdmx_ctx_create - create a context (shared state for listeners and conns). */
int rdmx_ctx_create(rdmx_ctx **out, const struct rdmx_ctx_opts *opts);

/** rdmx_ctx_destroy - destroy a context; its listeners and conns must be gone. */
void rdmx_ctx_destroy(rdmx_ctx *ctx);

/** rdmx_ctx_error - detail message of the last failure on @ctx. */
const char *rdmx_ctx_error(const rdmx_ctx *ctx);

/* ------------------------------------------------------------ connections */

struct rdmx_conn_opts {
	uint32_t size;           /* sizeof(struct rdmx_conn_opts) of the caller,
				  * set by rdmx_conn_opts_init(); required */
	const char *protocol;    /* protocol name, default "send_recv" */
	uint32_t max_msg_size;   /* largest message, default 65536 */
	uint32_t send_depth;     /* send buffers / sends in flight, default 64 */
	uint32_t recv_depth;     /* posted receive buffers, default 64; srq:
				  * shared by all connections of a listener,
				  * each granted an equal share as credits
				  * (a sender waits for one in
				  * rdmx_msg_alloc) */
	uint8_t rnr_retry;       /* 0..7 (7 = retry forever), default 7 */
	uint8_t retry_count;     /* transport retries 0..7, default 7; 7 is
				  * used as 6 (rxe retries forever on 7,
				  * which would hide a dead peer) */
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
				  * 10000. See "Liveness" in docs/library.md.
				  * write_atomic: also how long a reservation
				  * in the ring may stay unwritten before the
				  * receiver skips it, and how long rdmx_send
				  * waits for ring space (-ETIMEDOUT). */
	const char *src_addr;    /* rdmx_dial: local IP address to dial from
				  * (it picks the device and port: see
				  * rdmx_pick_address() for a device's), NULL
				  * or "": the route's choice */
	uint8_t wait_mode;       /* enum rdmx_wait_mode, default
				  * RDMX_WAIT_DEFAULT (the context's) */
	uint32_t spin_us;        /* adaptive: microseconds to spin before
				  * sleeping, 0..1000000; 0: the context's */
	/* small-message rate (bursts: RDMX_SEND_MORE) */
	uint32_t signal_every;   /* selective signaling: one signaled send
				  * completion per this many sends, 1 or up
				  * to send_depth / 2 (a send queue must hold
				  * two unsignaled batches); 1: every send
				  * signaled; 0: the protocol's default */
	uint8_t coalesce;        /* enum rdmx_coalesce */
	/* -- write ring variants (docs/protocols.md, "The ring variants") -- */
	uint8_t ack;             /* ring protocols (write_simplex/magic/
				  * duplex): how the receiver's head returns
				  * to the sender, enum rdmx_ack; both sides
				  * must agree */
};

/*
 * Coalescing: whether a burst of sends (RDMX_SEND_MORE) may carry several
 * messages in one work request (records back to back in one RDMA WRITE
 * for the ring protocols; small messages packed into one SEND that the
 * receiver splits for send_recv and srq). The receiver still gets one
 * message per rdmx_recv(). Nothing waits for more messages to come: only
 * what the sender marked RDMX_SEND_MORE is held, so latency at low load
 * does not change.
 */
enum rdmx_coalesce {
	RDMX_COALESCE_DEFAULT = 0, /* the protocol's choice: on where it pays */
	RDMX_COALESCE_OFF = 1,     /* one work request per message */
	RDMX_COALESCE_ON = 2,
};

/*
 * How a ring receiver notices a new message (write_simplex, write_magic,
 * write_duplex; both sides must agree, a mismatch is refused at connect).
 * Impossible combinations are refused by rdmx_listen/rdmx_dial (-EINVAL
 * with the reason): IMM with ack READ (IMM needs posted receives, READ is
 * for a receiver that posts nothing), REV on write_magic (REV lays records
 * downward from the ring's top and skips at its bottom; the double mapping
 * is for records that cross the end upward), OFF and REV without inline
 * WRITEs on the device.
 */
enum rdmx_notify {
	RDMX_NOTIFY_DEFAULT = 0, /* the protocol's own choice: POLL */
	RDMX_NOTIFY_POLL = 1,    /* the receiver polls the record at its head
				  * (a stamp at each end): one WRITE per
				  * message, no receiver verbs; the cheapest,
				  * relies on in-order placement */
	RDMX_NOTIFY_IMM = 2,     /* RDMA WRITE with immediate: a receive
				  * completion announces each message; costs
				  * the receiver a receive WQE and a CQE per
				  * message, needs no placement order, and
				  * gives rdmx_conn_fd a completion to wake */
	RDMX_NOTIFY_OFF = 3,     /* the data WRITE unsignaled, chained with
				  * an 8-byte inline WRITE of the new tail
				  * offset into the receiver's tail word: the
				  * receiver polls one word; two WQEs per
				  * message, good for bursts (one word covers
				  * every record before it) */
	RDMX_NOTIFY_REV = 4,     /* the ring grows downward and a record ends
				  * in its length and a valid byte, after a
				  * 1-byte inline WRITE that pre-clears the
				  * next record's valid byte: the receiver
				  * polls one byte and never zeroes memory;
				  * write_simplex and write_duplex only */
};

/*
 * How a ring receiver returns its head (records released) to the sender
 * (ring protocols; both sides must agree).
 */
enum rdmx_ack {
	RDMX_ACK_DEFAULT = 0, /* the protocol's: SEND for write_simplex and
			       * write_magic, READ for write_duplex */
	RDMX_ACK_SEND = 1,    /* the receiver SENDs its count, batched (a
			       * quarter ring) or when asked; the receiver
			       * keeps 16 receives posted, which also carry
			       * the doorbell that wakes a blocked receiver */
	RDMX_ACK_READ = 2,    /* the sender RDMA-READs the receiver's count
			       * when short of room: the receiver posts no
			       * verb per message (16 receives stay posted
			       * for the doorbell that wakes it when
			       * blocked), the sender pays a READ round
			       * trip when its cached room runs out (and
			       * waits for room in timed steps) */
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
			      * options and the negotiated max message need;
			      * and what the layers above pin for each: rpc
			      * rfp and herd slots), default 1 GiB; 0: no cap */
	uint32_t max_conns_per_peer; /* open accepted connections from one
				      * peer address, default 64 (a quarter
				      * of the default max_conns); 0: no cap.
				      * Benchmark servers lift it: a lab's
				      * clients often share one host */
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
 * rdmx_accept - wait up to @timeout_ms (0: poll once, -1: forever) for a
 * connection.
 * Requests that do not speak rdmx, or that do not match the listener's
 * protocol, version or limits, or that would break its admission caps
 * (rdmx_listener_set_opts), are rejected with a reason the dialer sees;
 * the listener keeps serving. Establishment is asynchronous: accepted
 * requests whose dialer has not completed the handshake are kept (and
 * dropped after connect_timeout_ms) while further requests are taken, and
 * the first connection that is up is returned. Returns 0, -ETIMEDOUT,
 * -EAGAIN (timeout 0 and no connection up: no error message is recorded),
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

/**
 * rdmx_conn_close - disconnect (if connected) and free the connection.
 * It does not drain: sends in flight are not waited for, and a message
 * whose send had not completed (see rdmx_send_tok()) may or may not reach
 * the peer. To deliver everything, wait for the last send's token (or
 * rdmx_flush()) first, then close: a completed send is in the peer's
 * memory and the peer receives it after this side is gone. Buffers from
 * rdmx_msg_alloc() not sent yet, and tokens of @conn, are void after it.
 */
void rdmx_conn_close(rdmx_conn *conn);

/** rdmx_conn_error - detail message of the last failure on @conn. */
const char *rdmx_conn_error(const rdmx_conn *conn);

/** rdmx_conn_protocol - name of the protocol the connection speaks. */
const char *rdmx_conn_protocol(const rdmx_conn *conn);

/** rdmx_conn_max_msg - the negotiated largest message size in bytes. */
size_t rdmx_conn_max_msg(const rdmx_conn *conn);

/**
 * rdmx_conn_local_addr - this end's address of @conn as "ip:port" text
 * ("[ip6]:port" for IPv6) in @buf (@len bytes). Returns 0, -EINVAL, or
 * -ENOSPC (@buf too small; 64 bytes always do).
 */
int rdmx_conn_local_addr(const rdmx_conn *conn, char *buf, size_t len);
/** rdmx_conn_peer_addr - the peer's address of @conn, as
 * rdmx_conn_local_addr() writes this end's. */
int rdmx_conn_peer_addr(const rdmx_conn *conn, char *buf, size_t len);

/** rdmx_conn_set_user - attach an application pointer to @conn. */
void rdmx_conn_set_user(rdmx_conn *conn, void *user);

/** rdmx_conn_get_user - the pointer of rdmx_conn_set_user() (NULL unset). */
void *rdmx_conn_get_user(const rdmx_conn *conn);

/*
 * Per-connection counters, counted by this end since the connection was
 * made. The struct may grow: set @size to sizeof(struct rdmx_conn_stats)
 * before calling; the library fills what both sides know.
 */
struct rdmx_conn_stats {
	uint32_t size;
	uint64_t msgs_sent;      /* rdmx_send() calls that succeeded */
	uint64_t bytes_sent;     /* their payload bytes */
	uint64_t msgs_recv;      /* messages delivered (rdmx_recv and
				  * rdmx_listener_recv) */
	uint64_t bytes_recv;
	uint64_t onesided_ops;   /* one-sided operations posted */
	uint64_t onesided_bytes; /* their bytes (8 per atomic) */
	uint64_t retry_exceeded; /* work requests that failed after the
				  * transport's retries (the peer did not
				  * answer): 0 or 1, the connection goes down.
				  * Retries that succeeded are not visible to
				  * a verbs consumer. */
	uint64_t rnr_exceeded;   /* likewise, receiver-not-ready retries */
};

/** rdmx_conn_stats - fill @st (its @size set) with @conn's counters.
 * Returns 0 or -EINVAL (NULL, or @size below the first counter's end). */
int rdmx_conn_stats(const rdmx_conn *conn, struct rdmx_conn_stats *st);

/** rdmx_version - the library's version, RDMX_VERSION_MAJOR << 16 |
 * RDMX_VERSION_MINOR of the headers it was built with (compare with
 * RDMX_VERSION of yours). */
uint32_t rdmx_version(void);

/* --------------------------------------------------------------- messages */

#define RDMX_MSG_IMM 0x1u /* imm carries immediate data (send and receive) */

/*
 * A message handle. The sender gets one from rdmx_msg_alloc(), writes up to
 * @cap bytes at @data, sets @len (and @imm with RDMX_MSG_IMM) and passes it
 * to rdmx_send(). The receiver gets one from rdmx_recv(), reads @len bytes
 * at @data in place and hands it back with rdmx_msg_release().
 *
 * In place, peer-writable: with the write_* protocols (write_simplex,
 * write_magic, write_duplex, write_atomic) @data points into a ring the
 * peer (on write_atomic, any member of the shared ring) can still
 * RDMA-WRITE, and with direct_write into a receive buffer registered for
 * the peer's remote WRITE, so the bytes may change until the release.
 * (send_recv, srq, read and buffered_read hand out memory the peer
 * cannot write.) @len and @imm are rdmx's validated copies; for a stable
 * view of the payload, copy it into private memory first and validate
 * and use only the copy. The rfp RPC transport does the same with its
 * requests (rdmx_rpc_req_data() in rpc.h).
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
 * On success the buffer belongs to rdmx (the handle is spent). Returns 0,
 * -EMSGSIZE (len > cap), -EINVAL (not an allocated message), or the
 * connection's error (write_atomic also -ETIMEDOUT: no ring space at the
 * peer within liveness_ms).
 *
 * A failed send leaves the buffer the caller's, on every protocol: the
 * handle stays valid, nothing of it was posted, and the caller either
 * sends it again (e.g. with a smaller len after -EMSGSIZE) or gives it
 * back with rdmx_msg_release() - which also works on a connection that
 * is down. rdmx_conn_close() frees it as well.
 */
int rdmx_send(rdmx_conn *conn, struct rdmx_msg *msg);

/*
 * Send completions. rdmx_send_tok() returns a token for the send; the
 * same rdmx_wait() that waits for one-sided operations (below) waits for
 * it, or polls it (timeout 0), without flushing the connection: later
 * sends stay in flight. A send is complete once its message is in the
 * peer's memory, where the peer receives it even if this side closes:
 *  - send_recv, srq, write_simplex, write_magic, write_duplex,
 *    write_atomic, direct_write: the local completion of its SEND /
 *    WRITE (an RC completion means the peer's NIC acknowledged the data);
 *  - read: the receiver's acknowledgement (it has READ or copied the
 *    payload), since the send buffer is held until then; that needs the
 *    receiving application to be calling into rdmx (rdmx_recv, ...);
 *  - buffered_read: the receiver has fetched it (READ it into its own
 *    ring); the receiver pulls only while its application calls rdmx_recv.
 * Tokens complete in send order: once a token is complete, so are all
 * earlier ones of the connection, so a set of sends is waited for by
 * waiting for its last token (tokens of one connection increase).
 * A send token costs no memory: it is the send's sequence number on the
 * connection, complete once the connection's completed count reaches it.
 * It need not be waited for, may be waited for any number of times (0
 * once complete), and stays valid until rdmx_conn_close(). A send of a
 * connection that went down before the send completed ends with the
 * connection's error.
 */
typedef uint64_t rdmx_token;

/**
 * rdmx_send_tok - rdmx_send() that also returns a token for this send in
 * *@tok (when @tok is not NULL), for rdmx_wait(). Same returns and buffer
 * ownership as rdmx_send(); *@tok is set only on success.
 */
int rdmx_send_tok(rdmx_conn *conn, struct rdmx_msg *msg, rdmx_token *tok);

/* Flags of rdmx_send_flags(). */
enum rdmx_send_flag {
	/* More sends on this connection follow at once (libfabric's
	 * FI_MORE, the socket's MSG_MORE): the library may hold this
	 * message, and the ones held before it, to post them together -
	 * one doorbell for a chain of work requests, records that lie
	 * back to back in one RDMA WRITE, small messages packed into one
	 * SEND (enum rdmx_coalesce). The peer still receives one message
	 * per rdmx_recv(). Held messages go out with the next send on the
	 * connection without this flag, or rdmx_flush(), or once the
	 * library needs them out (the protocol's batch bound, or an
	 * rdmx_msg_alloc() that would wait for something other than a
	 * posted send's completion: peer credit or ring space, or when
	 * nothing is in flight); nothing else sends them, so an
	 * rdmx_msg_alloc() with timeout 0 may return -EAGAIN with messages
	 * still held: end a burst with a send without the flag before
	 * waiting for an answer. A held message counts as sent: its handle is spent, its
	 * token valid (an rdmx_wait() for it sends what is held). */
	RDMX_SEND_MORE = 1u << 0,
};

/**
 * rdmx_send_flags - rdmx_send_tok() with @flags (enum rdmx_send_flag, 0
 * for none): send a burst of messages as RDMX_SEND_MORE, RDMX_SEND_MORE,
 * ..., 0. Unknown flags are -EINVAL. Same returns, buffer ownership and
 * token (*@tok, when @tok is not NULL) as rdmx_send_tok().
 */
int rdmx_send_flags(rdmx_conn *conn, struct rdmx_msg *msg, unsigned flags,
		    rdmx_token *tok);

/**
 * rdmx_sendv - send @n messages (@n >= 1), message i being a COPY of the
 * @iov[i].iov_len bytes at @iov[i].iov_base, in order, as one burst: one
 * lock and one set of checks for all of them, posted as an
 * RDMX_SEND_MORE burst is (chained, packed, coalesced; see "Bursts" in
 * docs/library.md) and all rung before it returns. On send_recv and srq a run
 * of small messages is packed straight from @iov, without a send buffer
 * per message: the cheapest way to send many small messages. Each
 * message waits for room (a send buffer, credit, ring space) as
 * rdmx_msg_alloc() does, all within @timeout_ms (0: none waits). The
 * bytes are the caller's again on return.
 * Returns how many messages were sent (1..@n), @iov[0] first: fewer than
 * @n when room did not come in time or the connection failed after
 * some were sent (send the rest again: the next call meets the cause),
 * like writev(). When none was sent: -EINVAL (NULL @conn or @iov, @n < 1,
 * a NULL base with a length), -EMSGSIZE (a message above
 * rdmx_conn_max_msg(): checked before any is sent), -EAGAIN (timeout 0,
 * no room), -ETIMEDOUT, or rdmx_send()'s errors. *@tok (when @tok is not
 * NULL) is the last sent message's token (rdmx_send_tok()).
 */
int rdmx_sendv(rdmx_conn *conn, const struct iovec *iov, int n, int timeout_ms,
	       rdmx_token *tok);

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
 * rdmx_recv_many - rdmx_recv() for up to @max messages at once: waits as
 * rdmx_recv does (up to @timeout_ms) for the first, then takes those
 * already there, without waiting, into @msgs[0..@max-1], in order. One
 * call costs one lock and one set of checks however many it takes.
 * Returns how many it took (1..@max), or, when it took none, what
 * rdmx_recv would (-EAGAIN, -ETIMEDOUT, -ECONNRESET, -errno); an error met
 * after the first message is kept and returned by the next receive call
 * on @conn, so the messages before it are all delivered first. Each
 * message is released as rdmx_recv's are (rdmx_msg_release_many does
 * several in one call). -EINVAL for a NULL @conn or @msgs or @max < 1.
 */
int rdmx_recv_many(rdmx_conn *conn, struct rdmx_msg *msgs, int max,
		   int timeout_ms);

/**
 * rdmx_conn_fd - a file descriptor for epoll/poll/select and event loops
 * (libuv, libevent) that turns readable when a message (or a freed send
 * buffer, or the peer's disconnect) may be there for @conn, so the next
 * rdmx_recv(…, 0) may not return -EAGAIN. Use it this way:
 *  1. call rdmx_recv(conn, &m, 0) until it returns -EAGAIN (or an error:
 *     close the connection) - an -EAGAIN return re-arms the fd;
 *  2. wait for the fd to be readable (EPOLLIN, level- or edge-triggered),
 *     never read from it; go to 1.
 * Readiness is a hint, level or edge alike: the fd may be readable and
 * rdmx_recv still say -EAGAIN (a send completion, an event taken by
 * another call, and on the protocols whose receiver polls memory the
 * completion of its sleep's publication: expect a spurious wake after
 * most -EAGAINs there); it is never unreadable while a message waits
 * that an -EAGAIN return saw coming. On the ring protocols with notify
 * POLL, OFF or REV and on direct_write a message announces itself by a
 * doorbell the sending side rings from its own calls: the guarantee
 * holds while the sender keeps calling the library on its connection,
 * or waits in a call on it, or watches its own rdmx_conn_fd by these
 * rules, until its sends complete (rdmx_flush() does that); a sender
 * that posts and then never calls again may leave its last message
 * unannounced until its next call (buffered_read's sender rings in
 * rdmx_send itself: no such condition).
 * The fd belongs to @conn (closed by rdmx_conn_close): do not close it;
 * remove it from your epoll set before closing the connection. Returns
 * the fd (>= 0), -EOPNOTSUPP on a fabric without completion channels, or
 * -errno.
 */
int rdmx_conn_fd(rdmx_conn *conn);

/**
 * rdmx_listener_fd - a file descriptor that turns readable when a
 * connection request or a handshake in progress has news, so that
 * rdmx_accept(…, 0) (or rdmx_listener_next(…, 0)) may return a new
 * connection. Call rdmx_accept(lis, 0, &c) until -EAGAIN, then wait for
 * the fd (never read it; it is closed by rdmx_listener_destroy). A
 * dialer that never completes its handshake is dropped by an accept
 * call after connect_timeout_ms: an event loop with handshakes in flight
 * calls rdmx_accept(…, 0) at least that often. Not thread-safe against
 * a concurrent rdmx_accept() on the same listener. Returns the fd or
 * -errno.
 */
int rdmx_listener_fd(rdmx_listener *lis);

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

/* Filled by the library, so its layout is fixed for this soname: what a
 * later version adds to an event comes as a new type or a new call, never
 * as a larger struct (the option structs grow by their size field). */
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
 * different threads on one listener. Returns 0, -ETIMEDOUT, -EAGAIN
 * (timeout 0 and nothing ready: no error message is recorded), -ESHUTDOWN
 * (rdmx_listener_shutdown), or -errno (rdmx_listener_error()).
 */
int rdmx_listener_next(rdmx_listener *lis, struct rdmx_event *ev, int timeout_ms);

/**
 * rdmx_msg_release - give back a received message, or an allocated send
 * buffer that will not be sent.
 */
int rdmx_msg_release(rdmx_conn *conn, struct rdmx_msg *msg);

/**
 * rdmx_msg_release_many - rdmx_msg_release() of @msgs[0..@n-1] in one
 * call (one lock). Every valid handle is released even when another is
 * not; returns 0, or the first error met (a handle that failed is left
 * as it was). -EINVAL for a NULL @conn or @msgs or @n < 0.
 */
int rdmx_msg_release_many(rdmx_conn *conn, struct rdmx_msg *msgs, int n);

/* ------------------------------------------------------ registered memory */

/*
 * Application memory the NIC may use: a local buffer of one-sided
 * operations (rdmx_read() lands in it, rdmx_write() sends from it), a
 * region exported to a peer (rdmx_mr_export()), or a source of
 * rdmx_send_mr(). An rdmx_mr belongs to a context and is registered with
 * each RDMA device it is first used on (lazily, once per device).
 * Threading: a region may be used by several threads; rdmx_mr_dereg()
 * must not overlap any use of it, nor operations in flight on it.
 */
typedef struct rdmx_mr rdmx_mr;

enum rdmx_access {
	RDMX_ACCESS_LOCAL = 0,              /* local use only (always allowed) */
	RDMX_ACCESS_REMOTE_READ = 1 << 0,   /* a peer may RDMA READ it */
	RDMX_ACCESS_REMOTE_WRITE = 1 << 1,  /* a peer may RDMA WRITE it */
	RDMX_ACCESS_REMOTE_ATOMIC = 1 << 2, /* FETCH_ADD / CMP_SWAP on it */
};

/**
 * rdmx_mr_reg - register @len bytes at @addr with @access (enum
 * rdmx_access bits) for use with @ctx's connections. On a device with
 * memory windows the remote rights are granted only through
 * rdmx_mr_export()'s windows: the registration itself is made with local
 * rights and window binds. Returns 0, -EINVAL (NULL @addr, zero @len,
 * unknown access bits) or -errno (the device refused, e.g. the memlock
 * limit).
 */
int rdmx_mr_reg(rdmx_ctx *ctx, void *addr, size_t len, unsigned access,
		rdmx_mr **out);

/**
 * rdmx_mr_dereg - unregister @mr from every device and free it; the
 * windows rdmx_mr_export() bound on it are revoked first (their keys are
 * refused from then on).
 */
void rdmx_mr_dereg(rdmx_mr *mr);

/** rdmx_mr_addr - the address @mr was registered at. */
void *rdmx_mr_addr(const rdmx_mr *mr);

/** rdmx_mr_len - the length @mr was registered with. */
size_t rdmx_mr_len(const rdmx_mr *mr);

/**
 * rdmx_alloc - @size bytes of registered memory (message-ready: usable by
 * rdmx_send_mr() and as the local buffer of one-sided operations), from
 * slabs over large registered chunks, 64-byte aligned. NULL when out of
 * memory or @size is 0 (rdmx_last_error() says which). Thread-safe.
 */
void *rdmx_alloc(rdmx_ctx *ctx, size_t size);

/** rdmx_free - give back memory from rdmx_alloc() (NULL: nothing). */
void rdmx_free(rdmx_ctx *ctx, void *p);

/**
 * rdmx_alloc_mr - the registration @p (from rdmx_alloc()) lies in and its
 * offset there, for the one-sided calls. Returns 0 or -EINVAL (not
 * rdmx_alloc() memory of @ctx). The registration allows local use only.
 */
int rdmx_alloc_mr(rdmx_ctx *ctx, const void *p, rdmx_mr **mr, size_t *off);

/**
 * rdmx_send_mr - send @len bytes at @off in @mr as one message; on return
 * the bytes are the caller's again. This COPIES them into a send buffer
 * (rdmx_msg_alloc + memcpy + rdmx_send, waiting up to @timeout_ms for
 * one); rdmx_send_mr_tok() is the zero-copy send.
 * Returns 0, -EINVAL (range outside @mr), -EMSGSIZE, or rdmx_send()'s
 * errors.
 */
int rdmx_send_mr(rdmx_conn *conn, rdmx_mr *mr, size_t off, size_t len,
		 int timeout_ms);

/**
 * rdmx_send_mr_tok - send @len bytes at @off in @mr as one message
 * WITHOUT copying them where the protocol allows, and put its token in
 * *@tok (rdmx_send_tok()). On send_recv and srq the SEND's data are the
 * registered bytes themselves: the NIC reads them until the send
 * completes, so they must not change until rdmx_wait(@tok) returned 0 (or
 * the connection went down; rdmx_conn_close() does not wait). A send
 * buffer (and on srq a credit) is still taken for the send's accounting,
 * waiting up to @timeout_ms as rdmx_msg_alloc(). The other protocols place
 * a message in their own framing (a ring record with its stamps, a buffer
 * the receiver READs) and copy as rdmx_send_mr() does; the same rule
 * about the bytes then costs nothing. Such a send is never held or packed
 * with an RDMX_SEND_MORE burst (what is held goes out first).
 * Returns 0, -EINVAL (NULL argument, range outside @mr, @mr of another
 * context), -EMSGSIZE, -ETIMEDOUT, or rdmx_send()'s errors; nothing is
 * sent when it fails.
 */
int rdmx_send_mr_tok(rdmx_conn *conn, rdmx_mr *mr, size_t off, size_t len,
		     int timeout_ms, rdmx_token *tok);

/* ---------------------------------------------------- one-sided operations */

/*
 * Export and import. rdmx_mr_export() writes an opaque descriptor
 * (RDMX_REGION_DESC_LEN bytes: magic, version, access, address, length,
 * key) that the application ships to the peer in a message; the peer's
 * rdmx_region_import() checks it and returns a region bound to that
 * connection. Every offset, length, alignment and access right of an
 * operation is checked locally against the descriptor before anything is
 * posted (-EINVAL, -EACCES): a bad offset never puts the QP in error. The
 * exporter's NIC still enforces the real bounds and rights.
 *
 * Isolation: registrations live in the device's one protection domain
 * shared by all connections of a context (the srq protocol needs that:
 * one SRQ serves many QPs, and an SRQ and its QPs must share a PD). On a
 * device with memory windows (rdmx_device_isolation() returns
 * RDMX_ISOLATION_WINDOWS; SoftRoCE has them) an export is a window bound
 * to the exporting connection's queue pair: its key works over that
 * connection only, with the rights exported, and is refused once the
 * connection closes (or the registration goes); a registration's own key
 * opens nothing remotely there. On a device without windows
 * (RDMX_ISOLATION_RIGHTS) an export carries the registration's key: it
 * has the registration's rights and is valid on the exporter's every
 * connection until rdmx_mr_dereg(), so a peer of ANOTHER connection that
 * learns (or guesses) a descriptor can use it; register with no more
 * rights than you export, and export only to peers you would trust with
 * the memory. rdmx itself refuses a region on any connection but the one
 * it was imported on (docs/isolation.md).
 *
 * Completion tokens: each operation gives a token; rdmx_wait() on it
 * returns once the operation completed. At most RDMX_ONESIDED_MAX
 * operations per connection may be outstanding (not yet waited for):
 * another returns -ENOBUFS. Every token must be waited for.
 */
#define RDMX_REGION_DESC_LEN 32
#define RDMX_ONESIDED_MAX 16

typedef struct rdmx_region rdmx_region;

/**
 * rdmx_mr_export - describe @len bytes at @off of @mr, with @access (a
 * subset of @mr's), to @conn's peer. Writes the descriptor to @buf (room
 * for *@buflen bytes, at least RDMX_REGION_DESC_LEN) and its length to
 * *@buflen. Where the device has memory windows, each call binds a new
 * window to @conn's queue pair with exactly @access over the range: its
 * key works only over @conn, and is refused once @conn closes or @mr is
 * deregistered (the window is kept until then). The bind is a work request
 * on @conn: the call waits for its local completion, at most 200 ms (then
 * -ETIMEDOUT and @conn goes down, the message naming its peer), and takes
 * one of the RDMX_ONESIDED_MAX operation slots while it waits. Without
 * windows the descriptor carries @mr's own key (its rights, valid on every
 * connection of the context). Returns 0, -EINVAL (range outside @mr, no
 * access bit), -EACCES (@access not granted by @mr), -ENOSPC (@buf too
 * small), -ENOBUFS (every operation slot in use), -ETIMEDOUT, or -errno
 * (the device refused the window, @conn is down).
 */
int rdmx_mr_export(rdmx_conn *conn, rdmx_mr *mr, size_t off, size_t len,
		   unsigned access, void *buf, size_t *buflen);

/**
 * rdmx_region_import - check the peer's descriptor @buf (@len bytes, as
 * received: it is peer-written and never trusted beyond what is checked)
 * and make a region usable on @conn. Returns 0 or -EPROTO (not a valid
 * descriptor, the message says why).
 */
int rdmx_region_import(rdmx_conn *conn, const void *buf, size_t len,
		       rdmx_region **out);

/** rdmx_region_free - free an imported region (its operations waited). */
void rdmx_region_free(rdmx_region *region);

/** rdmx_region_len - the length the peer exported. */
size_t rdmx_region_len(const rdmx_region *region);

/**
 * rdmx_read - RDMA READ @len bytes at @roff of @region into @mr at @off.
 * rdmx_write - RDMA WRITE @len bytes from @mr at @off to @roff of @region.
 * Both post and return a token in *@tok. Returns 0, -EINVAL (a range
 * outside @region or @mr, a region of another connection), -EACCES (the
 * region was not exported for it), -ENOBUFS (RDMX_ONESIDED_MAX
 * outstanding), or the connection's error.
 */
int rdmx_read(rdmx_conn *conn, const rdmx_region *region, size_t roff,
	      rdmx_mr *mr, size_t off, size_t len, rdmx_token *tok);
/** rdmx_write - see rdmx_read(). */
int rdmx_write(rdmx_conn *conn, const rdmx_region *region, size_t roff,
	       rdmx_mr *mr, size_t off, size_t len, rdmx_token *tok);

/**
 * rdmx_fetch_add - add @add to the 8 bytes at @roff (8-byte aligned) of
 * @region; the old value lands in @mr at @off (8 bytes, 8-aligned) in
 * host order. rdmx_cmp_swap - store @swap there if it holds @compare;
 * the old value lands likewise. Errors as rdmx_read(), plus -EINVAL for
 * an unaligned address.
 */
int rdmx_fetch_add(rdmx_conn *conn, const rdmx_region *region, size_t roff,
		   uint64_t add, rdmx_mr *mr, size_t off, rdmx_token *tok);
/** rdmx_cmp_swap - see rdmx_fetch_add(). */
int rdmx_cmp_swap(rdmx_conn *conn, const rdmx_region *region, size_t roff,
		  uint64_t compare, uint64_t swap, rdmx_mr *mr, size_t off,
		  rdmx_token *tok);

/**
 * rdmx_wait - wait up to @timeout_ms (0: poll once, -1: forever) for the
 * one-sided operation or the send (rdmx_send_tok()) of @tok. Returns 0
 * (done: a one-sided token is spent, a send token stays complete),
 * -EAGAIN (@timeout_ms 0) or -ETIMEDOUT (not yet; wait again), -EINVAL
 * (not an outstanding one-sided token or an issued send token of @conn:
 * another connection's, a closed one's, a forged one), or the error the
 * operation or the connection failed with (a one-sided token is spent).
 * A wait for a send waits for that send only, not for later ones.
 */
int rdmx_wait(rdmx_conn *conn, rdmx_token tok, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif /* RDMX_RDMX_H */
