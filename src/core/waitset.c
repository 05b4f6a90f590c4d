/* SPDX-License-Identifier: MIT */
/*
 * Sleeping in the kernel: a connection's wait set, the pollable fds of
 * connections (rdmx_conn_fd) and listeners (rdmx_listener_fd), and the
 * listener-level sleep on all of a listener's members at once (below:
 * rdmx__group_park, whose members' wait sets sit in the group's epoll set);
 * and rdmx__conn_wait, the one wait step (wait.c) with a connection's
 * checks, the step every wait on a connection takes.
 *
 * A protocol's setup() names the CQs its waits depend on
 * (rdmx__conn_watch): its send CQ, and the CQ its receives complete on
 * (RDMX__WATCH_RECV). The wait set is one epoll fd holding those CQs'
 * completion channels and the rdma_cm channel of the connection's ep (a
 * disconnect), made on first use; it is what rdmx_conn_fd() returns and
 * what a parked wait sleeps on.
 *
 * A park (rdmx__conn_park, from rdmx__conn_wait) on a
 * connection whose receives complete on a watched CQ:
 *  1. arms every watched CQ (cq_arm); if one was armed only now, it
 *     returns without sleeping: the caller polls again, as a completion
 *     may have landed between its empty poll and the arm;
 *  2. else sleeps in poll() on the epoll fd until a completion or a
 *     rdma_cm event comes, bounded by the deadline and by
 *     rdmx__wait_backstop_ms (the wait's slow checks - liveness,
 *     keepalives, shutdown - run at least that often).
 * The next arm takes the notification that woke it (and acknowledges it).
 *
 * A receiver that polls memory (the ring protocols with notify POLL, OFF
 * or REV, direct_write) gets no completion for a message: before
 * sleeping, the park has the protocol publish the sleep
 * (ops->sleep_announce; the peer then adds a doorbell SEND) and polls
 * once more; so does a zero-timeout poll of rdmx_conn_fd's user
 * (rdmx__conn_once), whose fd the doorbell's completion makes readable.
 * A wait on memory the peer writes or that is READ (srq's credits, the
 * room of a sender with ack READ, write_atomic's and buffered_read's
 * senders: d->timed) parks in timed steps (rdmx__wait_park: 16 us
 * doubling to 4 ms), see enum rdmx_wait_mode in rdmx.h. Adaptive waits
 * make their first park a timed one (the wake-lateness measure).
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

#include "conn.h"
#include "errors.h"
#include "fabric.h"
#include "live.h"
#include "protocol.h"
#include "wait.h"
#include "waitset.h"

int rdmx__wait_backstop_ms = RDMX__WAIT_BACKSTOP_MS;

/* A receiver that polls memory naps (timed parks: 16, 32, 64, 128 us)
 * before it publishes a sleep: publishing costs it a round trip and the
 * peer a doorbell and a wake-up, which a message that comes within a
 * quarter millisecond (a ping-pong's reply) does not need. */
#define NAP_BEFORE_ANNOUNCE_US 128

void rdmx__ws_init(struct rdmx__waitset *w)
{
	memset(w, 0, sizeof(*w));
	w->epfd = -1;
	w->kick = -1;
}

void rdmx__ws_fini(struct rdmx__waitset *w)
{
	if (w->epfd >= 0)
		close(w->epfd);
	if (w->kick >= 0)
		close(w->kick);
	w->epfd = w->kick = -1;
}

void rdmx__conn_watch(rdmx_conn *c, struct rdmx__cq *cq, unsigned flags)
{
	struct rdmx__waitset *w = &c->ws;

	if (flags & RDMX__WATCH_RECV)
		w->recv_cq = 1;
	for (int i = 0; i < w->ncq; i++)
		if (w->cq[i] == cq)
			return;
	if (w->ncq < RDMX__WATCH_MAX)
		w->cq[w->ncq++] = cq;
}

static int ep_add(int epfd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	if (fd < 0 || !epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) || errno == EEXIST)
		return 0;
	return rdmx__fail(-errno, "adding fd %d to a wait set: %s", fd, strerror(errno));
}

/* A new epoll fd holding a new kick eventfd (in *@kick): the fd, or
 * -errno with nothing left open. */
static int ep_make_kicked(int *kick)
{
	int fd, k, rc;

	fd = epoll_create1(EPOLL_CLOEXEC);
	if (fd < 0)
		return rdmx__fail(-errno, "epoll_create1: %s", strerror(errno));
	k = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	rc = k < 0 ? rdmx__fail(-errno, "eventfd: %s", strerror(errno)) : ep_add(fd, k);
	if (rc) {
		if (k >= 0)
			close(k);
		close(fd);
		return rc;
	}
	*kick = k;
	return fd;
}

