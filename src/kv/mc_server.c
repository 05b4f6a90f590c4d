/* SPDX-License-Identifier: MIT */
/*
 * The rdmx KV server object (include/rdmx/kv.h) and its memcached front
 * door: one thread, poll(), non-blocking sockets, the protocol in
 * mc_proto.c. Per client: an input buffer that grows to the longest line
 * allowed (RDMX__MC_GET_LINE_MAX) and no further, the session's output,
 * which stops the reading of more commands while it holds more than
 * rdmx__mc_out_high() bytes (a client that does not read its replies
 * stalls only itself). Data blocks are collected by the session, so a
 * client that never sends one holds only its own connection. Every buffer
 * is charged to the caps of mc_out.c (per connection, all connections).
 *
 * What memcached 1.6 survives, the door survives (docs/memcached-door.md):
 * past max_clients a newcomer gets memcached's "ERROR Too many open
 * connections" and is closed; out of descriptors (EMFILE, ENFILE), a
 * spare descriptor kept for the purpose is freed to accept the newcomer
 * and tell it the same, and when even that fails accepting pauses with a
 * back-off instead of polling a listener that stays readable (memcached
 * stops accepting and retries every 10 ms); a client that sends and takes
 * nothing for idle_timeout_ms is closed (memcached -o idle_timeout); a
 * client runs reqs_per_event commands a turn, then the others have theirs
 * (memcached -R).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include "kv/kv_opts.h"
#include "kv/mc_out.h"
#include "kv/mc_proto.h"

#define MC_IN_CHUNK 16384
#define MC_IN_MAX (RDMX__MC_GET_LINE_MAX + MC_IN_CHUNK)
#define MC_POLL_MS 500 /* the bound on noticing a stop */
#define MC_FULL "ERROR Too many open connections\r\n"
#define MC_BACKOFF_MIN_MS 10   /* accepting paused, out of descriptors: */
#define MC_BACKOFF_MAX_MS 1000 /* doubling from the first to the last */
#define KV_VERSION "1.6.18-rdmx" /* the memcached protocol level, rdmx's build */

struct mc_client {
	int fd;
	char peer[INET6_ADDRSTRLEN]; /* its address: max_clients_per_peer */
	uint8_t *in;
	size_t in_len, in_cap;
	int64_t last_ns; /* the last byte read or sent */
	struct rdmx__mc_sess sess;
};

struct rdmx_kv_server {
	struct rdmx__kv *kv;
	struct rdmx__kv_door *door; /* the RDMA door, or NULL */
	struct rdmx_kv_server_opts o;
	int lfd, port;
	int spare;                 /* a descriptor to free for a refusal (EMFILE) */
	int64_t accept_resume_ns;  /* accepting paused until then (0: not paused) */
	int backoff_ms;            /* the next pause */
	bool more;                 /* a client's turn ended with commands left */
	int wake[2];               /* the stop pipe */
	int stop;                  /* atomic: set by rdmx_kv_server_stop */
	struct mc_client *clients; /* max_clients */
	int n_clients;
	struct pollfd *pfd;        /* 2 + max_clients */
	struct rdmx__mc_counters count;
	struct rdmx__mc_mem mem;   /* the buffer caps of all connections */
	struct rdmx__err err;
};

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
	s->mem.conn_max = (size_t)s->o.conn_buffer_max;
	s->mem.total_max = (size_t)s->o.buffer_max;
	s->backoff_ms = MC_BACKOFF_MIN_MS;
	return 0;
}

