/* SPDX-License-Identifier: MIT */
/*
 * The protocol contract: what every src/protocols/<name>.c fills, in three
 * tables, as nng splits a transport into pipe, dialer and listener ops.
 *
 *   struct rdmx__conn_ops   a connection's life: its private data, option
 *                           checks, memory estimate, setup, the hello
 *                           exchange, teardown. Called a few times per
 *                           connection, through c->proto->conn.
 *   struct rdmx__data_ops   the data path: every public send, receive and
 *                           release call and their batched, vector and
 *                           zero-copy forms, and the two hooks the core's
 *                           own data-path machinery calls per completion
 *                           (own_wc) and per sleep (sleep_announce). Called
 *                           per message, through c->data_ops: the
 *                           connection caches proto->data, so a send loads
 *                           one pointer and then the function, as it did
 *                           when the table was one (bench/profile).
 *   struct rdmx__group_ops  the receive side shared by a listener's
 *                           accepted connections (srq's SRQ, write_atomic's
 *                           ring), through g->proto->group.
 *
 * Every member is set: where a protocol has nothing of its own, its table
 * points at the core's default, a named function declared below
 * (rdmx__default_*), so a table reads complete and the core calls through
 * it without asking. A protocol with no shared receive side points at
 * rdmx__group_none.
 *
 * The descriptor (struct rdmx_protocol_ops) keeps what names the protocol
 * (name, wire id, family) and points at the three tables; a family shares
 * them (write_simplex, write_magic and write_duplex point at the same
 * write_ring tables and differ in name, id and family).
 */
#ifndef RDMX_CORE_PROTOCOL_H
#define RDMX_CORE_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <rdmx/rdmx.h>

struct rdmx__group;
struct rdmx__wc;
struct rdmx_protocol_ops;

/*
 * A connection's life. The core allocates priv_size bytes per connection
 * (c->priv, zeroed), resolves the device, exchanges hellos, and calls:
 *   setup()     once the device is known (register memory, have the core
 *               make the CQs and QP: rdmx__qp_make, post receives) -
 *               before any hello goes out;
 *   hello_out() this side's protocol block;
 *   hello_in()  the peer's block: -EPROTO with a message on a mismatch;
 *   teardown()  after the QP and its CQs are gone (qp.h): free what
 *               setup() made.
 *
 * The options: the core checks the ones every protocol reads (sizes,
 * depths, retries, timeouts, wait mode); check_opts() checks the ones only
 * this protocol reads (ring_size, notify, eager_max, ...) and their fit
 * with the message size: 0, or -EINVAL with a message. The core calls it
 * with @max_msg 0 when rdmx_dial() or rdmx_listen() loads the options
 * (only what the options alone decide), and with the connection's max_msg
 * before each setup(). @proto is the descriptor it was called through, for
 * protocols that share a check among several descriptors. Default
 * rdmx__default_check_opts: nothing more to check.
 *
 * mem_estimate(): bytes of memory setup() of @c will register for this
 * connection alone (not a receive side shared by the listener's
 * connections), from c->opts and the negotiated c->max_msg. The listener's
 * memory cap is checked against it before setup(). Default
 * rdmx__default_mem_estimate: 0.
 */
struct rdmx__conn_ops {
	size_t priv_size;
	int (*check_opts)(const struct rdmx_protocol_ops *proto,
			  const struct rdmx_conn_opts *o, uint32_t max_msg);
	uint64_t (*mem_estimate)(const rdmx_conn *c);
	int (*setup)(rdmx_conn *c);
	int (*hello_out)(rdmx_conn *c, uint8_t *block, size_t cap, size_t *len);
	int (*hello_in)(rdmx_conn *c, const uint8_t *block, size_t len);
	void (*teardown)(rdmx_conn *c);
};

/*
 * The data path. The operations implement the public calls of the same
 * names; the core has already checked that the connection is up. Every
 * message handle a protocol fills is made by rdmx__msg_set() (msg.h).
 * msg_alloc, send, flush, recv, release and sends_done are the protocol's
 * own; the rest may point at the default named beside them.
 *
 * own_wc and sleep_announce sit here, not with the connection: the core
 * calls them from its data-path machinery, own_wc for each completion it
 * takes out of the send CQ (live.c) and sleep_announce before a receive
 * wait sleeps (waitset.c), so they are per message as the rest is.
 */
