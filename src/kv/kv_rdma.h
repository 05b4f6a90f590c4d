/* SPDX-License-Identifier: MIT */
/*
 * rdmx KV's RDMA door: the RPC contract both ends declare, the request
 * and layout wire formats (little-endian), and the read door's grant.
 *
 * Every request: a 24-byte header, the key, the value.
 *   off size field
 *     0    1  mode    put: enum rdmx_kv_put_mode, or KV_MODE_CAS; else 0
 *     1    1  zero
 *     2    2  klen    1..RDMX_KV_KEY_MAX
 *     4    4  flags   put/cas: the client flags
 *     8    4  vlen    put/cas: value bytes; else 0
 *    12    4  exptime put/cas: memcached's (i32: 0 never, <= 30 days
 *                     relative seconds, else Unix time, < 0 expired); else 0
 *    16    8  cas     cas: the cas the caller read; else 0
 * get's response: u32 flags, u32 vlen, u64 cas, the value. put/cas: u64
 * the new cas. del: nothing. The status carries -ENOENT, -EEXIST...
 *
 * layout's response (struct kv_layout_wire, KV_LAYOUT_LEN bytes):
 *     0 u32 version (KV_LAYOUT_VERSION)   4 u32 its length
 *     8 u32 entry format                 12 u32 hash id
 *    16 u64 seed                          24 u64 buckets
 *    32 u32 entry size                    36 u32 inline max
 *    40 u64 slab size                     48 u64 table length
 *    56 u32 probe max                     60 u16 read door port, u16 0
 *
 * Why a read door: rdmx_mr_export() describes a region to the peer of one
 * rdmx connection (it registers the region on that connection's device),
 * and an RPC hides its connection. So the client dials the read door (an
 * rdmx listener whose port the layout names); on accept the server
 * exports the table and the slab on that connection and sends the grant:
 * u32 KV_GRANT_MAGIC, u32 0, then the table's and the slab's descriptors
 * (RDMX_REGION_DESC_LEN bytes each). The client's READs go on that
 * connection, so they never queue behind the RPC's messages.
 */
#ifndef RDMX_KV_RDMA_H
#define RDMX_KV_RDMA_H

#include <stdint.h>

#include <rdmx/kv.h>
#include <rdmx/rpc.h>

enum {
	KV_M_GET = 1,
	KV_M_PUT = 2,
	KV_M_DEL = 3,
	KV_M_LAYOUT = 4,
};

#define KV_MODE_CAS 3
#define KV_REQ_HDR 24u
#define KV_GET_HDR 16u
#define KV_REQ_MAX (KV_REQ_HDR + RDMX_KV_KEY_MAX + RDMX_KV_RPC_VALUE_MAX)
#define KV_LAYOUT_VERSION 1u
#define KV_LAYOUT_LEN 64u
#define KV_GRANT_MAGIC 0x544e5247u /* "GRNT" */
#define KV_GRANT_LEN (8u + 2u * RDMX_REGION_DESC_LEN)
#define KV_NMETHODS 4

extern const struct rdmx_rpc_method rdmx__kv_contract[KV_NMETHODS];

/* A request header, decoded. */
struct kv_req {
	uint8_t mode;
	uint16_t klen;
	uint32_t flags;
	uint32_t vlen;
	int32_t exptime;
	uint64_t cas;
};

/* The layout, decoded. */
struct kv_layout_wire {
	uint32_t version, len, format, hash_id;
	uint64_t seed, buckets;
	uint32_t entry_size, inline_max;
	uint64_t slab_size, table_len;
	uint32_t probe_max;
	uint16_t read_port;
};

void rdmx__kv_req_put(uint8_t *b, const struct kv_req *r);
/* Decode a request of @n bytes (peer-written: copied once, checked). */
int rdmx__kv_req_get(const uint8_t *b, size_t n, struct kv_req *r);
void rdmx__kv_layout_put(uint8_t *b, const struct kv_layout_wire *l);
void rdmx__kv_layout_get(const uint8_t *b, struct kv_layout_wire *l);

#endif /* RDMX_KV_RDMA_H */
