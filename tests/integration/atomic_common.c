/* SPDX-License-Identifier: MIT */
/* Helpers of write_atomic's two test files (atomic_tests.c, atomic_holes.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "atomic_common.h"

struct rdmx_conn_opts small_opts(void)
{
	struct rdmx_conn_opts o;

	rdmx_conn_opts_init(&o);
	o.protocol = "write_atomic";
	o.ring_size = SMALL_RING;
	o.max_msg_size = SMALL_MAX;
	return o;
}

void open_pair(struct th_pair *p, const struct rdmx_conn_opts *o)
{
	int rc = th_pair_open(p, o, o);

	if (rc)
		fail_msg("cannot connect a pair: %s (%s)", rdmx_strerror(rc), rdmx_last_error());
}

/* A second dialer on @p's listener. */
void dial_second(struct th_pair *p, const struct rdmx_conn_opts *o,
		 rdmx_conn **client, rdmx_conn **server)
{
	struct th_acceptor a = { .lis = p->lis };

	th_accept_start(&a);
	assert_int_equal(rdmx_dial(p->ctx, th_addr(), rdmx_listener_port(p->lis), o,
				   client), 0);
	th_accept_join(&a);
	assert_int_equal(a.rc, 0);
	*server = a.conn;
}

void send_seq(rdmx_conn *c, size_t size, uint64_t seq, uint32_t flags)
{
	struct rdmx_msg m;
	int rc = rdmx_msg_alloc(c, size, &m, 20000);

	if (rc)
		fail_msg("alloc: %s (%s)", rdmx_strerror(rc), rdmx_conn_error(c));
	th_fill(m.data, size, seq);
	m.len = size;
	m.flags = flags;
	m.imm = (uint32_t)seq;
	assert_int_equal(rdmx_send(c, &m), 0);
}

void check_seq(const struct rdmx_msg *m, size_t size, uint64_t seq)
{
	assert_int_equal(m->len, size);
	if (th_check(m->data, m->len, seq) >= 0)
		fail_msg("message #%llu of %zu bytes differs at %ld", (unsigned long long)seq,
			 size, th_check(m->data, m->len, seq));
}

uint32_t seq_in_order(const struct rdmx_msg *m, const uint64_t *next, uint32_t senders,
		      uint64_t *seq)
{
	uint32_t id;

	assert_true(m->len >= 8);
	memcpy(seq, m->data, 8);
	id = (uint32_t)(*seq >> 32);
	assert_in_range(id, 0, senders - 1);
	if ((*seq & 0xffffffffu) != next[id])
		fail_msg("sender %u: got #%llu, expected #%llu", id,
			 (unsigned long long)(*seq & 0xffffffffu),
			 (unsigned long long)next[id]);
	return id;
}

void lis_expect(rdmx_listener *lis, rdmx_conn *from, size_t size, uint64_t seq)
{
	struct rdmx_msg m;

	assert_int_equal(rdmx_listener_recv(lis, &m, 10000), 0);
	assert_ptr_equal(rdmx_msg_conn(&m), from);
	check_seq(&m, size, seq);
	assert_int_equal(rdmx_msg_release(from, &m), 0);
}

void recv_expect(rdmx_conn *c, size_t size, uint64_t seq)
{
	struct rdmx_msg m;

	assert_int_equal(rdmx_recv(c, &m, 10000), 0);
	check_seq(&m, size, seq);
	assert_int_equal(rdmx_msg_release(c, &m), 0);
}

void close_two(struct th_pair *p, rdmx_conn *c2, rdmx_conn *s2)
{
	rdmx_conn_close(c2);
	rdmx_conn_close(s2);
	th_pair_close(p);
}
