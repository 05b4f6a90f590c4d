/* SPDX-License-Identifier: MIT */
/*
 * UD and UC queue pairs between two hosts (tests/two-host-ud drives it in
 * two sandbox VMs): the descriptors cross a TCP socket, then the client
 * sends COUNT UD messages the server echoes (a lost one is sent again after
 * a second: UD is unreliable), and WRITES a 64 KiB region over UC whose
 * checksum the server verifies. Where the single-host test talks to itself,
 * this one needs the right GID, address handle and UC path on both sides.
 *   ud_two_host --server
 *   ud_two_host --client PEER_ADDR [--count N]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/dgram.h"
#include "core/errors.h"
#include "core/fabric.h"
#include "harness.h"

#define TCP_PORT 7472
#define CM_PORT 7471
#define DEPTH 64
#define SLOT (RDMX__GRH_LEN + 1024)
#define MSG 256
#define REGION (64 * 1024)
#define CHUNK 4096
#define QKEY 0x2222u
#define WAIT_MS 5000
#define RESEND_MS 1000
#define RUN_MS 120000

static const struct rdmx__fabric_ops *F = &rdmx__fabric_verbs;

struct host {
	struct rdmx__fabric *fab;
	struct rdmx__ep *ep;
	struct rdmx__dgram *ud, *uc;
	struct rdmx__qp_desc ud_peer, uc_peer;
	struct rdmx__ah *ah;
	struct rdmx__mr *mr;
	uint8_t *buf;   /* DEPTH receive slots, a send slot, the UC region */
	uint64_t raddr; /* the peer's region */
	uint32_t rkey;
	int sock;
};

static uint8_t *send_slot(struct host *h)
{
	return h->buf + (size_t)DEPTH * SLOT;
}

static uint8_t *region(struct host *h)
{
	return send_slot(h) + SLOT;
}

static int die(const char *what)
{
	fprintf(stderr, "ud_two_host: %s: %s\n", what, rdmx__last());
	exit(1);
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t x = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		x = (x ^ p[i]) * 0x100000001b3ull;
	return x;
}

static void io_all(int fd, void *p, size_t n, int wr)
{
	for (size_t k = 0; k < n;) {
		ssize_t r = wr ? write(fd, (char *)p + k, n - k) : read(fd, (char *)p + k, n - k);

		if (r <= 0) {
			fprintf(stderr, "ud_two_host: control socket %s: %s\n",
				wr ? "write" : "read", r ? strerror(errno) : "closed");
			exit(1);
		}
		k += (size_t)r;
	}
}

/* The device side: an ep toward @addr, the two QPs, the memory. */
static void host_open(struct host *h, const char *addr)
{
	size_t len = (size_t)(DEPTH + 1) * SLOT + REGION;

	if (F->create(&h->fab) || F->resolve(h->fab, addr, CM_PORT, WAIT_MS, &h->ep))
		die("resolve");
	if (rdmx__dgram_open(F, h->ep, RDMX__DQP_UD, DEPTH, QKEY, &h->ud))
		die("UD QP");
	if (rdmx__dgram_open(F, h->ep, RDMX__DQP_UC, DEPTH, 0, &h->uc))
		die("UC QP (does the device run UC?)");
	h->buf = calloc(1, len);
	if (!h->buf || F->reg_mr(h->ep, h->buf, len, RDMX__ACCESS_LOCAL | RDMX__ACCESS_WRITE,
				 &h->mr))
		die("memory");
	for (uint32_t i = 0; i < DEPTH; i++)
		if (rdmx__dgram_recv(h->ud, h->buf + (size_t)i * SLOT, SLOT, h->mr->lkey, i))
			die("receives");
}

