/* SPDX-License-Identifier: MIT */
/* direct_write internals the tests look at (they play a hostile peer). */
#ifndef RDMX_PROTOCOLS_DIRECT_WRITE_H
#define RDMX_PROTOCOLS_DIRECT_WRITE_H

#include "core/conn.h"

/* Bytes of a descriptor ({u32 buffer index, u32 0, u64 number}) and of a
 * message footer ({u32 len, u32 imm, u32 flags, u32 0, u64 number}). */
#define RDMX__DW_DESC 16u
#define RDMX__DW_FOOT 24u

/* Where, in @c's memory, the peer writes descriptor number @n (>= 1). */
uint8_t *rdmx__dw_desc_at(rdmx_conn *c, uint64_t n);
/* The footer of the buffer @c takes its next message in. */
uint8_t *rdmx__dw_next_footer(rdmx_conn *c);

#endif /* RDMX_PROTOCOLS_DIRECT_WRITE_H */
