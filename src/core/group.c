/* SPDX-License-Identifier: MIT */
/*
 * Listener groups: the connections accepted on one listener, the receive
 * resources they may share (srq, write_atomic), and rdmx_listener_recv().
 * See struct rdmx__group in conn.h for the lifetime rules.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>

#include "admit.h"
#include "conn.h"
#include "errors.h"
#include "group.h"
#include "live.h"
#include "msg.h"
#include "protocol.h"
#include "wait.h"
#include "waitset.h"


int rdmx__group_create(const struct rdmx_protocol_ops *proto,
		       struct rdmx__group **out)
{
	struct rdmx__group *g = calloc(1, sizeof(*g));

	if (!g)
		goto fail;
	if (proto->group->shared_size) {
		g->shared = calloc(1, proto->group->shared_size);
		if (!g->shared)
			goto free_group;
	}
	if (pthread_mutex_init(&g->lock, NULL))
		goto free_shared;
	if (pthread_cond_init(&g->unheld, NULL))
		goto destroy_lock;
	g->proto = proto;
	g->refs = 1;
	g->epfd = g->kick = -1;
	*out = g;
	return 0;

destroy_lock:
	pthread_mutex_destroy(&g->lock);
free_shared:
	free(g->shared);
free_group:
	free(g);
fail:
	return rdmx__fail(-ENOMEM, "out of memory for a listener group");
}

void rdmx__group_put(struct rdmx__group *g)
{
	unsigned left;

	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	left = --g->refs;
	pthread_mutex_unlock(&g->lock);
	if (left)
		return;
	g->proto->group->shared_teardown(g);
	rdmx__group_ws_fini(g);
	rdmx__admit_fini(g);
	pthread_cond_destroy(&g->unheld);
	pthread_mutex_destroy(&g->lock);
	free(g->conns);
	free(g->shared);
	free(g);
}

void rdmx__group_join(struct rdmx__group *g, rdmx_conn *c)
{
	pthread_mutex_lock(&g->lock);
	g->refs++;
	pthread_mutex_unlock(&g->lock);
	c->group = g;
}

int rdmx__group_admit(struct rdmx__group *g, rdmx_conn *c,
		      const struct rdmx_listener_opts *lo)
{
	int rc;

	pthread_mutex_lock(&g->lock);
	rc = rdmx__admit_check(g, c, lo);
	if (!rc)
		rc = rdmx__admit_count(g, c, 1);
	if (!rc) {
		g->refs++;
		c->admitted = 1;
		c->group = g;
	}
	pthread_mutex_unlock(&g->lock);
	return rc;
}

int rdmx__group_add(struct rdmx__group *g, rdmx_conn *c)
{
	int rc = 0;

	pthread_mutex_lock(&g->lock);
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 8;
		rdmx_conn **v = realloc(g->conns, cap * sizeof(*v));

		if (!v) {
			rc = rdmx__fail(-ENOMEM, "out of memory listing a connection");
			goto unlock;
		}
		g->conns = v;
		g->cap = cap;
	}
	g->conns[g->n++] = c;
unlock:
	pthread_mutex_unlock(&g->lock);
	return rc;
}

void rdmx__group_unlist(rdmx_conn *c)
{
	struct rdmx__group *g = c->group;

	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	for (size_t i = 0; i < g->n; i++) {
		if (g->conns[i] != c)
			continue;
		g->conns[i] = g->conns[--g->n];
		g->proto->group->group_unlist(c);
		break;
	}
	if (c->admitted) {
		rdmx__admit_count(g, c, -1);
		c->admitted = 0;
	}
	while (c->holds)
		pthread_cond_wait(&g->unheld, &g->lock);
	rdmx__group_unwatch(g, c);
	pthread_mutex_unlock(&g->lock);
}

void rdmx__group_leave(rdmx_conn *c)
{
	struct rdmx__group *g = c->group;

	if (!g)
		return;
	rdmx__group_unlist(c);
	c->group = NULL;
	rdmx__group_put(g);
}

/* The member at the cursor's @i-th position, held (member_drop() it), or
 * NULL past the end. A held member is not freed under the caller. */
static rdmx_conn *member_at(struct rdmx__group *g, size_t i)
{
	rdmx_conn *c = NULL;

	pthread_mutex_lock(&g->lock);
	if (i < g->n) {
		c = g->conns[(g->next + i) % g->n];
		c->holds++;
	}
	pthread_mutex_unlock(&g->lock);
	return c;
}

static void member_drop(struct rdmx__group *g, rdmx_conn *c)
{
	pthread_mutex_lock(&g->lock);
	if (!--c->holds)
		pthread_cond_broadcast(&g->unheld);
	pthread_mutex_unlock(&g->lock);
}

