/* SPDX-License-Identifier: MIT */
/*
 * rdmx RPC: calls of a declared contract of methods over rdmx connections.
 *
 * The contract is a table of methods (id, name, largest request, largest
 * response, flags) that server and client both declare. Before the first
 * call the client's table is checked against the server's: a client with
 * another table is refused (rdmx_rpc_client_create fails with -EPROTO and
 * a message naming the first difference), and the server keeps serving
 * the others.
 *
 * Server: a handler per method id reads the request in place and writes
 * its response into a buffer rdmx gives it, then answers with
 * rdmx_rpc_respond() - before it returns, or later from any thread (a
 * deferred response). The handler's status (0 or a negative errno of its
 * choice) travels back to the caller.
 *
 * Client: driven by one thread. rdmx_rpc_call() is synchronous;
 * rdmx_rpc_call_async() returns a call id and rdmx_rpc_wait() or
 * rdmx_rpc_poll() collect the results; up to @window calls are in flight.
 *
 * Transports are chosen by name (struct rdmx_rpc_opts.transport): "msg"
 * carries each call as one rdmx message over any rdmx protocol
 * (@protocol, default send_recv); "rfp" (RFP, EuroSys'17) has the client
 * RDMA-WRITE its request into a slot of server memory and RDMA-READ the
 * response the server leaves in its own memory, asking the server to push
 * it (a SEND) after @fetch_retries reads that found nothing; the handler
 * reads the request in that slot, still writable by the client
 * (rdmx_rpc_req_data).
 * "herd" (HERD): requests RDMA-WRITTEN over UC into the client's slots
 * on the server, responses SENT over UD (above the UD limit: over the
 * control connection); a lost response is a call that times out.
 *
 * Conventions as in rdmx.h: 0 or a negative errno, a readable message on
 * the object (rdmx_rpc_server_error(), rdmx_rpc_client_error()) and in the
 * calling thread (rdmx_last_error()).
 */
#ifndef RDMX_RPC_H
#define RDMX_RPC_H

#include <stddef.h>
#include <stdint.h>

#include <rdmx/rdmx.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rdmx_rpc_server rdmx_rpc_server;
typedef struct rdmx_rpc_client rdmx_rpc_client;
typedef struct rdmx_rpc_req rdmx_rpc_req;

#define RDMX_RPC_IDEMPOTENT 0x1u /* a method safe to call again */
#define RDMX_RPC_MAX_METHODS 256 /* entries of a contract */
#define RDMX_RPC_NAME_MAX 31     /* bytes of a method name */

/* One method of the contract. Ids are unique; any values 0..65535. */
struct rdmx_rpc_method {
	uint16_t id;
	const char *name;   /* 1..RDMX_RPC_NAME_MAX bytes */
	uint32_t max_req;   /* largest request in bytes */
	uint32_t max_resp;  /* largest response in bytes */
	uint32_t flags;     /* RDMX_RPC_IDEMPOTENT */
};

/* Options of a server or client; fill with rdmx_rpc_opts_init(). */
struct rdmx_rpc_opts {
	uint32_t size;          /* sizeof(struct rdmx_rpc_opts) of the caller */
	const char *transport;  /* "msg" (default), "herd" */
	const char *protocol;   /* msg: the rdmx protocol, default "send_recv" */
	uint32_t window;        /* client: calls in flight, default 16, <= 4096;
				 * rfp and herd server: request slots per
				 * client (a client's window must not be
				 * larger: herd refuses it at connect) */
	uint32_t workers;       /* server: worker threads, default 1; 0: the
				 * handlers run in rdmx_rpc_server_run's thread */
	int timeout_ms;         /* connect and contract check bound, default 5000 */
	uint32_t fetch_retries; /* rfp client: RDMA READs of a response not yet
				 * there before it asks the server to push it
				 * (RFP's hybrid R), default 8, 0: push at once */
	/* Server: no loop waits on one client (docs/servers.md). A response
	 * the connection cannot take now waits in the connection's queue. */
	int hello_ms;           /* a connection that sends no valid hello
				 * within it is closed; default 0: timeout_ms */
	int drop_ms;            /* a client whose queued responses make no
				 * progress this long is dropped; default 0:
				 * half of timeout_ms */
	uint32_t queue_max;     /* responses queued per connection, default
				 * 0: 4096 (a window's); one more drops it */
	uint32_t queue_bytes;   /* their bytes per connection, default 0:
				 * 16 MiB (one frame of the contract's
				 * largest, if more); one more drops it;
				 * below one frame: -EINVAL */
};

/** rdmx_rpc_opts_init - fill @opts with the defaults listed above. */
void rdmx_rpc_opts_init(struct rdmx_rpc_opts *opts);

/**
 * rdmx_rpc_contract_check - check a method table (@n entries) on its own:
 * unique ids, names of 1..RDMX_RPC_NAME_MAX bytes, known flags, at most
 * RDMX_RPC_MAX_METHODS. Returns 0 or -EINVAL (rdmx_last_error() says
 * which entry).
 */