/* Descriptors (UD, UC, and the region's address and rkey) both ways. */
static void exchange(struct host *h)
{
	uint8_t out[2 * RDMX__QP_DESC_WIRE + 12], in[sizeof(out)];
	uint64_t addr = (uintptr_t)region(h);

	rdmx__qp_desc_encode(&h->ud->self, out);
	rdmx__qp_desc_encode(&h->uc->self, out + RDMX__QP_DESC_WIRE);
	memcpy(out + 2 * RDMX__QP_DESC_WIRE, &addr, 8);
	memcpy(out + 2 * RDMX__QP_DESC_WIRE + 8, &h->mr->rkey, 4);
	io_all(h->sock, out, sizeof(out), 1);
	io_all(h->sock, in, sizeof(in), 0);
	if (rdmx__qp_desc_decode(in, RDMX__QP_DESC_WIRE, RDMX__DQP_UD, &h->ud_peer) ||
	    rdmx__qp_desc_decode(in + RDMX__QP_DESC_WIRE, RDMX__QP_DESC_WIRE, RDMX__DQP_UC,
				 &h->uc_peer))
		die("peer's descriptor");
	if (rdmx__ud_ah(h->ud, &h->ud_peer, &h->ah) || rdmx__uc_connect(h->uc, &h->uc_peer))
		die("address handle / UC connect");
	memcpy(&h->raddr, in + 2 * RDMX__QP_DESC_WIRE, 8);
	memcpy(&h->rkey, in + 2 * RDMX__QP_DESC_WIRE + 8, 4);
}

static void send_msg(struct host *h, const void *p, uint32_t len, uint64_t id)
{
	struct rdmx__wc wc;

	if (p != send_slot(h))
		memcpy(send_slot(h), p, len);
	if (rdmx__ud_send(h->ud, h->ah, &h->ud_peer, send_slot(h), len, h->mr->lkey, id) ||
	    rdmx__dgram_wait(h->ud, 0, WAIT_MS, "a UD SEND", &wc))
		die("UD send");
}

/* A UD message within @ms (0: none; its payload is at *@p), reposted. */
static uint32_t recv_msg(struct host *h, int ms, const uint8_t **p)
{
	struct rdmx__wc wc;
	int rc = rdmx__dgram_wait(h->ud, 1, ms, "a UD message", &wc);

	if (rc == -ETIMEDOUT)
		return 0;
	if (rc || wc.wr_id >= DEPTH || wc.byte_len < RDMX__GRH_LEN ||
	    wc.src_qp != h->ud_peer.qpn)
		die("UD receive");
	*p = h->buf + wc.wr_id * SLOT + RDMX__GRH_LEN;
	if (rdmx__dgram_recv(h->ud, (void *)(*p - RDMX__GRH_LEN), SLOT, h->mr->lkey, wc.wr_id))
		die("repost");
	return wc.byte_len - RDMX__GRH_LEN;
}

/* Echo until the client's checksum of the region arrives; verify it. */
static int serve(struct host *h)
{
	struct pollfd pfd = { .fd = h->sock, .events = POLLIN };
	uint8_t copy[SLOT];
	uint64_t want, echoed = 0;
	double end = th_now_ms() + RUN_MS;
	const uint8_t *p;
	uint32_t len;

	while (!poll(&pfd, 1, 0) && th_now_ms() < end) {
		if (!(len = recv_msg(h, 10, &p)))
			continue;
		memcpy(copy, p, len); /* the slot is reposted: echo a copy */
		send_msg(h, copy, len, echoed++);
	}
	io_all(h->sock, &want, 8, 0);
	end = th_now_ms() + WAIT_MS;
	while (fnv1a(region(h), REGION) != want && th_now_ms() < end)
		;
	int ok = fnv1a(region(h), REGION) == want;

	io_all(h->sock, &ok, sizeof(ok), 1);
	printf("server: %llu UD messages echoed; UC region %s\n", (unsigned long long)echoed,
	       ok ? "checksum matches" : "CHECKSUM WRONG");
	return !ok;
}