struct rdmx__data_ops {
	int (*msg_alloc)(rdmx_conn *c, size_t size, struct rdmx_msg *m,
			 int timeout_ms);
	int (*send)(rdmx_conn *c, struct rdmx_msg *m);
	/* rdmx_send_flags(RDMX_SEND_MORE) (issue 10): send @m as send()
	 * does (same checks, returns and handle rules), but the protocol
	 * may hold it to post it with later ones (a chain of work
	 * requests, records coalesced into one WRITE, messages packed into
	 * one SEND). What is held goes out with the next send(), flush(),
	 * a msg_alloc() that would wait, a sends_done() that would wait on
	 * a held send, or the protocol's own bound; close drops it.
	 * Default rdmx__default_send_more: send(), nothing held. */
	int (*send_more)(rdmx_conn *c, struct rdmx_msg *m);
	/* rdmx_send_mr_tok() (issue 9 section 5, zero copy): send @m (from
	 * msg_alloc(), m->len set) as send() does (same checks, returns and
	 * handle rules), but with its bytes taken from @from, registered
	 * with @lkey on this connection's device, instead of from @m's
	 * buffer: the NIC reads them until the send completes. Never held
	 * or packed. Default rdmx__default_send_from: the protocol frames
	 * its messages, so rdmx_send_mr_tok() copies (mem.c, which asks
	 * for the default before it reaches here); the default copies
	 * @from into @m and calls send(). */
	int (*send_from)(rdmx_conn *c, struct rdmx_msg *m, const void *from,
			 uint32_t lkey);
	/* rdmx_sendv() (sendvec.c): send copies of @iov[0..@n-1] (checked:
	 * each within max_msg), in order, as a burst rung before it
	 * returns, each waiting for room within @timeout_ms as msg_alloc()
	 * does. Returns how many were sent (1..@n; the core counts them
	 * afterwards, so the hook must not need rdmx__sends() to advance in
	 * between), or -errno when none was. Default rdmx__default_sendv:
	 * msg_alloc() and send_more()/send() per message (it counts each
	 * send itself as it goes; sendvec.c). */
	int (*sendv)(rdmx_conn *c, const struct iovec *iov, int n,
		     int timeout_ms);
	int (*flush)(rdmx_conn *c, int timeout_ms);
	/* Per-send completions (token.c): take in what completed (one
	 * step, never waiting) and put in *@done how many of the
	 * connection's sends are complete (rdmx.h says what complete means
	 * per protocol); they complete in send order, so *@done counts a
	 * prefix of the sends. send() returning 0 is one send, posted (its
	 * handle spent); a failing send() posted nothing and leaves the
	 * handle valid. Returns > 0 if the step saw anything, 0, or -errno
	 * (the connection down; *@done still counts what completed before).
	 * Default rdmx__default_sends_done: -EOPNOTSUPP, no per-send
	 * completions (rdmx_wait() says so). */
	int (*sends_done)(rdmx_conn *c, uint64_t *done);
	int (*recv)(rdmx_conn *c, struct rdmx_msg *m, int timeout_ms);
	/* rdmx_recv_many(): the first message as recv() takes it (waiting
	 * up to @timeout_ms), then those already in, never waiting, up to
	 * @max (>= 1). Returns the count (>= 1), or -errno when it took
	 * none; an error met after the first message goes in *@later (the
	 * core returns it from the next receive call). Default
	 * rdmx__default_recv_many: recv(), then recv() with timeout 0. */
	int (*recv_many)(rdmx_conn *c, struct rdmx_msg *m, int max,
			 int timeout_ms, int *later);
	int (*release)(rdmx_conn *c, struct rdmx_msg *m);
	/* rdmx_msg_release_many(): release() of each of @m[0..@n-1], all
	 * tried; 0 or the first error. Default rdmx__default_release_many:
	 * release() of each. */
	int (*release_many)(rdmx_conn *c, struct rdmx_msg *m, int n);
	/* Work requests the protocol posts from threads other than the
	 * connection's (srq's credit WRITEs): the core takes their
	 * completions out of the send CQ like its own and hands each here;
	 * 1 if @wc was one. Runs under core locks: atomics only, no group
	 * lock. Default rdmx__default_own_wc: none (0); the core, which
	 * asks once per completion, skips the call to the default
	 * (bench/profile: the call cost send_recv 3 and read 6 instructions
	 * a message, the comparison none). */
	int (*own_wc)(rdmx_conn *c, const struct rdmx__wc *wc);
	/* A receiver that polls memory the peer fills without a completion
	 * here (a ring with notify POLL), about to sleep on the wait set
	 * (waitset.c): publish it, so that the peer adds a doorbell (a
	 * completion here) to what it writes next. 1 when published now:
	 * the caller polls once more before it sleeps (a record may have
	 * landed before the peer could see the word); 0 when already
	 * published for this sleep; -errno. Default
	 * rdmx__default_sleep_announce: receives complete here (0); the
	 * wait set also reads "the default" as "no announce to make". */
	int (*sleep_announce)(rdmx_conn *c);
};

