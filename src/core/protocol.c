/* SPDX-License-Identifier: MIT */
/* The table of built-in protocols: one entry per src/protocols/<name>.c;
 * and the core's defaults for the contract's hooks a protocol has nothing
 * of its own for (protocol.h; the group's are group.c's, the vector
 * calls' recvvec.c's and sendvec.c's). */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "conn.h"
#include "errors.h"
#include "protocol.h"

extern const struct rdmx_protocol_ops rdmx__proto_send_recv;
extern const struct rdmx_protocol_ops rdmx__proto_srq;
extern const struct rdmx_protocol_ops rdmx__proto_read;
extern const struct rdmx_protocol_ops rdmx__proto_write_simplex;
extern const struct rdmx_protocol_ops rdmx__proto_write_magic;
extern const struct rdmx_protocol_ops rdmx__proto_write_duplex;
extern const struct rdmx_protocol_ops rdmx__proto_write_atomic;
extern const struct rdmx_protocol_ops rdmx__proto_direct_write;
extern const struct rdmx_protocol_ops rdmx__proto_buffered_read;

static const struct rdmx_protocol_ops *const protocols[] = {
	&rdmx__proto_send_recv,
	&rdmx__proto_srq,
	&rdmx__proto_read,
	&rdmx__proto_write_simplex,
	&rdmx__proto_write_magic,
	&rdmx__proto_write_duplex,
	&rdmx__proto_write_atomic,
	&rdmx__proto_direct_write,
	&rdmx__proto_buffered_read,
};

#define N_PROTOCOLS (sizeof(protocols) / sizeof(protocols[0]))

static const char *names[N_PROTOCOLS + 1];
static pthread_once_t names_once = PTHREAD_ONCE_INIT;

static void names_init(void)
{
	for (size_t i = 0; i < N_PROTOCOLS; i++)
		names[i] = protocols[i]->name;
}

const char *const *rdmx_protocol_names(void)
{
	pthread_once(&names_once, names_init);
	return names;
}

const struct rdmx_protocol_ops *rdmx__protocol_by_name(const char *name)
{
	for (size_t i = 0; i < N_PROTOCOLS; i++)
		if (!strcmp(protocols[i]->name, name))
			return protocols[i];
	return NULL;
}

const struct rdmx_protocol_ops *rdmx__protocol_by_id(uint8_t id)
{
	for (size_t i = 0; i < N_PROTOCOLS; i++)
		if (protocols[i]->id == id)
			return protocols[i];
	return NULL;
}

int rdmx__default_check_opts(const struct rdmx_protocol_ops *proto,
			     const struct rdmx_conn_opts *o, uint32_t max_msg)
{
	(void)proto;
	(void)o;
	(void)max_msg;
	return 0;
}

uint64_t rdmx__default_mem_estimate(const rdmx_conn *c)
{
	(void)c;
	return 0;
}

int rdmx__default_send_more(rdmx_conn *c, struct rdmx_msg *m)
{
	return c->data_ops->send(c, m);
}

int rdmx__default_send_from(rdmx_conn *c, struct rdmx_msg *m, const void *from,
			    uint32_t lkey)
{
	(void)lkey;
	if (m->len)
		memcpy(m->data, from, m->len);
	return c->data_ops->send(c, m);
}

int rdmx__default_sends_done(rdmx_conn *c, uint64_t *done)
{
	(void)done;
	return rdmx__fail(-EOPNOTSUPP, "%s: no per-send completions", c->proto->name);
}

int rdmx__default_own_wc(rdmx_conn *c, const struct rdmx__wc *wc)
{
	(void)c;
	(void)wc;
	return 0;
}

int rdmx__default_sleep_announce(rdmx_conn *c)
{
	(void)c;
	return 0;
}
