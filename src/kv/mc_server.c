/* SPDX-License-Identifier: MIT */
/*
 * The rdmx KV server object (include/rdmx/kv.h) and its memcached front
 * door: one thread, poll(), non-blocking sockets, the protocol in
 * mc_proto.c. Per client: an input buffer that grows to the longest line
 * allowed (RDMX__MC_GET_LINE_MAX) and no further, the session's output,
 * which stops the reading of more commands while it holds more than
 * MC_OUT_HIGH bytes (a client that does not read its replies stalls only
 * itself). Data blocks are collected by the session, so a client that
 * never sends one holds only its own connection. Past max_clients a new
 * client gets memcached's "ERROR Too many open connections" and is closed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdmx/kv.h>
#include <rdmx/rdmx.h>

#include "core/clock.h"
#include "core/errors.h"
#include "kv/kv_door.h"
#include "kv/mc_proto.h"

#define MC_IN_CHUNK 16384
#define MC_IN_MAX (RDMX__MC_GET_LINE_MAX + MC_IN_CHUNK)
#define MC_OUT_HIGH RDMX__MC_OUT_HIGH
#define MC_POLL_MS 500 /* the bound on noticing a stop */
#define KV_VERSION "1.6.18-rdmx" /* the memcached protocol level, rdmx's build */

struct mc_client {
	int fd;
	char peer[INET6_ADDRSTRLEN]; /* its address: max_clients_per_peer */
	uint8_t *in;
	size_t in_len, in_cap;
	struct rdmx__mc_sess sess;
};

struct rdmx_kv_server {
	struct rdmx__kv *kv;
	struct rdmx__kv_door *door; /* the RDMA door, or NULL */
	struct rdmx_kv_server_opts o;
	int lfd, port;
	int wake[2];               /* the stop pipe */
	int stop;                  /* atomic: set by rdmx_kv_server_stop */
	struct mc_client *clients; /* max_clients */
	int n_clients;
	struct pollfd *pfd;        /* 2 + max_clients */
	struct rdmx__mc_counters count;
	struct rdmx__err err;
};

static void opts_default(const struct rdmx_kv_server_opts *in,
			 struct rdmx_kv_server_opts *o)
{
	*o = *in;
	if (!o->capacity)
		o->capacity = 65536;
	if (!o->memory)
		o->memory = 64ULL << 20;
	if (!o->item_max)
		o->item_max = (1U << 20) - 512;
	if (!o->memcached_addr)
		o->memcached_addr = "0.0.0.0";
	if (o->max_clients <= 0)
		o->max_clients = 1024;
	if (!o->max_clients_per_peer)
		o->max_clients_per_peer = o->max_clients >= 4 ? o->max_clients / 4 : 1;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) ? -errno : 0;
}

/* The front door's listening socket on o.memcached_addr:port. */
static int listen_open(struct rdmx_kv_server *s)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)s->o.memcached_port) };
	socklen_t alen = sizeof(a);
	int one = 1;

	if (inet_pton(AF_INET, s->o.memcached_addr, &a.sin_addr) != 1)
		return rdmx__fail(-EINVAL, "kv: front door address '%s' is not IPv4",
				  s->o.memcached_addr);
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->lfd < 0)
		return rdmx__fail(-errno, "kv: socket: %s", strerror(errno));
	setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) || listen(s->lfd, 128) ||
	    getsockname(s->lfd, (struct sockaddr *)&a, &alen))
		return rdmx__fail(-errno, "kv: front door on %s:%d: %s",
				  s->o.memcached_addr, s->o.memcached_port, strerror(errno));
	s->port = ntohs(a.sin_port);
	return set_nonblock(s->lfd);
}

/*
 * A fresh hash seed per server: with a known one, a client could choose
 * keys that all land in one probe window (refused, or evicting each other,
 * and every lookup probing 32 slots). Clients learn it with the layout.
 */
static uint64_t seed_new(void)
{
	uint64_t seed, t;

	if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) == (ssize_t)sizeof(seed))
		return seed;
	t = (uint64_t)rdmx__now_ns(); /* no entropy yet: still not fixed */
	return t % 1000000000u * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid() << 32 ^
	       t / 1000000000u;
}

