/* SPDX-License-Identifier: MIT */
/*
 * rdmx bench, the run-time side: an endpoint is one connection, over rdmx or
 * TCP, seen through one message interface, and the bench wire protocol
 * spoken over it.
 *
 * Wire protocol: the client drives, the server answers. A control message
 * carries immediate data BENCH_CTRL_IMM (TCP: the same word in its frame
 * header) and a struct bench_ctrl; any other message is data and carries
 * its sequence number in its first 8 bytes (when it has 8). The client sends
 * BEGIN_LAT or BEGIN_BW with the size (and in count, 1 if it expects a
 * --single-receiver server, else 0), then data, then END; the server
 * echoes every data message in a latency test, counts and checks them in a
 * bandwidth test, and answers END with ACK carrying the number of data
 * messages it received, how many were wrong, and its CPU time since BEGIN.
 */
#ifndef RDMX_TOOLS_BENCH_EP_H
#define RDMX_TOOLS_BENCH_EP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <rdmx/rdmx.h>

#include "bench.h"
#include "cli.h"

#define BENCH_CTRL_IMM	0x52444258u	/* "RDBX" */
#define BENCH_CTRL_LEN	48
#define BENCH_HEAD	BENCH_CTRL_LEN	/* bytes of a message recv() keeps */
#define BENCH_MIN_MSG	64		/* max_msg_size floor: controls fit */

enum bench_op {
	BENCH_OP_BEGIN_LAT = 1,
	BENCH_OP_BEGIN_BW,
	BENCH_OP_END,
	BENCH_OP_ACK,
	BENCH_OP_SHUTDOWN,
};

struct bench_ctrl {
	uint32_t op;
	uint64_t size, count, bad, user_ns, sys_ns;
};

struct bench_rx {
	size_t len;
	bool ctrl;
	uint8_t head[BENCH_HEAD];
};

struct bench_ep;

/* Each returns 0 or -errno with a message in ep->err; -ECONNRESET: peer gone. */
struct bench_ep_ops {
	/* Send @len bytes beginning with @head_len bytes of @head. */
	int (*send)(struct bench_ep *ep, const void *head, size_t head_len,
		    size_t len, bool ctrl);
	int (*recv)(struct bench_ep *ep, struct bench_rx *rx);
	int (*flush)(struct bench_ep *ep);
	void (*close)(struct bench_ep *ep);
};

struct bench_ep {
	const struct bench_ep_ops *ops;
	int timeout_ms;		/* longest wait of one send or receive */
	bool more;		/* the next data send is not a burst's last */
	bool vec;		/* rdmx: a burst is one rdmx_sendv (--sendv) */
	struct cli_err err;
};

/* ------------------------------------------------------------ bench_ep.c */

/** bench_ep_rdmx - wrap @conn (closed with the endpoint); NULL if no memory. */
struct bench_ep *bench_ep_rdmx(rdmx_conn *conn, int timeout_ms);

/**
 * bench_rx_take - copy what bench_rx keeps of @m, a message received on
 * @ep (an rdmx endpoint), then release it. 0 or -errno (ep->err).
 */
int bench_rx_take(struct bench_ep *ep, struct rdmx_msg *m, struct bench_rx *rx);

/** bench_ep_close - close and free; NULL is fine. */
void bench_ep_close(struct bench_ep *ep);

int bench_send_ctrl(struct bench_ep *ep, const struct bench_ctrl *c);

/** bench_send_data - a data message of @size bytes carrying @seq. */
int bench_send_data(struct bench_ep *ep, size_t size, uint64_t seq);

/** bench_rx_ctrl - decode a control message; -EPROTO if @rx is not one. */
int bench_rx_ctrl(struct bench_ep *ep, const struct bench_rx *rx,
		  struct bench_ctrl *c);

/** bench_rx_seq - the sequence number of a data message (0 below 8 bytes). */
uint64_t bench_rx_seq(const struct bench_rx *rx);

/** bench_recv_ack - wait for the ACK of an END. */
int bench_recv_ack(struct bench_ep *ep, struct bench_ctrl *ack);

/* ------------------------------------------------------------ bench_tcp.c */

