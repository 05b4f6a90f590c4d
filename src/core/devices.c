/* SPDX-License-Identifier: MIT */
/*
 * Device discovery: devices, ports, GID tables, and the choice of the GID
 * (and so the IP address) rdmx uses when none is given. Discovery only
 * reads, so it calls libibverbs directly rather than through the seam.
 */
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <infiniband/verbs.h>

#include "devices.h"
#include "errors.h"

#define GID_TABLE_MAX 256

/* -------------------------------------------------------- the GID choice */

static int is_v4_mapped(const uint8_t *raw)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return !memcmp(raw, prefix, sizeof(prefix));
}

static int gid_score(const struct rdmx_gid_info *g)
{
	int v4 = strchr(g->addr, '.') != NULL;
	int link_local = !strncmp(g->addr, "fe80:", 5);

	if (!g->addr[0])
		return g->type == RDMX_GID_IB ? 1 : 0;
	if (g->type == RDMX_GID_ROCE_V2)
		return v4 ? 7 : link_local ? 3 : 6;
	if (g->type == RDMX_GID_ROCE_V1)
		return v4 ? 5 : link_local ? 2 : 4;
	return 0;
}

int rdmx__gid_pick(const struct rdmx_gid_info *gids, int n)
{
	int best = -1, best_score = 0;

	for (int i = 0; i < n; i++) {
		int s = gid_score(&gids[i]);

		if (s > best_score) {
			best = i;
			best_score = s;
		}
	}
	return best;
}

void rdmx__gid_format(const uint8_t raw[16], enum rdmx_gid_type type,
		      struct rdmx_gid_info *g)
{
	char *p = g->gid;

	for (int i = 0; i < 16; i += 2)
		p += sprintf(p, "%s%02x%02x", i ? ":" : "", raw[i], raw[i + 1]);
	g->type = type;
	g->addr[0] = 0;
	if (type == RDMX_GID_IB)
		return;
	if (is_v4_mapped(raw))
		inet_ntop(AF_INET, raw + 12, g->addr, sizeof(g->addr));
	else
		inet_ntop(AF_INET6, raw, g->addr, sizeof(g->addr));
}

/* --------------------------------------------------------------- listing */

static enum rdmx_gid_type gid_type(uint32_t t)
{
	if (t == IBV_GID_TYPE_ROCE_V2)
		return RDMX_GID_ROCE_V2;
	if (t == IBV_GID_TYPE_ROCE_V1)
		return RDMX_GID_ROCE_V1;
	return RDMX_GID_IB;
}

static int mtu_bytes(enum ibv_mtu m)
{
	return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128 << m : 0;
}

static const char *link_layer_name(uint8_t ll)
{
	if (ll == IBV_LINK_LAYER_ETHERNET)
		return "Ethernet";
	if (ll == IBV_LINK_LAYER_INFINIBAND)
		return "InfiniBand";
	return "unknown";
}

static int port_gids(struct ibv_context *verbs, struct rdmx_port_info *pi)
{
	struct ibv_gid_entry *e = calloc(GID_TABLE_MAX, sizeof(*e));
	ssize_t n;
	int k = 0;

	if (!e)
		return rdmx__fail(-ENOMEM, "out of memory for a GID table");
	n = ibv_query_gid_table(verbs, e, GID_TABLE_MAX, 0);
	pi->gids = calloc(n > 0 ? (size_t)n : 1, sizeof(*pi->gids));
	if (!pi->gids) {
		free(e);
		return rdmx__fail(-ENOMEM, "out of memory for a GID table");
	}
	for (ssize_t i = 0; i < n; i++) {
		struct rdmx_gid_info *g = &pi->gids[k];

		if (e[i].port_num != (uint32_t)pi->port)
			continue;
		g->index = (int)e[i].gid_index;
		rdmx__gid_format(e[i].gid.raw, gid_type(e[i].gid_type), g);
		if (!e[i].ndev_ifindex || !if_indextoname(e[i].ndev_ifindex, g->netdev))
			g->netdev[0] = 0;
		k++;
	}
	free(e);
	pi->n_gids = k;
	pi->picked_gid = pi->state == IBV_PORT_ACTIVE ? rdmx__gid_pick(pi->gids, k) : -1;
	return 0;
}

static int device_ports(struct ibv_context *verbs, struct rdmx_device_info *di)
{
	struct ibv_device_attr attr;
	int rc;

	if (ibv_query_device(verbs, &attr))
		return rdmx__fail(-errno, "ibv_query_device(%s): %s", di->name, strerror(errno));
	snprintf(di->node_guid, sizeof(di->node_guid), "%016llx",
		 (unsigned long long)be64toh(attr.node_guid));
	di->ports = calloc(attr.phys_port_cnt ? attr.phys_port_cnt : 1, sizeof(*di->ports));
	if (!di->ports)
		return rdmx__fail(-ENOMEM, "out of memory for ports");
	for (int p = 1; p <= attr.phys_port_cnt; p++) {
		struct rdmx_port_info *pi = &di->ports[di->n_ports++];
		struct ibv_port_attr pa;

		if (ibv_query_port(verbs, (uint8_t)p, &pa))
			return rdmx__fail(-errno, "ibv_query_port(%s, %d): %s", di->name, p,
					  strerror(errno));
		pi->port = p;
		pi->state = pa.state;
		snprintf(pi->state_name, sizeof(pi->state_name), "%s", ibv_port_state_str(pa.state));
		pi->active_mtu = mtu_bytes(pa.active_mtu);
		pi->max_mtu = mtu_bytes(pa.max_mtu);
		snprintf(pi->link_layer, sizeof(pi->link_layer), "%s", link_layer_name(pa.link_layer));
		rc = port_gids(verbs, pi);
		if (rc)
			return rc;
	}
	return 0;
}

