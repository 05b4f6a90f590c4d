/* SPDX-License-Identifier: MIT */
/* Pure parts of device discovery, unit-tested natively. */
#ifndef RDMX_CORE_DEVICES_H
#define RDMX_CORE_DEVICES_H

#include <stddef.h>
#include <stdint.h>

#include <rdmx/rdmx.h>

/* Index into @gids of the GID rdmx prefers (RoCEv2 IPv4 first), or -1. */
int rdmx__gid_pick(const struct rdmx_gid_info *gids, int n);

/* Fill gid text, type and address text of @g from raw GID bytes. */
void rdmx__gid_format(const uint8_t raw[16], enum rdmx_gid_type type,
		      struct rdmx_gid_info *g);

/* The address to use among @devs (see rdmx_pick_address()). */
int rdmx__address_choose(const struct rdmx_device_info *devs, int n,
			 const char *device, int gid_index, char *buf, size_t len);

struct ibv_device_attr;
/* The device has type 2 memory windows (2A or 2B): a server can bind the
 * memory it exports to one client to that client's QP (core/mw.h). */
int rdmx__dev_has_mw(const struct ibv_device_attr *attr);

#endif /* RDMX_CORE_DEVICES_H */
