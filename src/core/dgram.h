/* SPDX-License-Identifier: MIT */
/*
 * UD and UC queue pairs for the layers above the core (HERD's transport in
 * src/rpc): one QP with its own two CQs on the device of an ep or of an
 * rdmx connection, memory registered for it, the descriptor a peer sends
 * to address or connect it (its wire form read once and validated),
 * SEND/WRITE/receive posts, a look at its CQs, and a bounded wait for a
 * completion whose timeout says what was waited for on which QP. A room
 * above the core reaches the device only through these calls.
 *
 * Descriptor on the wire (RDMX__QP_DESC_WIRE bytes, little-endian):
 *   off len field
 *     0   1 version  (1)
 *     1   1 type     (enum rdmx__dqp_type: 1 UD, 2 UC)
 *     2   1 mtu      (IBV_MTU_*: 1 = 256 .. 5 = 4096)
 *     3   1 reserved (0)
 *     4   4 qpn      (1 .. 0xffffff)
 *     8   4 psn      (0 .. 0xffffff)
 *    12   4 qkey     (UD; 0 for UC)
 *    16   2 lid      (IB; 0 on RoCE)
 *    18  14 reserved (0)
 *    32  16 gid      (network order; all zero: no GRH)
 */
#ifndef RDMX_CORE_DGRAM_H
#define RDMX_CORE_DGRAM_H

#include <stddef.h>
#include <stdint.h>

#include <rdmx/rdmx.h>

#include "fabric.h"

#define RDMX__QP_DESC_WIRE 48
#define RDMX__QP_DESC_VERSION 1

struct rdmx__dgram {
	const struct rdmx__fabric_ops *f;
	struct rdmx__ep *ep;          /* the device it was opened on */
	struct rdmx__dqp *qp;
	struct rdmx__cq *scq, *rcq;
	struct rdmx__dgram_caps dev;  /* the device's (UC, MTU) */
	struct rdmx__qp_desc self;    /* this QP's descriptor */
	uint32_t max_inline;          /* SENDs/WRITEs up to this go inline */
};

/* A @type QP of @depth sends and receives (qkey @qkey for UD) on the
 * device of @ep, with its own CQs. UC on a device without it: -ENOTSUP. */
int rdmx__dgram_open(const struct rdmx__fabric_ops *f, struct rdmx__ep *ep,
		     enum rdmx__dqp_type type, uint32_t depth, uint32_t qkey,
		     struct rdmx__dgram **out);
/* The same on the device of the rdmx connection @c (which must outlive
 * the QP). */
int rdmx__dgram_open_on(rdmx_conn *c, enum rdmx__dqp_type type, uint32_t depth,
			uint32_t qkey, struct rdmx__dgram **out);
void rdmx__dgram_close(struct rdmx__dgram *g);

/* Register @len bytes at @buf with @access (RDMX__ACCESS_*) on @g's
 * device, for @g and every QP opened on that device; deregister before
 * @g is closed. */
int rdmx__dgram_reg(struct rdmx__dgram *g, void *buf, size_t len, int access,
		    struct rdmx__mr **out);
void rdmx__dgram_dereg(struct rdmx__dgram *g, struct rdmx__mr *mr);

/* The descriptor in its wire form; and back, from bytes a peer sent:
 * read once, every field range-checked (-EINVAL with the field named). */
void rdmx__qp_desc_encode(const struct rdmx__qp_desc *d,
			  uint8_t wire[RDMX__QP_DESC_WIRE]);
int rdmx__qp_desc_decode(const void *wire, size_t len, enum rdmx__dqp_type want,
			 struct rdmx__qp_desc *out);

/* A descriptor @c's peer sent as its own QP's: its GID must be the GID
 * of @c's peer (the address the control connection came from), else
 * -EPERM naming both (a client may not name a QP of another host). A
 * device that knows no peer GID (IB without GRH) passes. */
int rdmx__qp_desc_of_peer(rdmx_conn *c, const struct rdmx__qp_desc *d);

/* UC: connect to the peer's decoded descriptor (RTR, RTS). */
int rdmx__uc_connect(struct rdmx__dgram *g, const struct rdmx__qp_desc *peer);
/* UC: WRITE @len bytes at @buf (@lkey) to @raddr/@rkey on the peer. */
int rdmx__uc_write(struct rdmx__dgram *g, const void *buf, uint32_t len,
		   uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t wr_id);

/* UD: an address handle for the peer's decoded descriptor. */
int rdmx__ud_ah(struct rdmx__dgram *g, const struct rdmx__qp_desc *peer,
		struct rdmx__ah **out);
void rdmx__ud_ah_free(struct rdmx__dgram *g, struct rdmx__ah *ah);
/* UD: SEND @len bytes (at most dev.ud_max, else -EMSGSIZE) to @peer. */
int rdmx__ud_send(struct rdmx__dgram *g, struct rdmx__ah *ah,
		  const struct rdmx__qp_desc *peer, const void *buf,
		  uint32_t len, uint32_t lkey, uint64_t wr_id);
/* Post a receive of @len bytes; on UD the payload lands at @buf +
 * RDMX__GRH_LEN, so @len must cover the GRH too. */
int rdmx__dgram_recv(struct rdmx__dgram *g, void *buf, uint32_t len,
		     uint32_t lkey, uint64_t wr_id);

/* One look at the receive (@recv) or send CQ: 1 with a completion in
 * @wc (its status unchecked), 0 for none, or -errno. */
int rdmx__dgram_poll(struct rdmx__dgram *g, int recv, struct rdmx__wc *wc);

/* One completion of the receive (@recv) or send CQ within @timeout_ms
 * (>= 0: every wait has a bound); -ETIMEDOUT names @what and the QP; an
 * error completion is -EIO. */
int rdmx__dgram_wait(struct rdmx__dgram *g, int recv, int timeout_ms,
		     const char *what, struct rdmx__wc *wc);

#endif /* RDMX_CORE_DGRAM_H */