static int describe(struct ibv_device *dev, struct rdmx_device_info *di)
{
	struct ibv_context *verbs = ibv_open_device(dev);
	int rc;

	snprintf(di->name, sizeof(di->name), "%s", ibv_get_device_name(dev));
	if (!verbs)
		return rdmx__fail(-errno ? -errno : -ENODEV, "cannot open %s: %s", di->name,
				  strerror(errno));
	rc = device_ports(verbs, di);
	ibv_close_device(verbs);
	return rc;
}

int rdmx_devices_list(struct rdmx_device_info **out, int *count)
{
	struct ibv_device **list;
	struct rdmx_device_info *devs;
	int n = 0, rc = 0;

	if (!out || !count)
		return rdmx__fail(-EINVAL, "rdmx_devices_list: out and count are required");
	*out = NULL;
	*count = 0;
	list = ibv_get_device_list(&n);
	if (!list)
		return errno == ENOSYS || errno == ENOENT ? 0 :
		       rdmx__fail(-errno, "ibv_get_device_list: %s", strerror(errno));
	devs = calloc(n ? (size_t)n : 1, sizeof(*devs));
	if (!devs)
		rc = rdmx__fail(-ENOMEM, "out of memory for %d devices", n);
	for (int i = 0; !rc && i < n; i++)
		rc = describe(list[i], &devs[i]);
	ibv_free_device_list(list);
	if (rc) {
		rdmx_devices_free(devs, n);
		return rc;
	}
	*out = devs;
	*count = n;
	return 0;
}

void rdmx_devices_free(struct rdmx_device_info *devs, int count)
{
	if (!devs)
		return;
	for (int i = 0; i < count; i++) {
		for (int p = 0; p < devs[i].n_ports; p++)
			free(devs[i].ports[p].gids);
		free(devs[i].ports);
	}
	free(devs);
}

/* ---------------------------------------------------- choosing an address */

int rdmx__address_choose(const struct rdmx_device_info *devs, int n,
			 const char *device, int gid_index, char *buf, size_t len)
{
	for (int i = 0; i < n; i++) {
		if (device && strcmp(devs[i].name, device))
			continue;
		for (int p = 0; p < devs[i].n_ports; p++) {
			const struct rdmx_port_info *pi = &devs[i].ports[p];
			int k = pi->picked_gid;

			if (pi->state != IBV_PORT_ACTIVE)
				continue;
			for (int g = 0; gid_index >= 0 && g < pi->n_gids; g++)
				k = pi->gids[g].index == gid_index ? g : k;
			if (gid_index >= 0 && (k < 0 || pi->gids[k].index != gid_index))
				return rdmx__fail(-EADDRNOTAVAIL, "GID index %d is not in the table of %s port %d",
						  gid_index, devs[i].name, pi->port);
			if (k < 0 || !pi->gids[k].addr[0])
				return rdmx__fail(-EADDRNOTAVAIL, "%s port %d has no GID with an IP address",
						  devs[i].name, pi->port);
			snprintf(buf, len, "%s", pi->gids[k].addr);
			return 0;
		}
	}
	if (device)
		return rdmx__fail(-ENODEV, "no RDMA device '%s' with an ACTIVE port", device);
	return rdmx__fail(-ENODEV, "no RDMA device with an ACTIVE port (" RDMX__NO_DEVICE_HINT ")");
}

int rdmx_pick_address(const char *device, int gid_index, char *buf, size_t len)
{
	struct rdmx_device_info *devs;
	int n, rc;

	if (!buf || !len)
		return rdmx__fail(-EINVAL, "rdmx_pick_address: buffer required");
	rc = rdmx_devices_list(&devs, &n);
	if (rc)
		return rc;
	rc = rdmx__address_choose(devs, n, device, gid_index, buf, len);
	rdmx_devices_free(devs, n);
	return rc;
}

int rdmx__dev_has_mw(const struct ibv_device_attr *attr)
{
	return attr->max_mw > 0 &&
	       (attr->device_cap_flags &
		(IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B));
}

static int isolation_of(struct ibv_device *dev)
{
	struct ibv_context *verbs = ibv_open_device(dev);
	struct ibv_device_attr attr;
	int rc;

	if (!verbs)
		return rdmx__fail(-errno ? -errno : -ENODEV, "cannot open %s: %s",
				  ibv_get_device_name(dev), strerror(errno));
	rc = ibv_query_device(verbs, &attr) ?
	     rdmx__fail(-errno, "ibv_query_device(%s): %s", ibv_get_device_name(dev),
			strerror(errno)) :
	     rdmx__dev_has_mw(&attr) ? RDMX_ISOLATION_WINDOWS : RDMX_ISOLATION_RIGHTS;
	ibv_close_device(verbs);
	return rc;
}

int rdmx_device_isolation(const char *name)
{
	struct ibv_device **list;
	int n = 0, rc;

	if (!name)
		return rdmx__fail(-EINVAL, "rdmx_device_isolation: a device name is required");
	list = ibv_get_device_list(&n);
	if (!list)
		return rdmx__fail(-ENODEV, "no RDMA devices: %s", strerror(errno));
	rc = rdmx__fail(-ENODEV, "no RDMA device named %s", name);
	for (int i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			rc = isolation_of(list[i]);
	ibv_free_device_list(list);
	return rc;
}
