/* SPDX-License-Identifier: MIT */
/*
 * kv_mc_compare: run one memcached command script against two servers and
 * compare the replies byte for byte (per connection).
 *
 * Usage: kv_mc_compare SCRIPT PORT_A [PORT_B]   (127.0.0.1; with one port:
 * print that server's transcripts).
 *
 * Script lines: "conn N" (switch to connection N, 0..7, opened on first
 * use), "send TEXT" (TEXT with C escapes \r \n \t \\ \xHH and {C*N} for N
 * copies of the character C, then a sentinel "get kvcmp:sentinel" whose
 * END closes the step), "raw TEXT" (sent as is, no sentinel: for a client
 * that leaves a command unfinished), "# ..." comments. At the end each
 * connection sends "quit" (unless a raw step left it unfinished) and is
 * read to EOF or to a 5 s silence. The only difference allowed: the text
 * after "VERSION " (the servers' own versions), replaced by "*".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONNS 8
#define SENTINEL "get kvcmp:sentinel\r\n"

struct side {
	int port;
	int fd[CONNS];
	bool raw[CONNS]; /* a raw step was the last: no quit at the end */
	char *out[CONNS];
	size_t len[CONNS], cap[CONNS];
};

static void die(const char *what)
{
	fprintf(stderr, "kv_mc_compare: %s\n", what);
	exit(1);
}

static void append(struct side *s, int c, const char *p, size_t n)
{
	if (s->len[c] + n + 1 > s->cap[c]) {
		s->cap[c] = 2 * (s->len[c] + n) + 1024;
		s->out[c] = realloc(s->out[c], s->cap[c]);
		if (!s->out[c])
			die("out of memory");
	}
	memcpy(s->out[c] + s->len[c], p, n);
	s->len[c] += n;
	s->out[c][s->len[c]] = 0;
}

static int dial(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		fprintf(stderr, "kv_mc_compare: connect to 127.0.0.1:%d: %s\n", port,
			strerror(errno));
		exit(1);
	}
	return fd;
}

/* Read what comes within @ms: 1, 0 on silence, -1 when the server closed (noted). */
static int read_some(struct side *s, int c, int ms)
{
	struct pollfd p = { .fd = s->fd[c], .events = POLLIN };
	char buf[65536];
	ssize_t n;

	if (s->fd[c] < 0)
		return -1;
	if (poll(&p, 1, ms) <= 0)
		return 0;
	n = read(s->fd[c], buf, sizeof(buf));
	if (n <= 0) {
		append(s, c, "<closed by the server>\n", 23);
		close(s->fd[c]);
		s->fd[c] = -1;
		return -1;
	}
	append(s, c, buf, (size_t)n);
	return 1;
}

/* Read until the transcript ends with the sentinel's END (10 s bound). */
static void read_step(struct side *s, int c, size_t from, const char *text)
{
	while (s->len[c] - from < 5 || strcmp(s->out[c] + s->len[c] - 5, "END\r\n")) {
		int rc = read_some(s, c, 10000);

		if (rc < 0)
			return; /* closed: the transcript says so */
		if (!rc) {
			fprintf(stderr, "kv_mc_compare: port %d conn %d: no reply to the "
				"sentinel of step %s within 10 s; got so far:\n%s\n",
				s->port, c, text, s->out[c] ? s->out[c] + from : "");
			exit(1);
		}
	}
}

static void send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return; /* the server closed: the transcript shows it */
		p += w;
		n -= (size_t)w;
	}
}

/* TEXT's escapes into @out; its length. */
static size_t unescape(const char *t, char *out, size_t cap)
{
	size_t n = 0;

	for (; *t && *t != '\n'; t++) {
		char ch = *t;
		unsigned rep = 1, x;

		if (*t == '\\' && t[1]) {
			t++;
			ch = *t == 'r' ? '\r' : *t == 'n' ? '\n' : *t == 't' ? '\t' : *t;
			if (*t == 'x' && sscanf(t + 1, "%2x", &x) == 1) {
				ch = (char)x;
				t += 2;
			}
		} else if (*t == '{' && t[1] && t[2] == '*' && sscanf(t + 3, "%u}", &rep) == 1) {
			ch = t[1];
			t = strchr(t, '}');
		}
		for (unsigned i = 0; i < rep && n < cap; i++)
			out[n++] = ch;
	}
	return n;
}

