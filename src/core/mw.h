/* SPDX-License-Identifier: MIT */
/*
 * Memory a server exports to ONE client: the one mechanism every room
 * uses to hand a peer a remote key (rpc herd's and rfp's slots).
 *
 * An export is a remote key to [addr, addr+len) of a registration with
 * exactly the rights the peer needs, valid only over the queue pair of
 * that client where the device has memory windows: a type 2 window bound
 * to the client's QP (RDMX__ISO_WINDOW). Another client's QP presenting
 * the key, a key of a revoked export, an access beyond the range or the
 * rights: the device refuses it (RC: the requester's WR completes with a
 * remote access error and its connection fails; UC: the WRITE is
 * dropped). A device without windows gets the region's own key
 * (RDMX__ISO_RIGHTS): exact rights, but valid on every QP of the shared
 * protection domain; the caller says which one ran (rdmx__iso_name).
 * Revoke (deallocate the window) when the client's connection closes,
 * before its QP and the registration go. Over a UC QP: rdmx__export_dgram
 * here; over an RC connection: rdmx__export_conn (onesided.h), on the
 * same first half (rdmx__export_begin).
 */
#ifndef RDMX_CORE_MW_H
#define RDMX_CORE_MW_H

#include <stddef.h>
#include <stdint.h>

#include "dgram.h"
#include "fabric.h"

enum rdmx__iso {
	RDMX__ISO_WINDOW = 1, /* a window bound to the client's QP */
	RDMX__ISO_RIGHTS = 2, /* no windows: the region's key, exact rights */
};

struct rdmx__export {
	const struct rdmx__fabric_ops *f;
	struct rdmx__mr *mr;          /* the registration: with a window, local
				       * rights only (its own rkey opens
				       * nothing); without, exactly @access */
	struct rdmx__mw *mw;          /* NULL under RDMX__ISO_RIGHTS */
	struct rdmx__mr *under;       /* what the window is bound on: @mr, or
				       * a registration the caller keeps
				       * (rdmx__export_window; @mr NULL) */
	uint32_t rkey;                /* what the peer gets */
	enum rdmx__iso how;
};

/* An export kept until its connection closes or its registration goes,
 * whichever comes first (rdmx_mr_export's): on two lists, its
 * connection's (RDMX__KEPT_BY_CONN) and its registration's
 * (RDMX__KEPT_BY_MR), under one lock of this module. */
enum { RDMX__KEPT_BY_CONN, RDMX__KEPT_BY_MR };

struct rdmx__export_node {
	struct rdmx__export e;
	struct {
		struct rdmx__export_node *next, **prev;
	} l[2];
};

/*
 * Register @len bytes at @addr on @g's device and export them to the peer
 * of the UC QP @g alone, with exactly @access (RDMX__ACCESS_WRITE, READ,
 * ATOMIC); waits up to @timeout_ms for the bind. The registration has
 * local write (out->mr->lkey serves local work requests). 0 with @out
 * filled, or -errno (nothing left registered).
 */
int rdmx__export_dgram(struct rdmx__dgram *g, void *addr, size_t len, int access,
		       int timeout_ms, struct rdmx__export *out);

/* The first half of an export on @ep's device, for the exports over other
 * QPs (rdmx__export_conn, onesided.c): without windows, done (the
 * registration's key with exactly @access, how RDMX__ISO_RIGHTS); with
 * windows, a window allocated and the memory registered for binds (how
 * RDMX__ISO_WINDOW; the caller binds it and takes mw->rkey). */
int rdmx__export_begin(const struct rdmx__fabric_ops *f, struct rdmx__ep *ep, void *addr,
		       size_t len, int access, struct rdmx__export *out);

/* A window on @under, a registration the caller keeps (made with
 * RDMX__ACCESS_MW_BIND on a device with windows: rdmx_mr_reg's, mem.c):
 * how RDMX__ISO_WINDOW, out->mr NULL, so revoking leaves @under alone;
 * the caller binds it and takes mw->rkey. */
int rdmx__export_window(const struct rdmx__fabric_ops *f, struct rdmx__ep *ep,
			struct rdmx__mr *under, struct rdmx__export *out);

/* Keep a copy of @e on a connection's list @by_conn and a registration's
 * @by_mr (-ENOMEM: not kept, the caller revokes). */
int rdmx__export_keep(struct rdmx__export_node **by_conn, struct rdmx__export_node **by_mr,
		      const struct rdmx__export *e);

/* Revoke every export of @list (a connection's or a registration's) and
 * take each off both its lists: a connection closing, a registration
 * going. */
void rdmx__export_revoke_all(struct rdmx__export_node **list);

/* Revoke @e: its key is refused from now on (the window deallocated, the
 * registration undone; the memory stays the caller's). Idempotent; a
 * zeroed export is a no-op. */
void rdmx__export_revoke(struct rdmx__export *e);

/* Which mechanism the device of @ep allows (a window made and unmade). */
enum rdmx__iso rdmx__iso_of(const struct rdmx__fabric_ops *f, struct rdmx__ep *ep);

/* "memory windows bound to the client's QP" / "exact rights only ...". */
const char *rdmx__iso_name(enum rdmx__iso how);

#endif /* RDMX_CORE_MW_H */
