/* SPDX-License-Identifier: MIT */
/*
 * Application memory: registrations and the registered allocator (mem.c).
 */
#ifndef RDMX_CORE_MEM_H
#define RDMX_CORE_MEM_H

#include <stddef.h>
#include <rdmx/rdmx.h>

#include "fabric.h"

struct rdmx__export_node;

/* mem.c: application memory. @mr registered on @c's domain (made on the
 * first use there). */
int rdmx__mr_on(rdmx_conn *c, rdmx_mr *mr, const struct rdmx__mr **out);
/* The same, and whether it was made for window binds (1: remote rights
 * only through windows, rdmx_mr_export binds one) or not (0: its key has
 * the remote rights), or -errno. */
int rdmx__mr_bindable(rdmx_conn *c, rdmx_mr *mr, struct rdmx__mr **out);
/* The fabric's remote rights (RDMX__ACCESS_READ ...) of enum rdmx_access
 * bits @access. */
int rdmx__mr_rights(unsigned access);
/* 0 if [off, off+len) lies inside @mr, else -EINVAL with a message. */
int rdmx__mr_range(const rdmx_mr *mr, size_t off, size_t len);
unsigned rdmx__mr_access(const rdmx_mr *mr);
/* The list of @mr's exports bound to connections (mw.h), revoked by
 * rdmx_mr_dereg. */
struct rdmx__export_node **rdmx__mr_exports(rdmx_mr *mr);
int rdmx__slab_create(rdmx_ctx *ctx);
void rdmx__slab_destroy(rdmx_ctx *ctx);

#endif /* RDMX_CORE_MEM_H */
