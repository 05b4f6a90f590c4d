/* SPDX-License-Identifier: MIT */
/*
 * The read protocol's wire formats (see the top of read.c for the whole
 * protocol): the descriptor a sender SENDs for every message and the hello
 * block. Exposed for the unit tests.
 */
#ifndef RDMX_PROTOCOLS_READ_H
#define RDMX_PROTOCOLS_READ_H

#include <stddef.h>
#include <stdint.h>

#define RDMX__READ_DESC_SIZE 32
#define RDMX__READ_HELLO_SIZE 24
#define RDMX__READ_HELLO_VERSION 1

enum rdmx__read_desc_type {
	RDMX__READ_DESC_READ = 1,  /* payload stays in the sender: READ it */
	RDMX__READ_DESC_EAGER = 2, /* payload follows the descriptor */
};

#define RDMX__READ_DESC_IMM 0x1 /* imm is valid */

struct rdmx__read_desc {
	uint8_t type;
	uint8_t flags;
	uint16_t slot;   /* sender's buffer index = its ack slot */
	uint32_t gen;    /* sender's use count of that buffer, never 0 */
	uint64_t addr;   /* READ: payload address in the sender */
	uint32_t rkey;   /* READ: rkey of the sender's buffers */
	uint32_t len;    /* payload bytes */
	uint32_t imm;
};

struct rdmx__read_hello {
	uint8_t version;
	uint8_t rd_atomic;   /* READs this side answers at once */
	uint16_t desc_depth; /* descriptors this side can hold: peer's credits */
	uint16_t send_depth; /* send buffers = entries of the ack array */
	uint16_t eager_max;  /* largest payload carried in a descriptor */
	uint32_t ack_rkey;
	uint64_t ack_addr;   /* u64 per send buffer, peer WRITEs gens here */
};

/* Encode to RDMX__READ_DESC_SIZE bytes. */
void rdmx__read_desc_encode(const struct rdmx__read_desc *d, uint8_t *buf);
/* Decode; -EPROTO with a message on an unknown type, flag or reserved bits. */
int rdmx__read_desc_decode(const uint8_t *buf, struct rdmx__read_desc *d);

/* Encode to RDMX__READ_HELLO_SIZE bytes. */
void rdmx__read_hello_encode(const struct rdmx__read_hello *h, uint8_t *buf);
/* Decode @len bytes; -EPROTO with a message saying what does not match. */
int rdmx__read_hello_decode(const uint8_t *buf, size_t len,
			    struct rdmx__read_hello *h);

#endif /* RDMX_PROTOCOLS_READ_H */