/* Keep a descriptor in reserve, to free when accept4 says EMFILE. */
static void spare_take(struct rdmx_kv_server *s)
{
	if (s->spare < 0 && s->lfd >= 0)
		s->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* A server: its store, and its front door listening when asked. */
int rdmx_kv_server_create(const struct rdmx_kv_server_opts *opts,
			  rdmx_kv_server **out)
{
	struct rdmx_kv_server *s;
	int rc;

	if (!out)
		return rdmx__fail(-EINVAL, "rdmx_kv_server_create: out is NULL");
	s = calloc(1, sizeof(*s));
	if (!s)
		return rdmx__fail(-ENOMEM, "kv: no memory for a server");
	s->lfd = s->spare = s->wake[0] = s->wake[1] = -1;
	s->port = -ENOENT;
	rc = rdmx__kv_server_opts_load(opts, &s->o);
	if (!rc && s->o.evict != RDMX_KV_EVICT_NONE && s->o.evict != RDMX_KV_EVICT_LRU)
		rc = rdmx__fail(-EINVAL, "kv: eviction policy %d (none 0, lru 1)", s->o.evict);
	if (!rc)
		rc = server_alloc(s);
	if (!rc && s->o.memcached_port >= 0)
		rc = listen_open(s);
	if (!rc)
		spare_take(s); /* none: the pauses alone bound an EMFILE */
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
	if (!srv)
		return rdmx__fail(-EINVAL, "rdmx_kv_server_port: server is NULL");
	return srv->port;
}

int rdmx_kv_server_rdma_port(const rdmx_kv_server *srv)
{
	if (!srv)
		return rdmx__fail(-EINVAL, "rdmx_kv_server_rdma_port: server is NULL");
	return srv->door ? rdmx__kv_door_port(srv->door) : -ENOENT;
}

const char *rdmx_kv_server_error(const rdmx_kv_server *srv)
{
	return srv ? srv->err.msg : "no server";
}

void rdmx_kv_server_stop(rdmx_kv_server *srv)
{
	ssize_t n;

	if (!srv)
		return;
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
	rdmx__mc_sess_fini(&c->sess); /* gives back what it held, c->in too */
	s->clients[i] = s->clients[--s->n_clients];
	s->count.curr_conns--;
}

/* Tell a newcomer there is no room in @line (memcached's words), and close it. */
static void refuse(struct rdmx_kv_server *s, int fd, const char *line)
{
	ssize_t n = write(fd, line, strlen(line));

	(void)n;
	close(fd);
	s->count.rejected_conns++;
}

/*
 * accept4 failed with @err. Out of descriptors (EMFILE, ENFILE) or of
 * socket memory (ENOBUFS, ENOMEM), the newcomer stays in the backlog and
 * the listener stays readable: free the spare descriptor, accept the
 * newcomer with it, refuse it in words and take the spare back. When that
 * fails too, stop polling the listener for a back-off that doubles from
 * MC_BACKOFF_MIN_MS to MC_BACKOFF_MAX_MS while it lasts (memcached's
 * listen_disabled_num counts these pauses). Other errors are the
 * newcomer's own (ECONNABORTED...) or transient: nothing to wait for.
 */
static void accept_exhausted(struct rdmx_kv_server *s, int err)
{
	int fd = -1;

	if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
		return;
	s->count.accept_failed++;
	if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM)
		return;
	if (s->spare >= 0) {
		close(s->spare);
		s->spare = -1;
		fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd >= 0)
			refuse(s, fd, MC_FULL);
		spare_take(s);
	}
	if (fd >= 0)
		return;
	s->count.listen_disabled++;
	s->accept_resume_ns = rdmx__now_ns() + (int64_t)s->backoff_ms * 1000000;
	s->backoff_ms = s->backoff_ms * 2 > MC_BACKOFF_MAX_MS ? MC_BACKOFF_MAX_MS :
			s->backoff_ms * 2;
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
		return MC_FULL;
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
	const char *refuse_line;
	struct mc_client *c;

	if (fd < 0)
		return accept_exhausted(s, errno);
	s->backoff_ms = MC_BACKOFF_MIN_MS;
	spare_take(s);
	peer_of(fd, host, sizeof(host));
	refuse_line = over_cap(s, host, line, sizeof(line));
	if (refuse_line)
		return refuse(s, fd, refuse_line);
	c = &s->clients[s->n_clients];
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->last_ns = rdmx__now_ns();
	memcpy(c->peer, host, sizeof(c->peer));
	if (rdmx__mc_sess_init(&c->sess, s->kv, &s->count, KV_VERSION)) {
		close(fd);
		return;
	}
	c->sess.mem = &s->mem;
	c->sess.turn_max = (uint32_t)s->o.reqs_per_event;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	s->n_clients++;
	s->count.curr_conns++;
	s->count.total_conns++;
}

/* An empty input buffer grown past its first size goes back. */
static void client_in_shrink(struct mc_client *c)
{
	if (c->in_len || c->in_cap <= MC_IN_CHUNK * 2)
		return;
	free(c->in);
	rdmx__mc_charge(&c->sess, c->in_cap, 0);
	c->in = NULL;
	c->in_cap = 0;
}

/* Run the client's buffered commands while its output is under the mark. */
static void client_execute(struct mc_client *c)
{
	size_t used;

	if (c->sess.out_len >= rdmx__mc_out_high(&c->sess) || !c->in_len)
		return;
	used = rdmx__mc_execute(&c->sess, c->in, c->in_len);
	if (!used)
		return; /* a partial line: no copy, no search again (mc_proto.c) */
	memmove(c->in, c->in + used, c->in_len - used);
	c->in_len -= used;
	client_in_shrink(c);
}

/* Room to read into; false when the client must go (no memory at all). */
static bool client_in_room(struct mc_client *c)
{
	size_t cap = c->in_cap ? 2 * c->in_cap : MC_IN_CHUNK * 2;
	uint8_t *p;

	if (c->in_cap - c->in_len >= MC_IN_CHUNK)
		return true;
	if (cap > MC_IN_MAX)
		cap = MC_IN_MAX;
	if (cap <= c->in_len)
		return true; /* full: the session closes it (line too long) */
	if (!rdmx__mc_charge(&c->sess, c->in_cap, cap)) {
		rdmx__mc_refuse_read(&c->sess); /* a cap: told, then closed */
		c->in_len = 0;
		return true;
	}
	p = realloc(c->in, cap);
	if (!p) {
		rdmx__mc_charge(&c->sess, cap, c->in_cap);
		return false;
	}
	c->in = p;
	c->in_cap = cap;
	return true;
}

