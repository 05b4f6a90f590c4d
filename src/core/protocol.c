/* SPDX-License-Identifier: MIT */
/* The table of built-in protocols: one entry per src/protocols/<name>.c. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "internal.h"

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

int rdmx__one_buf_busy(const rdmx_conn *c, const struct rdmx__one_buf *b)
{
	if (!b->live)
		return 0;
	return rdmx__fail(-EBUSY, "%s: one buffer at a time: send or release the last one from rdmx_msg_alloc first",
			  c->proto->name);
}