/* Wait sets are made once, under this lock (a first use is rare). */
static pthread_mutex_t make_lock = PTHREAD_MUTEX_INITIALIZER;

/* Make @c's epoll fd with the kick eventfd, the rdma_cm channel and the
 * watched CQs' channels. Under make_lock. */
static int ws_make(rdmx_conn *c)
{
	struct rdmx__waitset *w = &c->ws;
	int fd, kick, rc;

	fd = ep_make_kicked(&kick);
	if (fd < 0)
		return fd;
	rc = ep_add(fd, c->f->ep_fd ? c->f->ep_fd(c->ep) : -1);
	for (int i = 0; !rc && i < w->ncq; i++)
		rc = ep_add(fd, c->f->cq_fd(w->cq[i]));
	if (rc) {
		close(kick);
		close(fd);
		return rc;
	}
	__atomic_store_n(&w->kick, kick, __ATOMIC_RELEASE);
	__atomic_store_n(&w->epfd, fd, __ATOMIC_RELEASE);
	return fd;
}

/* @c's epoll fd, made on first use. */
static int ws_fd(rdmx_conn *c)
{
	int fd = __atomic_load_n(&c->ws.epfd, __ATOMIC_ACQUIRE);

	if (fd >= 0)
		return fd;
	pthread_mutex_lock(&make_lock);
	fd = c->ws.epfd >= 0 ? c->ws.epfd : ws_make(c);
	pthread_mutex_unlock(&make_lock);
	return fd;
}

void rdmx__conn_kick(rdmx_conn *c)
{
	int kick;

	if (!__atomic_load_n(&c->ws.sleeping, __ATOMIC_SEQ_CST))
		return;
	kick = __atomic_load_n(&c->ws.kick, __ATOMIC_ACQUIRE);
	if (kick >= 0)
		(void)!write(kick, &(uint64_t){ 1 }, 8);
}

/* Arm every watched CQ: 1 if one was armed only now or a kick came (poll
 * again before sleeping), 0 if all were armed already, or -errno. */
static int ws_arm(rdmx_conn *c)
{
	struct rdmx__waitset *w = &c->ws;
	int fresh = 0, rc;
	uint64_t n;

	if (w->kick >= 0 && read(w->kick, &n, sizeof(n)) == (ssize_t)sizeof(n))
		fresh = 1;

	for (int i = 0; i < w->ncq; i++) {
		rc = c->f->cq_arm(w->cq[i]);
		if (rc < 0)
			return rc;
		fresh |= rc;
	}
	return fresh;
}

/* After ws_arm() said @fresh: have a receiver that polls memory publish
 * its sleep - even after a fresh arm: a protocol whose poll posts a verb
 * (buffered_read's tail READ) fires its CQ at every poll and stops
 * polling once it published. 1: poll again, 0: sleep, -errno. */
static int arm_announce(rdmx_conn *c, int fresh)
{
	int rc = c->data_ops->sleep_announce(c);

	return rc < 0 ? rc : fresh | rc;
}

/* 1 if a park of @d on @c may sleep on the wait set. */
static int ws_sleeps(const rdmx_conn *c, const struct rdmx__deadline *d)
{
	return c->ws.recv_cq && !d->timed && c->f->cq_arm;
}

/* The park's sleep bound: the deadline, the backstop. */
int rdmx__wait_sleep_bound_ms(struct rdmx__deadline *d)
{
	int left = rdmx__deadline_left_ms(d), cap = rdmx__wait_backstop_ms;

	return left < cap ? left : cap;
}

void rdmx__conn_park(rdmx_conn *c, struct rdmx__deadline *d)
{
	struct pollfd p = { .events = POLLIN };
	int rc;

	if (!d->parking)
		return;
	/* adaptive: a wait's first park is a short timed one, which keeps
	 * the measure of how late sleeps wake (the spin budget, wait.c)
	 * current; without it the spin would shrink to spin_us on a
	 * platform that wakes late, and a ping-pong would sleep every time */
	if (!ws_sleeps(c, d) || (d->mode == RDMX_WAIT_ADAPTIVE && !d->park_us) ||
	    (c->data_ops->sleep_announce != rdmx__default_sleep_announce &&
	     d->park_us < NAP_BEFORE_ANNOUNCE_US)) {
		rdmx__wait_park(d);
		return;
	}
	p.fd = ws_fd(c);
	if (p.fd >= 0 && !__atomic_exchange_n(&c->ws.sleeping, 1, __ATOMIC_SEQ_CST))
		return; /* poll once more: a kick before this was not sent */
	rc = p.fd < 0 ? p.fd : ws_arm(c);
	if (rc < 0) { /* no channel: sleep as the ring protocols do */
		rdmx__wait_park(d);
		return;
	}
	rc = arm_announce(c, rc);
	if (rc == 0)
		(void)poll(&p, 1, rdmx__wait_sleep_bound_ms(d));
	if (rc == 0)
		__atomic_store_n(&c->ws.sleeping, 0, __ATOMIC_SEQ_CST);
}