static int server_alloc(struct rdmx_kv_server *s)
{
	struct rdmx__kv_opts ko = { .capacity = s->o.capacity, .memory = s->o.memory,
				    .inline_max = s->o.inline_max,
				    .item_max = s->o.item_max,
				    .evict_lru = s->o.evict == RDMX_KV_EVICT_LRU,
				    .seed = seed_new() };
	int rc = rdmx__kv_create(&ko, &s->kv);

	if (rc)
		return rdmx__fail(rc, "kv: cannot create a store of %llu entries, "
				  "%llu bytes: %s", (unsigned long long)s->o.capacity,
				  (unsigned long long)s->o.memory, rdmx_strerror(rc));
	s->clients = calloc((size_t)s->o.max_clients, sizeof(*s->clients));
	s->pfd = calloc((size_t)s->o.max_clients + 2, sizeof(*s->pfd));
	if (!s->clients || !s->pfd)
		return rdmx__fail(-ENOMEM, "kv: no memory for %d clients", s->o.max_clients);
	if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK))
		return rdmx__fail(-errno, "kv: pipe: %s", strerror(errno));
	s->count.started = rdmx__kv_now(s->kv);
	return 0;
}

/* A server: its store, and its front door listening when asked. */
int rdmx_kv_server_create(const struct rdmx_kv_server_opts *opts,
			  rdmx_kv_server **out)
{
	struct rdmx_kv_server *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return rdmx__fail(-ENOMEM, "kv: no memory for a server");
	s->lfd = s->wake[0] = s->wake[1] = -1;
	s->port = -ENOENT;
	opts_default(opts, &s->o);
	rc = s->o.evict == RDMX_KV_EVICT_NONE || s->o.evict == RDMX_KV_EVICT_LRU ? 0 :
	     rdmx__fail(-EINVAL, "kv: eviction policy %d (none 0, lru 1)", s->o.evict);
	if (!rc)
		rc = server_alloc(s);
	if (!rc && s->o.memcached_port >= 0)
		rc = listen_open(s);
	if (!rc && s->o.ctx)
		rc = rdmx__kv_door_open(s->kv, &s->o, &s->door);
	if (rc)
		goto destroy_server;
	*out = s;
	return 0;
destroy_server:
	rdmx_kv_server_destroy(s);
	return rc;
}

int rdmx_kv_server_port(const rdmx_kv_server *srv)
{
	return srv->port;
}

int rdmx_kv_server_rdma_port(const rdmx_kv_server *srv)
{
	return srv->door ? rdmx__kv_door_port(srv->door) : -ENOENT;
}

const char *rdmx_kv_server_error(const rdmx_kv_server *srv)
{
	return srv->err.msg;
}

void rdmx_kv_server_stop(rdmx_kv_server *srv)
{
	ssize_t n;

	__atomic_store_n(&srv->stop, 1, __ATOMIC_RELEASE); /* lock-free: signal-safe */
	n = write(srv->wake[1], "", 1);
	(void)n;
}

/* ---------------------------------------------------------------- clients */

static void client_close(struct rdmx_kv_server *s, int i)
{
	struct mc_client *c = &s->clients[i];

	close(c->fd);
	free(c->in);
	rdmx__mc_sess_fini(&c->sess);
	s->clients[i] = s->clients[--s->n_clients];
	s->count.curr_conns--;
}

/* Accepted @fd's peer address, without its port, into @host. */
static void peer_of(int fd, char *host, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getpeername(fd, (struct sockaddr *)&ss, &sl) ||
	    getnameinfo((struct sockaddr *)&ss, sl, host, (socklen_t)len, NULL, 0,
			NI_NUMERICHOST))
		snprintf(host, len, "?");
}

/* A newcomer from @host over a cap: the line it is refused with, or NULL. */
static const char *over_cap(const struct rdmx_kv_server *s, const char *host,
			    char *line, size_t len)
{
	int from = 0;

	if (s->n_clients == s->o.max_clients)
		return "ERROR Too many open connections\r\n";
	for (int i = 0; i < s->n_clients; i++)
		from += !strcmp(s->clients[i].peer, host);
	if (s->o.max_clients_per_peer < 0 || from < s->o.max_clients_per_peer)
		return NULL;
	snprintf(line, len, "ERROR Too many open connections from %s "
		 "(max_clients_per_peer %d)\r\n", host, s->o.max_clients_per_peer);
	return line;
}

