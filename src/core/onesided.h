/* SPDX-License-Identifier: MIT */
/*
 * Regions exported to one connection's peer, for the rooms above the core
 * (rpc rfp): the export service of mw.h over an RC connection.
 */
#ifndef RDMX_CORE_ONESIDED_H
#define RDMX_CORE_ONESIDED_H

#include <stddef.h>
#include <stdint.h>

#include <rdmx/rdmx.h>

#include "mw.h"

/*
 * Register @len bytes at @addr on @c's device and export them to @c's peer
 * alone with exactly @access (RDMX__ACCESS_WRITE, READ, ATOMIC): a window
 * bound to @c's QP where the device has windows (the bind waits up to
 * @timeout_ms: a one-sided operation's slot and completion), else the
 * registration's key with exactly @access. The descriptor the peer
 * imports (rdmx_region_import) is written to @desc. Revoke with
 * rdmx__export_revoke() when the connection closes. 0 or -errno.
 */
int rdmx__export_conn(rdmx_conn *c, void *addr, size_t len, int access, int timeout_ms,
		      struct rdmx__export *out, uint8_t desc[RDMX_REGION_DESC_LEN]);

#endif /* RDMX_CORE_ONESIDED_H */
