/* SPDX-License-Identifier: MIT */
/*
 * Admission (admit.c): a listener's caps over the connections it accepted
 * (how many, how many from one peer address, the bytes they pin), and the
 * one charge every layer adds a connection's pinned memory to.
 */
#ifndef RDMX_CORE_ADMIT_H
#define RDMX_CORE_ADMIT_H

#include <stdint.h>

#include <rdmx/rdmx.h>

struct rdmx__group;

/*
 * rdmx__conn_charge - charge @bytes more to accepted connection @c before
 * registering them for it (@what names them in the message), within its
 * listener's max_mem. 0 (also when @c was not accepted: a dialer's own
 * memory has no cap), or -ENOBUFS with a message naming the cap, the bytes
 * asked and those in use. The charge is given back when @c goes.
 */
int rdmx__conn_charge(rdmx_conn *c, uint64_t bytes, const char *what);

/* rdmx__conn_uncharge - give back @bytes of @c's charge that it will not
 * pin after all (at most what was charged beside its own buffers). */
void rdmx__conn_uncharge(rdmx_conn *c, uint64_t bytes);

/* rdmx__conn_peer_host - the host (the dialer's address without its
 * port) accepted connection @c counts under in max_conns_per_peer; "" for
 * a dialed one. The one answer to "same host?" for every layer above
 * (KV's read door matches its grants with RPC clients by it). */
const char *rdmx__conn_peer_host(const rdmx_conn *c);

/*
 * rdmx__listener_charge_each - every connection @lis accepts from now on
 * is charged @bytes beside its own buffers, for what the layer above pins
 * for it (rpc rfp's and herd's slots): a dial that would break max_mem is
 * refused at the handshake, its dialer told the cap and the bytes asked.
 */
void rdmx__listener_charge_each(rdmx_listener *lis, uint64_t bytes);

/* For the group (its lock held): the cap @c would break, as -EAGAIN and a
 * message, else 0; then count @c in (@dir 1) or out (@dir -1). */
int rdmx__admit_check(struct rdmx__group *g, const rdmx_conn *c,
		      const struct rdmx_listener_opts *lo);
int rdmx__admit_count(struct rdmx__group *g, rdmx_conn *c, int dir);
void rdmx__admit_fini(struct rdmx__group *g);

#endif /* RDMX_CORE_ADMIT_H */