/* Read what the client sent; false when it is gone. */
static bool client_read(struct mc_client *c)
{
	ssize_t n;

	if (!client_in_room(c))
		return false;
	if (c->sess.closing || c->in_cap == c->in_len)
		return true;
	n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return false;
	if (n > 0) {
		c->in_len += (size_t)n;
		c->last_ns = rdmx__now_ns();
	}
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
	if (n > 0)
		c->last_ns = rdmx__now_ns();
	rdmx__mc_out_consume(&c->sess, (size_t)n);
	return true;
}

/* One client's turn after poll: false to close it. */
static bool client_turn(struct mc_client *c, short revents)
{
	c->sess.turn_left = c->sess.turn_max; /* memcached -R: then the others */
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

/* Close the clients that sent and took nothing for idle_timeout_ms. */
static void idle_close(struct rdmx_kv_server *s)
{
	int64_t now = rdmx__now_ns(), idle = (int64_t)s->o.idle_timeout_ms * 1000000;

	if (!idle)
		return;
	for (int i = s->n_clients - 1; i >= 0; i--) {
		if (now - s->clients[i].last_ns < idle)
			continue;
		client_close(s, i); /* memcached says nothing either */
		s->count.idle_kicks++;
	}
}

/* ------------------------------------------------------------------- loop */

/* Whether the listener is polled (not during an EMFILE pause). */
static bool accepting(struct rdmx_kv_server *s)
{
	if (!s->accept_resume_ns)
		return true;
	if (rdmx__now_ns() < s->accept_resume_ns)
		return false;
	s->accept_resume_ns = 0;
	spare_take(s); /* a descriptor may be free again */
	return true;
}

static int poll_build(struct rdmx_kv_server *s)
{
	s->more = false;
	s->pfd[0] = (struct pollfd){ .fd = s->wake[0], .events = POLLIN };
	s->pfd[1] = (struct pollfd){ .fd = accepting(s) ? s->lfd : -1, .events = POLLIN };
	for (int i = 0; i < s->n_clients; i++) {
		struct mc_client *c = &s->clients[i];
		short ev = 0;

		if (c->sess.out_len < rdmx__mc_out_high(&c->sess) && !c->sess.closing) {
			ev |= POLLIN;
			if (c->in_len && c->sess.turn_max && !c->sess.turn_left)
				s->more = true; /* its turn ended with commands left */
		}
		if (c->sess.out_len)
			ev |= POLLOUT;
		s->pfd[2 + i] = (struct pollfd){ .fd = c->fd, .events = ev };
	}
	return 2 + s->n_clients;
}

/* How long poll may wait: a stop, the end of a pause, an idle client. */
static int poll_timeout(const struct rdmx_kv_server *s)
{
	int ms = MC_POLL_MS;

	if (s->more)
		return 0; /* a client has commands left: only a look at the others */
	if (s->o.idle_timeout_ms && s->o.idle_timeout_ms / 4 + 1 < ms)
		ms = s->o.idle_timeout_ms / 4 + 1;
	if (s->accept_resume_ns) {
		int64_t left = (s->accept_resume_ns - rdmx__now_ns()) / 1000000 + 1;

		ms = left < ms ? (left > 0 ? (int)left : 0) : ms;
	}
	return ms;
}

static int run_fail(struct rdmx_kv_server *s, int err)
{
	int rc = rdmx__failo(&s->err, -err, "kv: poll: %s", strerror(err));

	if (s->door)
		rdmx__kv_door_stop(s->door);
	return rc;
}

/* Serve until stopped (see kv.h). */
int rdmx_kv_server_run(rdmx_kv_server *s)
{
	char drain[64];
	int rc;

	if (!s)
		return rdmx__fail(-EINVAL, "rdmx_kv_server_run: server is NULL");
	if (s->lfd < 0 && !s->door)
		return rdmx__failo(&s->err, -ENOENT, "kv: no door to serve");
	if (s->door && rdmx__kv_door_start(s->door))
		return rdmx__keep(&s->err, -EAGAIN);
	while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
		int n = poll_build(s);

		if (poll(s->pfd, (nfds_t)n, poll_timeout(s)) < 0 && errno != EINTR)
			return run_fail(s, errno);
		if (s->pfd[0].revents && read(s->wake[0], drain, sizeof(drain)) < 0)
			continue;
		/* From the last: closing one moves the last client into its place. */
		for (int i = n - 3; i >= 0; i--)
			if (!client_turn(&s->clients[i], s->pfd[2 + i].revents))
				client_close(s, i);
		idle_close(s);
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
	if (s->spare >= 0)
		close(s->spare);
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