static void client_accept(struct rdmx_kv_server *s)
{
	int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
	char host[INET6_ADDRSTRLEN], line[128];
	const char *refuse;
	struct mc_client *c;

	if (fd < 0)
		return;
	peer_of(fd, host, sizeof(host));
	refuse = over_cap(s, host, line, sizeof(line));
	if (refuse) {
		ssize_t n = write(fd, refuse, strlen(refuse));

		(void)n;
		close(fd);
		s->count.rejected_conns++;
		return;
	}
	c = &s->clients[s->n_clients];
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	memcpy(c->peer, host, sizeof(c->peer));
	if (rdmx__mc_sess_init(&c->sess, s->kv, &s->count, KV_VERSION)) {
		close(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s->n_clients++;
	s->count.curr_conns++;
	s->count.total_conns++;
}

/* Run the client's buffered commands while its output is under the mark. */
static void client_execute(struct mc_client *c)
{
	size_t used;

	if (c->sess.out_len >= MC_OUT_HIGH || !c->in_len)
		return;
	used = rdmx__mc_execute(&c->sess, c->in, c->in_len);
	memmove(c->in, c->in + used, c->in_len - used);
	c->in_len -= used;
}

/* Read what the client sent; false when it is gone. */
static bool client_read(struct mc_client *c)
{
	ssize_t n;

	if (c->in_cap - c->in_len < MC_IN_CHUNK) {
		size_t cap = c->in_cap ? 2 * c->in_cap : MC_IN_CHUNK * 2;
		uint8_t *p;

		if (cap > MC_IN_MAX)
			cap = MC_IN_MAX;
		if (cap <= c->in_len)
			return true; /* full: the session closes it (line too long) */
		p = realloc(c->in, cap);
		if (!p)
			return false;
		c->in = p;
		c->in_cap = cap;
	}
	n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return false;
	if (n > 0)
		c->in_len += (size_t)n;
	return true;
}

/* Send what the session has for the client; false when it is gone. */
static bool client_write(struct mc_client *c)
{
	ssize_t n;

	if (!c->sess.out_len)
		return true;
	n = send(c->fd, c->sess.out, c->sess.out_len, MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN || errno == EINTR;
	rdmx__mc_out_consume(&c->sess, (size_t)n);
	return true;
}

/* One client's turn after poll: false to close it. */
static bool client_turn(struct mc_client *c, short revents)
{
	if (revents & (POLLERR | POLLNVAL))
		return false;
	if ((revents & (POLLIN | POLLHUP)) && !client_read(c))
		return false;
	client_execute(c);
	if (!client_write(c))
		return false;
	client_execute(c); /* output drained: what was held back */
	return !(c->sess.closing && !c->sess.out_len);
}

/* ------------------------------------------------------------------- loop */

static int poll_build(struct rdmx_kv_server *s)
{
	s->pfd[0] = (struct pollfd){ .fd = s->wake[0], .events = POLLIN };
	s->pfd[1] = (struct pollfd){ .fd = s->lfd, .events = POLLIN };
	for (int i = 0; i < s->n_clients; i++) {
		struct mc_client *c = &s->clients[i];
		short ev = 0;

		if (c->sess.out_len < MC_OUT_HIGH && !c->sess.closing)
			ev |= POLLIN;
		if (c->sess.out_len)
			ev |= POLLOUT;
		s->pfd[2 + i] = (struct pollfd){ .fd = c->fd, .events = ev };
	}
	return 2 + s->n_clients;
}

/* Serve until stopped (see kv.h). */
int rdmx_kv_server_run(rdmx_kv_server *s)
{
	char drain[64];
	int rc;

	if (s->lfd < 0 && !s->door)
		return rdmx__failo(&s->err, -ENOENT, "kv: no door to serve");
	if (s->door && rdmx__kv_door_start(s->door))
		return rdmx__keep(&s->err, -EAGAIN);
	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		int n = poll_build(s);

		if (poll(s->pfd, (nfds_t)n, MC_POLL_MS) < 0 && errno != EINTR) {
			rc = rdmx__failo(&s->err, -errno, "kv: poll: %s", strerror(errno));
			if (s->door)
				rdmx__kv_door_stop(s->door);
			return rc;
		}
		if (s->pfd[0].revents && read(s->wake[0], drain, sizeof(drain)) < 0)
			continue;
		/* From the last: closing one moves the last client into its place. */
		for (int i = n - 3; i >= 0; i--)
			if (!client_turn(&s->clients[i], s->pfd[2 + i].revents))
				client_close(s, i);
		if (s->pfd[1].revents & POLLIN)
			client_accept(s);
	}
	char why[RDMX__ERRMSG_LEN];

	rc = s->door ? rdmx__kv_door_stop(s->door) : 0;
	return rc ? rdmx__failo(&s->err, rc, "kv: the RPC server failed: %s",
				rdmx__kv_last(why, sizeof(why))) : 0;
}

void rdmx_kv_server_destroy(rdmx_kv_server *s)
{
	if (!s)
		return;
	while (s->n_clients)
		client_close(s, s->n_clients - 1);
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->wake[0] >= 0) {
		close(s->wake[0]);
		close(s->wake[1]);
	}
	rdmx__kv_door_close(s->door);
	free(s->pfd);
	free(s->clients);
	rdmx__kv_destroy(s->kv);
	free(s);
}
