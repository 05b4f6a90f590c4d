// SPDX-License-Identifier: MIT
/*
 * The connection options every rdmx subcommand shares: one block of rows
 * (protocol, device, GID index, port, timeout, wait mode, ring options,
 * fabric) with one help text each, so a letter and a long name mean the
 * same in every command. The letters are perftest's where perftest has the
 * meaning (-p port, -d device, -i IB port, -x GID index); perftest uses
 * every letter, so the protocol takes -c, perftest's connection type, the
 * nearest meaning. The old spellings stay as hidden rows (deprecated).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmds.h"

static const char *const fabrics[] = { "verbs", "fake", NULL };

/* RDMX_FABRIC, when it names a fabric: the default of --fabric. */
static const char *env_fabric(void)
{
	const char *e = getenv("RDMX_FABRIC");

	for (int i = 0; e && fabrics[i]; i++)
		if (!strcmp(e, fabrics[i]))
			return fabrics[i];
	return NULL;
}

static void row(struct opt **r, struct opt o)
{
	*(*r)++ = o;
}

static void protocol_rows(const struct cli_conn_dest *d, struct opt **r)
{
	if (!d->protocol)
		return;
	if (d->protocols) {
		row(r, (struct opt){ "protocol", 'c', OPT_CHOICE, d->protocol, 0, 0,
			d->protocols, "NAME", "rdmx protocol of the connections "
			"(perftest's -c, the connection type); both sides must "
			"use the same" });
		return;
	}
	row(r, (struct opt){ "protocol", 'c', OPT_STRING, d->protocol, 0, 0, NULL,
		"LIST", "rdmx protocols, 'tcp' (the kernel baseline), 'all' (every "
		"protocol and tcp) or a comma list (perftest's -c, the connection "
		"type)" });
}

static void address_rows(const struct cli_conn_dest *d, struct opt **r)
{
	if (d->device)
		row(r, (struct opt){ "device", 'd', OPT_STRING, d->device, 0, 0, NULL,
			"DEV", "RDMA device of the local address (default: the "
			"first active)" });
	if (d->ib_port)
		row(r, (struct opt){ "ib-port", 'i', OPT_INT, d->ib_port, 0, 255, NULL,
			"N", "port of the RDMA device whose address is the local one "
			"(0: the first active)" });
	if (d->gid_index) {
		row(r, (struct opt){ "gid-index", 'x', OPT_INT, d->gid_index, 0, 65535,
			NULL, "N", "GID table index of the local address (default: "
			"automatic, RoCEv2 IPv4 first)" });
		row(r, (struct opt){ "gid", 0, OPT_INT, d->gid_index, 0, 65535, NULL,
			"N", NULL });
	}
	if (d->port)
		row(r, (struct opt){ "port", 'p', OPT_INT, d->port, d->port_min, 65535,
			NULL, "PORT", d->port_min < 0 ?
			"port of the server: it listens (0: a free one; -1: none), a "
			"client dials it" :
			"port of the server: it listens (0: a free one), a client dials "
			"it; a command of several listeners uses PORT, PORT + 1, ..." });
	if (d->timeout)
		row(r, (struct opt){ "timeout", 0, OPT_INT, d->timeout, 1, 3600000, NULL,
			"MS", "bound of a connect and of each wait for a peer, in ms" });
}

static void ring_rows(const struct cli_conn_dest *d, struct opt **r)
{
	if (d->wait)
		row(r, (struct opt){ "wait", 0, OPT_CHOICE, d->wait, 0, 0, cli_wait_modes,
			"MODE", CLI_WAIT_HELP });
	if (d->notify)
		row(r, (struct opt){ "notify", 0, OPT_CHOICE, d->notify, 0, 0,
			cli_notify_modes, "HOW", CLI_NOTIFY_HELP });
	if (d->ack)
		row(r, (struct opt){ "ack", 0, OPT_CHOICE, d->ack, 0, 0, cli_ack_modes,
			"HOW", CLI_ACK_HELP });
	if (d->ring_size)
		row(r, (struct opt){ "ring-size", 0, OPT_SIZE, d->ring_size, CLI_RING_MIN,
			CLI_RING_MAX, NULL, "BYTES", CLI_RING_HELP });
}

void cli_conn_rows(const struct cli_conn_dest *d, struct opt *rows)
{
	struct opt *r = rows;

	protocol_rows(d, &r);
	address_rows(d, &r);
	ring_rows(d, &r);
	if (d->fabric) {
		if (env_fabric())
			*d->fabric = env_fabric();
		row(&r, (struct opt){ "fabric", 0, OPT_CHOICE, d->fabric, 0, 0, fabrics,
			"NAME", "verbs: RDMA; fake: the in-process test double (a "
			"self-test only); default: RDMX_FABRIC, else verbs" });
	}
	memset(r, 0, sizeof(*r));
}

/* Does the comma list @protocols name a ring protocol (or all)? */
static bool has_ring(const char *protocols)
{
	char name[64];

	while (protocols && *protocols) {
		size_t n = strcspn(protocols, ",");

		snprintf(name, sizeof(name), "%.*s", (int)(n < 63 ? n : 63), protocols);
		if (!strcmp(name, "all") || cli_is_ring(name))
			return true;
		protocols += n + (protocols[n] ? 1 : 0);
	}
	return false;
}

int cli_conn_check(const char *cmd, const struct cli_conn_dest *d)
{
	const char *e = getenv("RDMX_FABRIC");
	const char *p = d->protocol ? *d->protocol : NULL;

	if (e && *e && !env_fabric())
		return cmd_usage_err(cmd, "RDMX_FABRIC='%.40s' is not one of: verbs, fake", e);
	if (!d->protocol)
		return CMD_CONTINUE;
	if (d->notify && strcmp(*d->notify, "default") && !has_ring(p))
		return cmd_usage_err(cmd, "--notify %s: only the ring protocols "
				     "(write_simplex, write_magic, write_duplex) have it, "
				     "not %s", *d->notify, p ? p : "the default protocol");
	if (d->ack && strcmp(*d->ack, "default") && !has_ring(p))
		return cmd_usage_err(cmd, "--ack %s: only the ring protocols "
				     "(write_simplex, write_magic, write_duplex) have it, "
				     "not %s", *d->ack, p ? p : "the default protocol");
	return CMD_CONTINUE;
}

int cli_fake_server_refused(const char *cmd, const char *fabric)
{
	if (!fabric || strcmp(fabric, "fake"))
		return CMD_CONTINUE;
	return cmd_usage_err(cmd, "--fabric fake (or RDMX_FABRIC=fake): the fake "
			     "fabric lives inside one process, so a server on it is "
			     "out of every other process's reach (and a client finds "
			     "no server); run the self-test or use --fabric verbs");
}
