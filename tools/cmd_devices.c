// SPDX-License-Identifier: MIT
/* rdmx devices: RDMA devices, ports and GID tables, as a table or JSON. */
#include <stdio.h>
#include <string.h>

#include <rdmx/rdmx.h>

#include "cmds.h"
#include "hint.h"

static const struct opts_page devices_page = {
	.name = "rdmx-devices - list RDMA devices, ports and GIDs",
	.synopsis = "rdmx devices [--json]",
	.description =
		"Lists every RDMA device of this host with its node GUID and, for\n"
		"each port, the state, the active and maximum MTU, the link layer\n"
		"and the GID table: index, type (IB, RoCEv1, RoCEv2), GID, IP\n"
		"address and network device. The GID rdmx would pick on a port is\n"
		"marked with '*'. The last line names the device, port, GID and\n"
		"address rdmx uses when no address is given (for example by\n"
		"'rdmx pingpong' in self-test mode).",
	.exit_status =
		"0   at least one device was listed\n"
		"1   no RDMA device was found, or the devices could not be read\n"
		"2   usage error",
	.examples =
		"rdmx devices\n"
		"rdmx devices --json | jq '.picked.address'\n"
		"sandbox/run -- rdmx devices",
	.see_also = "rdmx(1), rdmx-pingpong(1), rdmx-bench(1)",
};

struct picked {
	const struct rdmx_device_info *dev;
	const struct rdmx_port_info *port;
	const struct rdmx_gid_info *gid;
	char addr[64];
};

static const char *gid_type_name(enum rdmx_gid_type t)
{
	switch (t) {
	case RDMX_GID_IB:
		return "IB";
	case RDMX_GID_ROCE_V1:
		return "RoCEv1";
	case RDMX_GID_ROCE_V2:
		return "RoCEv2";
	}
	return "?";
}

static const struct rdmx_gid_info *port_picked(const struct rdmx_port_info *p)
{
	if (p->picked_gid < 0 || p->picked_gid >= p->n_gids)
		return NULL;
	return &p->gids[p->picked_gid];
}

/* The device, port and GID of the address rdmx_pick_address() returns. */
static void find_picked(const struct rdmx_device_info *devs, int n,
			struct picked *pk)
{
	int d, p;

	memset(pk, 0, sizeof(*pk));
	if (rdmx_pick_address(NULL, -1, pk->addr, sizeof(pk->addr)))
		return;
	for (d = 0; d < n; d++) {
		for (p = 0; p < devs[d].n_ports; p++) {
			const struct rdmx_gid_info *g = port_picked(&devs[d].ports[p]);

			if (g && !strcmp(g->addr, pk->addr)) {
				pk->dev = &devs[d];
				pk->port = &devs[d].ports[p];
				pk->gid = g;
				return;
			}
		}
	}
}

/* ------------------------------------------------------------------ table */

static int addr_width(const struct rdmx_port_info *p)
{
	int i, w = (int)strlen("address");

	for (i = 0; i < p->n_gids; i++)
		if ((int)strlen(p->gids[i].addr) > w)
			w = (int)strlen(p->gids[i].addr);
	return w;
}

static void print_port(const struct rdmx_port_info *p)
{
	const struct rdmx_gid_info *picked = port_picked(p);
	int i, aw = addr_width(p);

	printf("  port %d: %s, mtu %d (max %d), link layer %s\n", p->port,
	       p->state_name, p->active_mtu, p->max_mtu, p->link_layer);
	if (!p->n_gids) {
		printf("      no GIDs\n");
		return;
	}
	printf("      %-5s  %-6s  %-39s  %-*s  %s\n", "index", "type", "gid",
	       aw, "address", "netdev");
	for (i = 0; i < p->n_gids; i++) {
		const struct rdmx_gid_info *g = &p->gids[i];

		printf("    %c %-5d  %-6s  %-39s  %-*s  %s\n", g == picked ? '*' : ' ',
		       g->index, gid_type_name(g->type), g->gid, aw,
		       g->addr[0] ? g->addr : "-", g->netdev[0] ? g->netdev : "-");
	}
}