int rdmx__conn_once(rdmx_conn *c)
{
	int rc;

	if (!__atomic_load_n(&c->ws.user, __ATOMIC_ACQUIRE) || !c->ws.recv_cq)
		return rdmx__again();
	rdmx__conn_check_peer(c); /* takes a disconnect off the rdma_cm fd */
	if (c->state == RDMX__CONN_DOWN)
		return 0; /* the caller's next poll reports it */
	if (!__atomic_exchange_n(&c->ws.sleeping, 1, __ATOMIC_SEQ_CST))
		return 0; /* kicks are sent from now on: poll once more */
	rc = ws_arm(c);
	if (rc >= 0)
		rc = arm_announce(c, rc);
	if (rc < 0) /* down: the caller's next poll reports it */
		return c->state == RDMX__CONN_DOWN ? 0 : rdmx__again();
	return rc ? 0 : rdmx__again();
}

/**
 * rdmx_conn_fd - see rdmx.h.
 */
int rdmx_conn_fd(rdmx_conn *c)
{
	int fd;

	if (!c)
		return rdmx__fail(-EINVAL, "rdmx_conn_fd: connection is required");
	if (!c->ws.recv_cq || !c->f->cq_arm)
		return rdmx__failo(&c->err, -EOPNOTSUPP,
				   "%s: no completion wakes this connection's receiver "
				   "(it polls memory without a doorbell)", c->proto->name);
	fd = ws_fd(c);
	if (fd < 0)
		return rdmx__keep(&c->err, fd);
	__atomic_store_n(&c->ws.user, 1, __ATOMIC_RELEASE);
	return fd;
}

/* Make the listener's epoll fd: its rdma_cm channel and those of the
 * handshakes in flight. Under make_lock. */
static int lis_make(rdmx_listener *lis)
{
	const struct rdmx__fabric_ops *f = lis->ctx->fops;
	int fd, rc;

	if (!f->ep_fd)
		return rdmx__fail(-EOPNOTSUPP, "the %s fabric has no event fds", f->name);
	fd = epoll_create1(EPOLL_CLOEXEC);
	if (fd < 0)
		return rdmx__fail(-errno, "epoll_create1: %s", strerror(errno));
	rc = ep_add(fd, f->ep_fd(lis->ep));
	for (size_t i = 0; !rc && i < lis->npending; i++)
		rc = ep_add(fd, f->ep_fd(lis->pending[i].c->ep));
	if (rc) {
		close(fd);
		return rc;
	}
	__atomic_store_n(&lis->epfd, fd, __ATOMIC_RELEASE);
	return fd;
}

void rdmx__lis_watch(rdmx_listener *lis, rdmx_conn *c, int on)
{
	const struct rdmx__fabric_ops *f = lis->ctx->fops;
	int epfd = __atomic_load_n(&lis->epfd, __ATOMIC_ACQUIRE);
	int fd = f->ep_fd && c->ep ? f->ep_fd(c->ep) : -1;

	if (epfd < 0 || fd < 0)
		return;
	if (on)
		(void)ep_add(epfd, fd);
	else
		(void)epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
}

/**
 * rdmx_listener_fd - see rdmx.h.
 */
int rdmx_listener_fd(rdmx_listener *lis)
{
	int fd;

	if (!lis)
		return rdmx__fail(-EINVAL, "rdmx_listener_fd: listener is required");
	pthread_mutex_lock(&make_lock);
	fd = lis->epfd >= 0 ? lis->epfd : lis_make(lis);
	pthread_mutex_unlock(&make_lock);
	return fd < 0 ? rdmx__keep(&lis->err, fd) : fd;
}

/* ------------------------------------------------- listener-level sleeps */

/* Make @g's epoll set with its kick eventfd. Under make_lock. */
static int group_make(struct rdmx__group *g)
{
	int fd, kick;

	fd = ep_make_kicked(&kick);
	if (fd < 0)
		return fd;
	__atomic_store_n(&g->kick, kick, __ATOMIC_RELEASE);
	if (__atomic_load_n(&g->shut, __ATOMIC_ACQUIRE))
		rdmx__group_kick(g);
	__atomic_store_n(&g->epfd, fd, __ATOMIC_RELEASE);
	return fd;
}

static int group_fd_locked(struct rdmx__group *g)
{
	return g->epfd >= 0 ? g->epfd : group_make(g);
}

int rdmx__group_fd(struct rdmx__group *g)
{
	int fd = __atomic_load_n(&g->epfd, __ATOMIC_ACQUIRE);

	if (fd >= 0)
		return fd;
	pthread_mutex_lock(&make_lock);
	fd = group_fd_locked(g);
	pthread_mutex_unlock(&make_lock);
	return fd;
}

