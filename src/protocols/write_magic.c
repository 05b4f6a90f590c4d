/* SPDX-License-Identifier: MIT */
/*
 * write_magic: write_simplex (read its header first: record format,
 * notification, flow control are the same) with the receive ring mapped
 * twice back to back, so no record ever has to skip to the ring's start.
 *
 * The ring (and the sender's staging mirror) is a memfd of ring_size
 * bytes mapped MAP_SHARED|MAP_FIXED twice into a 2 * ring_size PROT_NONE
 * reservation and registered as ONE memory region of 2 * ring_size bytes.
 * A record at ring byte i always occupies virtual [i, i + size) of that
 * region, also when i + size runs past ring_size: the sender posts one
 * contiguous WRITE, the HCA places its tail through the second mapping
 * into the ring's first pages, and the receiver reads the record
 * contiguously through the second mapping as well. No pad records, no
 * wasted byte; rdmx_msg_alloc hands out a contiguous buffer for a record
 * that crosses the end, in the staging mirror's double mapping.
 *
 * Registration over the double mapping: the region's pages are pinned
 * page by page, so ring page k is pinned twice (as page k and k + n) and
 * the HCA translates both virtual ranges to the same physical pages. On
 * rxe (Linux 6.1, in the sandbox) this works: test_ring_proto streams 25
 * times the ring size with record sizes that make most laps end in a
 * record crossing the end (rdmx__wring_stats().crossings), every byte
 * checked, and pingpong --verify passes. Both sides must have the double
 * mapping (a flag in the hello); if memfd_create, the mappings or the
 * registration are refused, the connection falls back to write_simplex's
 * skip-to-start with pad records and says so in rdmx_conn_error() ("double-
 * mapped ring refused (...)"); rdmx__wring_stats().magic tells which.
 *
 * Costs: twice the virtual address space and MR span per ring (no more
 * memory), ring_size a multiple of the page size (it is: >= 4096 and a
 * power of two).
 */
#include "core/protocol.h"
#include "core/wire.h"
#include "write_ring.h"

/* The engine's variant: double-mapped rings, head updates by SEND. */
static const struct rdmx__wring_variant magic_variant = {
	.double_map = 1,
};

const struct rdmx_protocol_ops rdmx__proto_write_magic =
	RDMX__WRING_OPS("write_magic", RDMX__PROTO_WRITE_MAGIC, &magic_variant);