static void print_table(const struct rdmx_device_info *devs, int n,
			const struct picked *pk)
{
	int d, p;

	for (d = 0; d < n; d++) {
		printf("%s%s  node GUID %s\n", d ? "\n" : "", devs[d].name,
		       devs[d].node_guid);
		for (p = 0; p < devs[d].n_ports; p++)
			print_port(&devs[d].ports[p]);
	}
	if (pk->gid)
		printf("\nrdmx would use: %s port %d gid %d (%s)\n", pk->dev->name,
		       pk->port->port, pk->gid->index, pk->addr);
	else if (pk->addr[0])
		printf("\nrdmx would use: %s\n", pk->addr);
	else
		printf("\nrdmx would use: nothing (%s)\n", rdmx_last_error());
}

/* ------------------------------------------------------------------- JSON */

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void json_field(const char *key, const char *val, const char *sep)
{
	printf("\"%s\": ", key);
	json_str(val);
	fputs(sep, stdout);
}

static void json_gid(const struct rdmx_gid_info *g, int picked, int last)
{
	printf("          {\"index\": %d, ", g->index);
	json_field("type", gid_type_name(g->type), ", ");
	json_field("gid", g->gid, ", ");
	json_field("address", g->addr, ", ");
	json_field("netdev", g->netdev, ", ");
	printf("\"picked\": %s}%s\n", picked ? "true" : "false", last ? "" : ",");
}

static void json_port(const struct rdmx_port_info *p, int last)
{
	const struct rdmx_gid_info *picked = port_picked(p);
	int i;

	printf("      {\"port\": %d, ", p->port);
	json_field("state", p->state_name, ", ");
	printf("\"active_mtu\": %d, \"max_mtu\": %d, ", p->active_mtu, p->max_mtu);
	json_field("link_layer", p->link_layer, ", ");
	printf("\"picked_gid_index\": %d,\n        \"gids\": [%s",
	       picked ? picked->index : -1, p->n_gids ? "\n" : "");
	for (i = 0; i < p->n_gids; i++)
		json_gid(&p->gids[i], &p->gids[i] == picked, i == p->n_gids - 1);
	printf("%s]}%s\n", p->n_gids ? "        " : "", last ? "" : ",");
}

static void json_picked(const struct picked *pk)
{
	if (!pk->gid) {
		printf("  \"picked\": null\n");
		return;
	}
	printf("  \"picked\": {");
	json_field("device", pk->dev->name, ", ");
	printf("\"port\": %d, \"gid_index\": %d, ", pk->port->port, pk->gid->index);
	json_field("address", pk->addr, "}\n");
}

static void print_json(const struct rdmx_device_info *devs, int n,
		       const struct picked *pk)
{
	int d, p;

	printf("{\n  \"devices\": [%s", n ? "\n" : "");
	for (d = 0; d < n; d++) {
		printf("    {");
		json_field("name", devs[d].name, ", ");
		json_field("node_guid", devs[d].node_guid, ", ");
		printf("\"ports\": [%s", devs[d].n_ports ? "\n" : "");
		for (p = 0; p < devs[d].n_ports; p++)
			json_port(&devs[d].ports[p], p == devs[d].n_ports - 1);
		printf("%s]}%s\n", devs[d].n_ports ? "    " : "", d == n - 1 ? "" : ",");
	}
	printf("%s],\n", n ? "  " : "");
	json_picked(pk);
	printf("}\n");
}

int cmd_devices(int argc, char **argv)
{
	struct rdmx_device_info *devs = NULL;
	bool json = false;
	const struct opt table[] = {
		{ "json", 0, OPT_FLAG, &json, 0, 0, NULL, NULL,
		  "print the same data as one JSON object" },
		{ 0 },
	};
	struct picked pk;
	int rc, n = 0;

	rc = cmd_parse(&devices_page, table, argc, argv, NULL, 0, &n);
	if (rc != CMD_CONTINUE)
		return rc;
	rc = rdmx_devices_list(&devs, &n);
	if (rc) {
		fprintf(stderr, "rdmx devices: cannot list RDMA devices: %s (%s)\n",
			rdmx_strerror(rc), rdmx_last_error());
		return EXIT_FAIL;
	}
	find_picked(devs, n, &pk);
	if (json)
		print_json(devs, n, &pk);
	else if (n)
		print_table(devs, n, &pk);
	rdmx_devices_free(devs, n);
	if (!n) {
		fprintf(stderr, "no RDMA devices found (is the rdma_rxe/ib_uverbs module "
			"loaded?)\n");
		hint_no_device(stderr, "devices");
		return EXIT_FAIL;
	}
	return EXIT_OK;
}