int rdmx_rpc_contract_check(const struct rdmx_rpc_method *methods, size_t n);

/* ----------------------------------------------------------------- server */

/*
 * A handler: read the request (rdmx_rpc_req_data), write the response into
 * rdmx_rpc_req_resp() and call rdmx_rpc_respond() exactly once, before
 * returning or later from any thread.
 */
typedef void (*rdmx_rpc_handler)(rdmx_rpc_req *req, void *arg);

/**
 * rdmx_rpc_server_create - a server of the contract @methods (@n entries,
 * copied) listening on @addr:@port (port 0: ephemeral) in @ctx.
 * Threading: one thread calls rdmx_rpc_server_run(); it accepts
 * connections and receives requests, and hands each connection to one
 * worker (round robin at connect), so the requests of a connection run in
 * order on one thread and connections spread over the workers.
 * Returns 0, -EINVAL (bad contract or options), or rdmx_listen()'s error.
 */
int rdmx_rpc_server_create(rdmx_ctx *ctx, const char *addr, uint16_t port,
			   const struct rdmx_rpc_method *methods, size_t n,
			   const struct rdmx_rpc_opts *opts,
			   rdmx_rpc_server **out);

/**
 * rdmx_rpc_server_set_listener_opts - the admission caps of @srv's
 * listener (rdmx_listener_set_opts(): max_conns, max_conns_per_peer,
 * max_mem, which also counts the rfp and herd slots each client pins; NULL:
 * the defaults). A dial over a cap is refused and the client's
 * rdmx_rpc_client_create() says which cap and the bytes asked. Set before
 * rdmx_rpc_server_run(). Returns 0 or -EINVAL.
 */
int rdmx_rpc_server_set_listener_opts(rdmx_rpc_server *srv,
				      const struct rdmx_listener_opts *opts);

/** rdmx_rpc_server_port - the port the server listens on. */
uint16_t rdmx_rpc_server_port(const rdmx_rpc_server *srv);

/**
 * rdmx_rpc_server_handle - serve method @id with @fn(req, @arg). Set every
 * handler before rdmx_rpc_server_run(). A method without a handler is
 * answered with status -ENOSYS. Returns 0 or -ENOENT (not in the contract).
 */
int rdmx_rpc_server_handle(rdmx_rpc_server *srv, uint16_t id,
			   rdmx_rpc_handler fn, void *arg);

/**
 * rdmx_rpc_server_run - serve until rdmx_rpc_server_stop() (returns 0) or
 * a listener failure (-errno). Waits are bounded: the loop wakes at least
 * every 100 ms.
 */
int rdmx_rpc_server_run(rdmx_rpc_server *srv);

/** rdmx_rpc_server_stop - make rdmx_rpc_server_run() return; any thread. */
void rdmx_rpc_server_stop(rdmx_rpc_server *srv);

/**
 * rdmx_rpc_server_destroy - close every connection and free the server
 * (rdmx_rpc_server_run has returned). Requests queued to the workers are
 * served first; deferred requests not yet answered are dropped (their
 * callers fail with -ECONNRESET) and their handles are void: no thread
 * may answer them after this call has begun.
 */
void rdmx_rpc_server_destroy(rdmx_rpc_server *srv);

/** rdmx_rpc_server_error - detail message of the last failure on @srv. */
const char *rdmx_rpc_server_error(const rdmx_rpc_server *srv);

/* Counters of a server, since its creation. */
struct rdmx_rpc_server_stats {
	uint64_t conns;       /* clients whose contract matched */
	uint64_t open;        /* of them, connected now */
	uint64_t rejected;    /* clients refused for their contract */
	uint64_t calls;       /* requests answered */
	uint64_t bad_frames;  /* connections dropped for a malformed frame */
	uint64_t work_requests; /* outbound work requests the server posted:
				 * messages and one-sided operations on its
				 * connections (rdmx_conn_stats) plus herd's
				 * UD SENDs; rfp in fetch mode posts none per
				 * call. A protocol's own housekeeping (the
				 * ring protocols' credit returns) is not in it */
	uint64_t dropped;     /* clients dropped: their responses stayed
			       * queued past drop_ms, or overflowed the queue */
	uint64_t hello_late;  /* connections closed for no hello in hello_ms */
};

/** rdmx_rpc_server_stats - fill @st with @srv's counters (any thread). */
void rdmx_rpc_server_stats(rdmx_rpc_server *srv, struct rdmx_rpc_server_stats *st);

/** rdmx_rpc_req_method - the method id of @req. */
uint16_t rdmx_rpc_req_method(const rdmx_rpc_req *req);