static void step(struct side *s, int c, const char *text, bool raw)
{
	static char buf[1 << 21];
	size_t n = unescape(text, buf, sizeof(buf)), from;

	if (s->fd[c] < 0)
		s->fd[c] = dial(s->port);
	from = s->len[c];
	send_all(s->fd[c], buf, n);
	s->raw[c] = raw;
	if (raw) {
		while (read_some(s, c, 300) > 0)
			;
		return;
	}
	send_all(s->fd[c], SENTINEL, strlen(SENTINEL));
	read_step(s, c, from, text);
}

static void finish(struct side *s)
{
	for (int c = 0; c < CONNS; c++) {
		if (s->fd[c] < 0)
			continue;
		if (!s->raw[c])
			send_all(s->fd[c], "quit\r\n", 6);
		while (read_some(s, c, s->raw[c] ? 300 : 5000) > 0)
			;
		if (s->fd[c] >= 0)
			close(s->fd[c]);
	}
}

static void run(struct side *s, const char *script)
{
	FILE *f = fopen(script, "r");
	static char line[1 << 20];
	int c = 0;

	if (!f)
		die("cannot open the script");
	for (int i = 0; i < CONNS; i++)
		s->fd[i] = -1;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "conn ", 5))
			c = atoi(line + 5) % CONNS;
		else if (!strncmp(line, "send ", 5))
			step(s, c, line + 5, false);
		else if (!strncmp(line, "raw ", 4))
			step(s, c, line + 4, true);
	}
	fclose(f);
	finish(s);
}

/* "VERSION x\r\n" -> "VERSION *\r\n", in place. */
static void normalize(char *t, size_t *len)
{
	char *v = t;

	while ((v = strstr(v, "VERSION "))) {
		char *end = strstr(v, "\r\n");

		if (!end)
			break;
		v += 8;
		*v = '*';
		memmove(v + 1, end, strlen(end) + 1);
		*len = strlen(t);
		v++;
	}
}

/* The transcript around byte @at (200 bytes before, 200 after). */
static void show(const struct side *s, int c, size_t at)
{
	size_t from = at > 60 ? at - 60 : 0, to = at + 120 < s->len[c] ? at + 200 : s->len[c];

	fprintf(stderr, "== port %d, bytes %zu..%zu of %zu ==\n%.*s\n== (end) ==\n", s->port,
		from, to, s->len[c], (int)(to - from), s->out[c] ? s->out[c] + from : "");
}

int main(int argc, char **argv)
{
	static struct side a, b;
	int bad = 0;

	if (argc < 3)
		die("usage: kv_mc_compare SCRIPT PORT_A [PORT_B]");
	a.port = atoi(argv[2]);
	run(&a, argv[1]);
	if (argc < 4) {
		for (int c = 0; c < CONNS; c++)
			if (a.out[c])
				printf("== conn %d ==\n%s", c, a.out[c]);
		return 0;
	}
	b.port = atoi(argv[3]);
	run(&b, argv[1]);
	for (int c = 0; c < CONNS; c++) {
		size_t i = 0;

		if (a.out[c])
			normalize(a.out[c], &a.len[c]);
		if (b.out[c])
			normalize(b.out[c], &b.len[c]);
		if (a.len[c] == b.len[c] && (!a.len[c] || !memcmp(a.out[c], b.out[c], a.len[c])))
			continue;
		while (i < a.len[c] && i < b.len[c] && a.out[c][i] == b.out[c][i])
			i++;
		fprintf(stderr, "kv_mc_compare: conn %d differs at byte %zu:\n", c, i);
		show(&a, c, i);
		show(&b, c, i);
		bad = 1;
	}
	if (!bad)
		printf("kv_mc_compare: %s: the two servers replied byte for byte the same\n", argv[1]);
	return bad;
}