/** bench_tcp_listen - a listening socket on @addr:@port (0: ephemeral). */
int bench_tcp_listen(const char *addr, uint16_t port, int *fd, uint16_t *bound,
		     struct cli_err *e);

/**
 * bench_tcp_accept - wait up to @timeout_ms for a connection on @lfd;
 * -ETIMEDOUT when none came. @max_msg: the largest message it will take.
 */
int bench_tcp_accept(int lfd, int timeout_ms, size_t max_msg, int io_timeout_ms,
		     struct bench_ep **out, struct cli_err *e);

/** bench_tcp_dial - connect to @addr:@port (TCP_NODELAY). */
int bench_tcp_dial(const char *addr, uint16_t port, size_t max_msg,
		   int io_timeout_ms, struct bench_ep **out, struct cli_err *e);

/* ------------------------------------------------------------ bench_sys.c */

/** bench_thread_cpu - the calling thread's user and system CPU time. */
void bench_thread_cpu(struct bench_cpu *c);

/** bench_cpu_since - @now - @then, per field. */
struct bench_cpu bench_cpu_since(const struct bench_cpu *then,
				 const struct bench_cpu *now);

/** bench_counters_read - every counter in DEV's port 1 hw_counters. */
int bench_counters_read(const char *dev, struct bench_counters *c);

/** bench_counters_delta - @after - @before, keeping the non-zero ones. */
void bench_counters_delta(const struct bench_counters *before,
			  const struct bench_counters *after,
			  struct bench_counters *out);

/** bench_device_of - the RDMA device that has @addr in its GID table. */
int bench_device_of(const char *addr, char *buf, size_t len);

/* --progress: never, auto (stderr is a terminal), always. */
enum bench_progress_mode {
	BENCH_PROGRESS_NEVER,
	BENCH_PROGRESS_AUTO,
	BENCH_PROGRESS_ALWAYS,
};

/* One test's progress line on stderr (after 1 s). */
struct bench_progress {
	bool on, shown;
	const char *label;
	uint64_t start, last;
};

void bench_progress_start(struct bench_progress *p, enum bench_progress_mode mode,
			  const char *label);
void bench_progress_tick(struct bench_progress *p, uint64_t done, uint64_t total,
			 uint64_t dur_ns);
void bench_progress_end(struct bench_progress *p);

/*
 * bench_catch_stop - from now on SIGINT and SIGTERM only ask the run to stop:
 * the test under way ends early (its row is dropped), the rows measured so
 * far are written, and the command exits 128 + the signal's number.
 */
void bench_catch_stop(void);

/** bench_stopped - the signal that asked to stop, or 0. */
int bench_stopped(void);

/* ------------------------------------------------------------ bench_run.c */

/* One test on one connection: the client's side. */
struct bench_job {
	struct bench_ep *ep;
	enum bench_mode mode;
	uint64_t size, warmup, iters, duration_ns; /* iters 0: run duration_ns */
	enum bench_progress_mode progress;
	const char *label;
	bool single_receiver;	/* expect a --single-receiver server */
	uint64_t batch;		/* bw: sends per burst, 0 or 1: none */
	/* results of the timed phase */
	uint64_t msgs, t0, t1;
	struct bench_cpu cpu, server;
	struct hist *rtt;	/* BENCH_LAT: filled, must be set by the caller */
};

/** bench_job_run - warmup, then the timed phase. 0 or -errno (ep->err). */
int bench_job_run(struct bench_job *j);

/* The server's side of one connection: the test under way. */
struct bench_serve {
	struct bench_ep *ep;
	enum bench_op mode;	/* BEGIN_LAT, BEGIN_BW or 0 between tests */
	uint64_t size, count, bad, tests;
	struct bench_cpu cpu0;	/* the serving thread's CPU time at BEGIN */
	bool single_receiver;	/* what a BEGIN's count must say (0 or 1) */
};

/** bench_serve_rx - answer @rx, a message that came on @s->ep. */
int bench_serve_rx(struct bench_serve *s, const struct bench_rx *rx,
		   atomic_bool *shutdown);

/** bench_serve_ep - answer one client until it disconnects. */
int bench_serve_ep(struct bench_ep *ep, atomic_bool *shutdown, uint64_t *tests);

#endif /* RDMX_TOOLS_BENCH_EP_H */