/**
 * rdmx_rpc_req_data - the request's bytes, in place in the receive buffer
 * (valid until rdmx_rpc_respond), their length in *@len. Peer-writable
 * in place: on the "msg" transport over the write_* protocols or
 * direct_write (struct rdmx_msg in rdmx.h), and on "rfp", whose request
 * stays in its slot of server memory the client RDMA-WRITEs, the client
 * can still write there while the handler reads: copy what must stay
 * stable, validate and use the copy. "herd" hands the handler a private
 * copy; "msg" over send_recv, srq, read and buffered_read memory the
 * client cannot write.
 */
const void *rdmx_rpc_req_data(const rdmx_rpc_req *req, size_t *len);

/** rdmx_rpc_req_resp - the response buffer, the request's own (it holds
 * no send buffer while a response is deferred; rdmx_rpc_respond copies it
 * once into one); its capacity (the method's max_resp) in *@cap. Buffers
 * are reused and not cleared: what it holds before the handler writes is
 * undefined, as malloc's memory is; respond with the bytes written. */
void *rdmx_rpc_req_resp(rdmx_rpc_req *req, size_t *cap);

/**
 * rdmx_rpc_respond - answer @req with @status (0 or a negative errno) and
 * the first @len bytes of its response buffer; @req is void afterwards.
 * Any thread, once per request. Returns 0, -EMSGSIZE (@len above the
 * method's max_resp: the caller gets status -EMSGSIZE instead),
 * -EINVAL (@status not 0 or -1..-4095), or the connection's error (the
 * client is gone: nothing to answer, @req is freed all the same). It never
 * waits on the client: a response its connection cannot take now waits in
 * the connection's queue, and a client whose queue overflows (-ENOBUFS)
 * or stays stuck for drop_ms is dropped (docs/servers.md).
 */
int rdmx_rpc_respond(rdmx_rpc_req *req, int status, size_t len);

/* ----------------------------------------------------------------- client */

/**
 * rdmx_rpc_client_create - connect to the server at @addr:@port and check
 * the contract @methods (@n entries, copied). Returns 0, -EPROTO (the
 * server's contract differs: rdmx_last_error() names the first
 * difference), -EINVAL, -ETIMEDOUT, or rdmx_dial()'s error.
 */
int rdmx_rpc_client_create(rdmx_ctx *ctx, const char *addr, uint16_t port,
			   const struct rdmx_rpc_method *methods, size_t n,
			   const struct rdmx_rpc_opts *opts,
			   rdmx_rpc_client **out);

/** rdmx_rpc_client_destroy - disconnect; calls in flight are dropped. */
void rdmx_rpc_client_destroy(rdmx_rpc_client *cl);

/** rdmx_rpc_client_error - detail message of the last failure on @cl. */
const char *rdmx_rpc_client_error(const rdmx_rpc_client *cl);

/** rdmx_rpc_client_conn - the rdmx connection under @cl, for its stats and
 * addresses (rfp: the control connection; its msgs_recv counts the
 * server's SENDs to this client: the set-up and pushed responses). */
rdmx_conn *rdmx_rpc_client_conn(const rdmx_rpc_client *cl);

/**
 * rdmx_rpc_call_async - send a call of @method with @len bytes at @req;
 * the response will be copied to @resp (@cap bytes, kept by the caller
 * until the call completes). The call's id goes to *@id. Returns 0,
 * -ENOENT (@method not in the contract), -EMSGSIZE (@len above its
 * max_req; nothing is sent), -ENOBUFS (@window calls in flight: wait for
 * one), -ECONNRESET (the server is gone), or -errno.
 */
int rdmx_rpc_call_async(rdmx_rpc_client *cl, uint16_t method,
			const void *req, size_t len, void *resp, size_t cap,
			uint64_t *id);

/**
 * rdmx_rpc_wait - wait up to @timeout_ms (0: poll once, -1: forever) for
 * call @id. On completion returns 0 with the handler's status in *@status
 * and the response's length in *@len (either may be NULL); the id is
 * spent. Else -ETIMEDOUT/-EAGAIN (not yet: wait again), -EINVAL (not a
 * call in flight), or the call's failure, which spends the id:
 * -ECONNRESET (the server went away), -EMSGSIZE (the response is larger
 * than @cap), -EPROTO (a malformed response; the client is failed).
 */
int rdmx_rpc_wait(rdmx_rpc_client *cl, uint64_t id, int *status,
		  size_t *len, int timeout_ms);

/**
 * rdmx_rpc_poll - like rdmx_rpc_wait() for whichever call completes
 * first; its id goes to *@id. -EINVAL when no call is in flight.
 */
int rdmx_rpc_poll(rdmx_rpc_client *cl, uint64_t *id, int *status,
		  size_t *len, int timeout_ms);

/**
 * rdmx_rpc_call - a synchronous call: rdmx_rpc_call_async() then
 * rdmx_rpc_wait() bounded by @timeout_ms. A call that timed out is
 * abandoned (its late response is dropped). Returns as those two.
 */
int rdmx_rpc_call(rdmx_rpc_client *cl, uint16_t method, const void *req,
		  size_t len, void *resp, size_t cap, size_t *resp_len,
		  int *status, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif /* RDMX_RPC_H */