void rdmx__group_kick(struct rdmx__group *g)
{
	int kick = __atomic_load_n(&g->kick, __ATOMIC_ACQUIRE);

	if (kick >= 0)
		(void)!write(kick, &(uint64_t){ 1 }, 8);
}

void rdmx__group_ws_fini(struct rdmx__group *g)
{
	if (g->epfd >= 0)
		close(g->epfd);
	if (g->kick >= 0)
		close(g->kick);
	g->epfd = g->kick = -1;
}

void rdmx__group_unwatch(struct rdmx__group *g, rdmx_conn *c)
{
	int gfd = __atomic_load_n(&g->epfd, __ATOMIC_ACQUIRE);

	if (!c->ws.in_group || gfd < 0)
		return;
	(void)epoll_ctl(gfd, EPOLL_CTL_DEL, c->ws.epfd, NULL);
	c->ws.in_group = 0;
}

/* Under @c's lock: put its wait set in @g's, arm it, and have a receiver
 * that polls memory publish its sleep. As rdmx__conn_park's steps. */
static int member_arm_locked(int gfd, rdmx_conn *c)
{
	int fd = ws_fd(c), fresh = 0, rc;

	if (fd < 0)
		return fd;
	if (!c->ws.in_group) { /* a held member: not unwatched under us */
		rc = ep_add(gfd, fd);
		if (rc)
			return rc;
		c->ws.in_group = 1;
	}
	if (!__atomic_exchange_n(&c->ws.sleeping, 1, __ATOMIC_SEQ_CST))
		fresh = 1; /* kicks are sent from now on: poll once more */
	rc = ws_arm(c);
	if (rc < 0)
		return rc;
	return arm_announce(c, fresh | rc);
}

int rdmx__group_arm(struct rdmx__group *g, rdmx_conn *c)
{
	int gfd = rdmx__group_fd(g), rc;

	if (gfd < 0)
		return gfd;
	if (c->reset_reported)
		return 0;
	if (c->state == RDMX__CONN_DOWN)
		return 1; /* the next poll reports it */
	if (!c->ws.recv_cq || !c->f->cq_arm)
		return -EOPNOTSUPP;
	if (pthread_mutex_trylock(&c->lock))
		return -EBUSY;
	rc = member_arm_locked(gfd, c);
	pthread_mutex_unlock(&c->lock);
	if (rc < 0 && c->state == RDMX__CONN_DOWN)
		return 1;
	return rc;
}

void rdmx__group_rest(rdmx_conn *c)
{
	if (!__atomic_load_n(&c->ws.sleeping, __ATOMIC_RELAXED) ||
	    pthread_mutex_trylock(&c->lock))
		return; /* a thread that holds it may sleep on it itself */
	__atomic_store_n(&c->ws.sleeping, 0, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&c->lock);
}

/* Make the listener's park fd: its rdmx_listener_fd and @g's set. Under
 * make_lock (lis_make takes none). */
static int lis_park_make(rdmx_listener *lis)
{
	int fd, lfd, gfd, rc;

	lfd = lis->epfd >= 0 ? lis->epfd : lis_make(lis);
	if (lfd < 0)
		return lfd;
	fd = epoll_create1(EPOLL_CLOEXEC);
	if (fd < 0)
		return rdmx__fail(-errno, "epoll_create1: %s", strerror(errno));
	gfd = group_fd_locked(lis->group);
	rc = gfd < 0 ? gfd : ep_add(fd, lfd);
	if (!rc)
		rc = ep_add(fd, gfd);
	if (rc) {
		close(fd);
		return rc;
	}
	__atomic_store_n(&lis->parkfd, fd, __ATOMIC_RELEASE);
	return fd;
}

int rdmx__lis_park_fd(rdmx_listener *lis)
{
	int fd = __atomic_load_n(&lis->parkfd, __ATOMIC_ACQUIRE);

	if (fd >= 0)
		return fd;
	pthread_mutex_lock(&make_lock);
	fd = lis->parkfd >= 0 ? lis->parkfd : lis_park_make(lis);
	pthread_mutex_unlock(&make_lock);
	return fd;
}

int rdmx__conn_wait(rdmx_conn *c, struct rdmx__deadline *d)
{
	int rc;

	if (d->once)
		return rdmx__conn_once(c);
	if (!d->spins) /* the first empty poll */
		rdmx__deadline_mode(d, c->opts.wait_mode, c->opts.spin_us);
	if (!rdmx__wait_idle(d))
		return 0;
	rc = rdmx__conn_check_peer(c);
	if (!rc)
		rc = rdmx__deadline_passed(d);
	if (!rc)
		rdmx__conn_park(c, d);
	return rc;
}