/*
 * The receive side a listener's accepted connections share. The core
 * allocates shared_size bytes of zeroed memory per listener
 * (c->group->shared; 0: none) before the first setup() of an accepted
 * connection; setup() creates the shared resources the first time it sees
 * them unmade, shared_teardown() frees them when the group's last
 * reference goes. group_recv() implements rdmx_listener_recv().
 * group_unlist() runs under the group lock when a member is unlisted
 * (closing): after it the listener must never reach that member again.
 */
struct rdmx__group_ops {
	size_t shared_size;
	/* Default rdmx__default_shared_teardown: nothing shared. */
	void (*shared_teardown)(struct rdmx__group *g);
	/* Default rdmx__default_group_recv: the members in turn, each with
	 * recv(c, m, 0) under the member's lock (group.c). */
	int (*group_recv)(struct rdmx__group *g, struct rdmx_msg *m,
			  int timeout_ms);
	/* Default rdmx__default_group_unlist: nothing to forget. */
	void (*group_unlist)(rdmx_conn *c);
};

/*
 * One connection protocol: its name, its wire id (enum rdmx__proto_id,
 * wire.h) and its three tables.
 *
 * A family of protocols that share one engine (write_simplex, write_magic
 * and write_duplex share write_ring.c) gives each member its own
 * descriptor whose @family points at a const descriptor of what sets the
 * member apart (struct rdmx__wring_variant); the engine reads it from
 * c->proto, as an rdma-core provider family's shared code reads its
 * per-device descriptor. The core never reads @family; NULL outside a
 * family.
 */
struct rdmx_protocol_ops {
	const char *name;
	uint8_t id;
	const void *family;
	const struct rdmx__conn_ops *conn;
	const struct rdmx__data_ops *data;
	const struct rdmx__group_ops *group;
};

/* The core's defaults (see each member above). */
int rdmx__default_check_opts(const struct rdmx_protocol_ops *proto,
			     const struct rdmx_conn_opts *o, uint32_t max_msg);
uint64_t rdmx__default_mem_estimate(const rdmx_conn *c);
int rdmx__default_send_more(rdmx_conn *c, struct rdmx_msg *m);
int rdmx__default_send_from(rdmx_conn *c, struct rdmx_msg *m, const void *from,
			    uint32_t lkey);
int rdmx__default_sendv(rdmx_conn *c, const struct iovec *iov, int n,
			int timeout_ms);
int rdmx__default_sends_done(rdmx_conn *c, uint64_t *done);
int rdmx__default_recv_many(rdmx_conn *c, struct rdmx_msg *m, int max,
			    int timeout_ms, int *later);
int rdmx__default_release_many(rdmx_conn *c, struct rdmx_msg *m, int n);
int rdmx__default_own_wc(rdmx_conn *c, const struct rdmx__wc *wc);
int rdmx__default_sleep_announce(rdmx_conn *c);
void rdmx__default_shared_teardown(struct rdmx__group *g);
int rdmx__default_group_recv(struct rdmx__group *g, struct rdmx_msg *m,
			     int timeout_ms);
void rdmx__default_group_unlist(rdmx_conn *c);

/* The group table of a protocol whose connections share nothing: size 0
 * and the defaults (rdmx_listener_recv() polls the members). */
extern const struct rdmx__group_ops rdmx__group_none;

/* protocol.c: the table of built-in protocols. */
const struct rdmx_protocol_ops *rdmx__protocol_by_name(const char *name);
const struct rdmx_protocol_ops *rdmx__protocol_by_id(uint8_t id);

#endif /* RDMX_CORE_PROTOCOL_H */