/* recv(c, m, 0) unless another thread is using @c: then -EAGAIN. */
static int member_recv(rdmx_conn *c, struct rdmx_msg *m)
{
	int rc;

	if (pthread_mutex_trylock(&c->lock))
		return -EAGAIN;
	rc = c->data_ops->recv(c, m, 0);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

static void advance_cursor(struct rdmx__group *g, size_t by)
{
	pthread_mutex_lock(&g->lock);
	g->next = g->n ? (g->next + by) % g->n : 0;
	pthread_mutex_unlock(&g->lock);
}

/*
 * One round over the members: 0 with a message, -EAGAIN when nobody had
 * one, -ENOTCONN when every member is gone, or a member's error (once).
 */
static int poll_round(struct rdmx__group *g, struct rdmx_msg *m)
{
	int live = 0, rc;
	rdmx_conn *c;

	for (size_t i = 0; (c = member_at(g, i)); i++) {
		if (c->reset_reported) {
			member_drop(g, c);
			continue;
		}
		live = 1;
		rc = member_recv(c, m);
		if (rc == -EAGAIN) {
			member_drop(g, c);
			continue;
		}
		advance_cursor(g, i + 1);
		if (rc) {
			c->reset_reported = 1;
			rdmx__msg_set(m, c, RDMX__MSG_CONN, 0);
		}
		member_drop(g, c);
		return rc;
	}
	return live ? -EAGAIN : rdmx__fail(-ENOTCONN, "no open connection on this listener");
}

void rdmx__group_check_peers(struct rdmx__group *g)
{
	rdmx_conn *c;

	for (size_t i = 0; (c = member_at(g, i)); i++) {
		/* under the member's lock (the keepalive's state is the
		 * connection's); a member another thread holds is checked by
		 * that thread's own waits */
		if (!c->reset_reported && !pthread_mutex_trylock(&c->lock)) {
			rdmx__conn_check_peer(c);
			pthread_mutex_unlock(&c->lock);
		}
		member_drop(g, c);
	}
}

int rdmx__group_shut(struct rdmx__group *g)
{
	if (__atomic_load_n(&g->shut, __ATOMIC_ACQUIRE))
		return rdmx__fail(-ESHUTDOWN, "the listener was shut down");
	return 0;
}

int rdmx__group_recv(struct rdmx__group *g, struct rdmx_msg *m,
		     int timeout_ms)
{
	return g->proto->group->group_recv(g, m, timeout_ms);
}

/* The members in turn (protocol.h), under the listener's wait mode. */
int rdmx__default_group_recv(struct rdmx__group *g, struct rdmx_msg *m,
			     int timeout_ms)
{
	struct rdmx__deadline d;
	int rc;

	rdmx__deadline_start(&d, timeout_ms);
	rdmx__deadline_mode(&d, g->wait_mode, g->spin_us);
	for (;;) {
		rc = poll_round(g, m);
		if (rc != -EAGAIN)
			return rc;
		if (d.once)
			return rdmx__again();
		if (!rdmx__wait_idle(&d))
			continue;
		rdmx__group_check_peers(g);
		rc = rdmx__group_shut(g);
		if (rc)
			return rc;
		rc = rdmx__deadline_passed(&d);
		if (rc)
			return rc;
		rdmx__group_park(g, -1, &d);
	}
}

void rdmx__default_shared_teardown(struct rdmx__group *g)
{
	(void)g;
}

void rdmx__default_group_unlist(rdmx_conn *c)
{
	(void)c;
}

const struct rdmx__group_ops rdmx__group_none = {
	.shared_size = 0,
	.shared_teardown = rdmx__default_shared_teardown,
	.group_recv = rdmx__default_group_recv,
	.group_unlist = rdmx__default_group_unlist,
};

/* Arm every member for a sleep on @g's set: 1 to poll again, 0 to sleep
 * @*bound_ms, -errno for a timed park. */
static int members_arm(struct rdmx__group *g, int *bound_ms)
{
	int fresh = 0, rc = 0;
	rdmx_conn *c;

	for (size_t i = 0; !rc && (c = member_at(g, i)); i++) {
		rc = rdmx__group_arm(g, c);
		member_drop(g, c);
		if (rc == -EBUSY && *bound_ms > 1)
			*bound_ms = 1; /* its holder may take the event that was ours */
		fresh |= rc > 0;
		if (rc == -EBUSY || rc > 0)
			rc = 0;
	}
	return rc ? rc : fresh;
}

static void members_rest(struct rdmx__group *g)
{
	rdmx_conn *c;

	for (size_t i = 0; (c = member_at(g, i)); i++) {
		rdmx__group_rest(c);
		member_drop(g, c);
	}
}

void rdmx__group_park(struct rdmx__group *g, int fd, struct rdmx__deadline *d)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int rc, bound;

	if (!d->parking)
		return;
	/* adaptive: the first park is a timed one, as rdmx__conn_park's */
	if (d->mode == RDMX_WAIT_ADAPTIVE && !d->park_us) {
		rdmx__wait_park(d);
		return;
	}
	if (p.fd < 0)
		p.fd = rdmx__group_fd(g);
	bound = rdmx__wait_sleep_bound_ms(d);
	rc = p.fd < 0 ? p.fd : members_arm(g, &bound);
	if (rc < 0) {
		rdmx__wait_park(d); /* a member with no fd to wake us */
	} else if (rc == 0) { /* else poll again, kicks on */
		(void)poll(&p, 1, bound);
		members_rest(g);
	}
}