/* One message out and its echo back, sent again after RESEND_MS. */
static unsigned ping(struct host *h, uint64_t seq)
{
	uint8_t msg[MSG];
	double end = th_now_ms() + WAIT_MS * 4;
	const uint8_t *p;
	unsigned resent = 0;
	uint32_t len;

	th_fill(msg, MSG, seq);
	send_msg(h, msg, MSG, seq);
	while (th_now_ms() < end) {
		len = recv_msg(h, RESEND_MS, &p);
		if (len == MSG && th_check(p, MSG, seq) == -1)
			return resent;
		if (!len) {
			send_msg(h, msg, MSG, seq);
			resent++;
		}
	}
	fprintf(stderr, "ud_two_host: no echo of message %llu\n", (unsigned long long)seq);
	exit(1);
}

static int client(struct host *h, uint64_t count)
{
	unsigned resent = 0;
	struct rdmx__wc wc;
	uint64_t want;
	int ok;

	for (uint64_t seq = 0; seq < count; seq++)
		resent += ping(h, seq);
	th_fill(region(h), REGION, 42);
	for (uint32_t off = 0; off < REGION; off += CHUNK)
		if (rdmx__uc_write(h->uc, region(h) + off, CHUNK, h->mr->lkey, h->raddr + off, h->rkey,
				   off) || rdmx__dgram_wait(h->uc, 0, WAIT_MS, "a UC WRITE", &wc))
			die("UC write");
	want = fnv1a(region(h), REGION);
	io_all(h->sock, &want, 8, 1);
	io_all(h->sock, &ok, sizeof(ok), 0);
	printf("client: %llu UD messages echoed (%u sent again), %d bytes over UC: %s\n",
	       (unsigned long long)count, resent, REGION, ok ? "checksum matches" : "WRONG");
	return !ok;
}

static int tcp_accept(char *peer, size_t len)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(TCP_PORT) };
	socklen_t al = sizeof(a);
	int one = 1, s = socket(AF_INET, SOCK_STREAM, 0), c;

	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 1) ||
	    (c = accept(s, (struct sockaddr *)&a, &al)) < 0) {
		perror("ud_two_host: control socket");
		exit(1);
	}
	close(s);
	inet_ntop(AF_INET, &a.sin_addr, peer, (socklen_t)len);
	return c;
}

/* Connect to the server, which may still be starting (bounded). */
static int tcp_connect(const char *peer)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(TCP_PORT) };
	double end = th_now_ms() + 60000;

	inet_pton(AF_INET, peer, &a.sin_addr);
	while (th_now_ms() < end) {
		int s = socket(AF_INET, SOCK_STREAM, 0);

		if (s >= 0 && !connect(s, (struct sockaddr *)&a, sizeof(a)))
			return s;
		close(s);
		usleep(200000);
	}
	fprintf(stderr, "ud_two_host: no server at %s:%d within 60 s\n", peer, TCP_PORT);
	exit(1);
}

int main(int argc, char **argv)
{
	struct host h = { 0 };
	char peer[64];
	int server = argc >= 2 && !strcmp(argv[1], "--server");
	uint64_t count = argc >= 5 && !strcmp(argv[3], "--count") ? strtoull(argv[4], NULL, 0) : 1000;

	if (!server && (argc < 3 || strcmp(argv[1], "--client"))) {
		fprintf(stderr, "usage: ud_two_host --server | --client PEER [--count N]\n");
		return 2;
	}
	if (server) {
		h.sock = tcp_accept(peer, sizeof(peer));
	} else {
		snprintf(peer, sizeof(peer), "%s", argv[2]);
		h.sock = tcp_connect(peer);
	}
	host_open(&h, peer);
	exchange(&h);
	printf("%s: UD QP %u, UC QP %u; peer UD QP %u, UC QP %u, MTU %u\n",
	       server ? "server" : "client", h.ud->self.qpn, h.uc->self.qpn, h.ud_peer.qpn,
	       h.uc_peer.qpn, h.ud->dev.ud_max);
	return server ? serve(&h) : client(&h, count);
}
