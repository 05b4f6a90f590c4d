/* SPDX-License-Identifier: MIT */
/*
 * Admission: what a listener lets one client take. A connection is
 * counted from its accept until it is freed: in the listener's max_conns,
 * in max_conns_per_peer under its dialer's address (the address without
 * the port: one host), and in max_mem with its charge, the bytes it pins.
 * The charge starts as the protocol's estimate of the connection's own
 * buffers plus what the layer above said it pins for every connection
 * (rdmx__listener_charge_each: rpc rfp's and herd's slots), checked at the
 * handshake so a refused dialer is told why; registrations made later for
 * one connection are added with rdmx__conn_charge() before they are made.
 * All of it is given back at once when the connection goes.
 *
 * The counts live in the group (conn.h) under its lock: they outlive the
 * listener, as its connections do.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "conn.h"
#include "errors.h"

struct rdmx__peer_count {
	char host[RDMX__PEER_HOST_LEN];
	unsigned n;
};

/* The peer's count in @g, or NULL. */
static struct rdmx__peer_count *peer_find(struct rdmx__group *g, const char *host)
{
	for (size_t i = 0; i < g->npeers; i++)
		if (!strcmp(g->peers[i].host, host))
			return &g->peers[i];
	return NULL;
}

/* The peer's count in @g, made at 0 if new; NULL out of memory. */
static struct rdmx__peer_count *peer_get(struct rdmx__group *g, const char *host)
{
	struct rdmx__peer_count *p = peer_find(g, host);

	if (p)
		return p;
	if (g->npeers == g->peers_cap) {
		size_t cap = g->peers_cap ? 2 * g->peers_cap : 8;

		p = realloc(g->peers, cap * sizeof(*p));
		if (!p)
			return NULL;
		g->peers = p;
		g->peers_cap = cap;
	}
	p = &g->peers[g->npeers++];
	memset(p, 0, sizeof(*p));
	memcpy(p->host, host, strnlen(host, sizeof(p->host) - 1));
	return p;
}

static uint64_t mem_left(const struct rdmx__group *g, uint64_t cap)
{
	return cap - (g->mem < cap ? g->mem : cap);
}

int rdmx__admit_check(struct rdmx__group *g, const rdmx_conn *c,
		      const struct rdmx_listener_opts *lo)
{
	const struct rdmx__peer_count *p = peer_find(g, c->peer_host);

	g->max_mem = lo->max_mem;
	if (lo->max_conns && g->admitted >= lo->max_conns)
		return rdmx__fail(-EAGAIN, "listener is full: %u connections (max_conns %u)",
				  g->admitted, lo->max_conns);
	if (lo->max_conns_per_peer && p && p->n >= lo->max_conns_per_peer)
		return rdmx__fail(-EAGAIN, "listener is full for %s: %u connections from "
				  "that address (max_conns_per_peer %u)", c->peer_host,
				  p->n, lo->max_conns_per_peer);
	if (lo->max_mem && c->mem_charge > mem_left(g, lo->max_mem))
		return rdmx__fail(-EAGAIN, "listener memory cap: a connection asks for %llu "
				  "bytes, %llu of max_mem %llu are in use",
				  (unsigned long long)c->mem_charge,
				  (unsigned long long)g->mem,
				  (unsigned long long)lo->max_mem);
	return 0;
}

int rdmx__admit_count(struct rdmx__group *g, rdmx_conn *c, int dir)
{
	struct rdmx__peer_count *p = dir > 0 ? peer_get(g, c->peer_host)
					     : peer_find(g, c->peer_host);

	if (dir > 0 && !p)
		return rdmx__fail(-ENOMEM, "out of memory counting a peer's connections");
	if (dir > 0) {
		p->n++;
		g->admitted++;
		g->mem += c->mem_charge;
		return 0;
	}
	if (p && !--p->n)
		*p = g->peers[--g->npeers];
	g->admitted--;
	g->mem -= c->mem_charge;
	return 0;
}

void rdmx__admit_fini(struct rdmx__group *g)
{
	free(g->peers);
	g->peers = NULL;
	g->npeers = g->peers_cap = 0;
}

int rdmx__conn_charge(rdmx_conn *c, uint64_t bytes, const char *what)
{
	struct rdmx__group *g = c ? c->group : NULL;
	int rc = 0;

	if (!g || !c->admitted)
		return 0;
	pthread_mutex_lock(&g->lock);
	if (c->admitted && g->max_mem && bytes > mem_left(g, g->max_mem))
		rc = rdmx__failo(&c->err, -ENOBUFS, "listener memory cap: %s of a connection "
				 "asks for %llu bytes, %llu of max_mem %llu are in use", what,
				 (unsigned long long)bytes, (unsigned long long)g->mem,
				 (unsigned long long)g->max_mem);
	else if (c->admitted) {
		c->mem_charge += bytes;
		g->mem += bytes;
	}
	pthread_mutex_unlock(&g->lock);
	return rc;
}

void rdmx__conn_uncharge(rdmx_conn *c, uint64_t bytes)
{
	struct rdmx__group *g = c ? c->group : NULL;

	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	if (c->admitted) {
		bytes = bytes < c->mem_charge ? bytes : c->mem_charge;
		c->mem_charge -= bytes;
		g->mem -= bytes;
	}
	pthread_mutex_unlock(&g->lock);
}

const char *rdmx__conn_peer_host(const rdmx_conn *c)
{
	return c ? c->peer_host : "";
}

void rdmx__listener_charge_each(rdmx_listener *lis, uint64_t bytes)
{
	if (lis)
		lis->charge_each = bytes;
}
