// SPDX-License-Identifier: MIT
/* Error reporting and local address selection shared by the subcommands. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "cmds.h"
#include "hint.h"

void cli_set_err(struct cli_err *e, const char *fmt, ...)
{
	va_list ap;

	if (e->msg[0])
		return;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

int cli_note(struct cli_err *e, int *rcp, int rc, const char *fmt, ...)
{
	va_list ap;

	if (!e->msg[0]) {
		va_start(ap, fmt);
		vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
		va_end(ap);
	}
	return *rcp = rc;
}

int cli_fail(struct cli_err *e, const char *what, int rc, const rdmx_conn *conn)
{
	const char *detail = conn ? rdmx_conn_error(conn) : NULL;

	if (!detail || !*detail)
		detail = rdmx_last_error();
	if (detail && *detail)
		cli_set_err(e, "%s: %s (%s)", what, rdmx_strerror(rc), detail);
	else
		cli_set_err(e, "%s: %s", what, rdmx_strerror(rc));
	return EXIT_FAIL;
}

void cli_print_err(const char *cmd, const struct cli_err *e)
{
	if (e->msg[0])
		fprintf(stderr, "rdmx %s: %s\n", cmd, e->msg);
}

/* The address of GID @gid_index (-1: the one rdmx picks) of port @p. */
static int gid_address(const char *dev, const struct rdmx_port_info *p, int gid_index,
		       char *buf, size_t len, struct cli_err *e)
{
	int k = p->picked_gid;

	if (strcasecmp(p->state_name, "active")) {
		cli_set_err(e, "-i %d: port %d of %s is %s, not ACTIVE", p->port, p->port,
			    dev, p->state_name);
		return -EADDRNOTAVAIL;
	}
	for (int g = 0; gid_index >= 0 && g < p->n_gids; g++)
		k = p->gids[g].index == gid_index ? g : k;
	if (k < 0 || (gid_index >= 0 && p->gids[k].index != gid_index) ||
	    !p->gids[k].addr[0]) {
		cli_set_err(e, "-i %d: port %d of %s has no GID %s with an IP address",
			    p->port, p->port, dev, gid_index >= 0 ? "of that index" : "");
		return -EADDRNOTAVAIL;
	}
	snprintf(buf, len, "%s", p->gids[k].addr);
	return 0;
}

/* -i: the address of port @ib_port of @device (NULL: the first device
 * that has such a port), as rdmx_pick_address() picks a port's. */
static int port_address(const char *device, int ib_port, int gid_index, char *buf,
			size_t len, struct cli_err *e)
{
	struct rdmx_device_info *devs;
	int n, rc = rdmx_devices_list(&devs, &n);

	if (rc) {
		cli_fail(e, "list RDMA devices", rc, NULL);
		return rc;
	}
	rc = -ENODEV;
	for (int i = 0; i < n && rc == -ENODEV; i++)
		for (int p = 0; p < devs[i].n_ports && rc == -ENODEV; p++)
			if ((!device || !strcmp(device, devs[i].name)) &&
			    devs[i].ports[p].port == ib_port)
				rc = gid_address(devs[i].name, &devs[i].ports[p], gid_index,
						 buf, len, e);
	rdmx_devices_free(devs, n);
	if (rc == -ENODEV && device)
		cli_set_err(e, "-i %d: RDMA device %s has no port %d", ib_port, device,
			    ib_port);
	else if (rc == -ENODEV)
		cli_set_err(e, "-i %d: no RDMA device has a port %d", ib_port, ib_port);
	return rc;
}

int cli_local_addr(const char *cmd, const char *fabric, const char *device,
		   int ib_port, int gid_index, char *buf, size_t len)
{
	struct cli_err e = { "" };
	int rc;

	if (!strcmp(fabric, "fake")) {
		snprintf(buf, len, "fake"); /* the fake fabric's only address */
		return EXIT_OK;
	}
	if (ib_port > 0 && port_address(device, ib_port, gid_index, buf, len, &e)) {
		cli_print_err(cmd, &e);
		fprintf(stderr, "rdmx %s: see 'rdmx devices'\n", cmd);
		return EXIT_FAIL;
	}
	rc = ib_port > 0 ? 0 : rdmx_pick_address(device, gid_index, buf, len);
	if (rc) {
		cli_fail(&e, "no local RDMA address", rc, NULL);
		cli_print_err(cmd, &e);
		fprintf(stderr, "rdmx %s: see 'rdmx devices'\n", cmd);
		hint_no_device(stderr, cmd);
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

long long cli_ring_size(const char *cmd, uint64_t given, uint64_t max_msg)
{
	struct rdmx_conn_opts o;
	uint64_t r;

	if (given) {
		if (given & (given - 1)) {
			fprintf(stderr, "rdmx %s: --ring-size %llu is not a power of 2 "
				"(e.g. 64K, 1M, 16M)\n", cmd, (unsigned long long)given);
			return -1;
		}
		return (long long)given;
	}
	rdmx_conn_opts_init(&o);
	for (r = o.ring_size; r < 4 * max_msg && r < CLI_RING_MAX; r <<= 1)
		;
	return (long long)r;
}

uint64_t cli_elapsed_ns(const struct timespec *a, const struct timespec *b)
{
	return (uint64_t)(b->tv_sec - a->tv_sec) * 1000000000ull +
	       (uint64_t)b->tv_nsec - (uint64_t)a->tv_nsec;
}

const char *const cli_wait_modes[] = { "adaptive", "spin", "block", NULL };
const char *const cli_notify_modes[] = { "default", "poll", "imm", "off", "rev", NULL };
const char *const cli_ack_modes[] = { "default", "send", "read", NULL };

int cli_is_ring(const char *protocol)
{
	return !strcmp(protocol, "write_simplex") || !strcmp(protocol, "write_magic") ||
	       !strcmp(protocol, "write_duplex");
}

void cli_ring_variant_only(const char *protocol, struct rdmx_conn_opts *o)
{
	if (!cli_is_ring(protocol)) {
		o->notify = RDMX_NOTIFY_DEFAULT;
		o->ack = RDMX_ACK_DEFAULT;
	}
}

uint8_t cli_choice_index(const char *const *choices, const char *name)
{
	for (uint8_t i = 0; name && choices[i]; i++)
		if (!strcmp(choices[i], name))
			return i;
	return 0;
}

uint8_t cli_wait_mode(const char *name)
{
	if (name && !strcmp(name, "spin"))
		return RDMX_WAIT_SPIN;
	if (name && !strcmp(name, "block"))
		return RDMX_WAIT_BLOCK;
	return RDMX_WAIT_ADAPTIVE;
}

void cli_lab_caps(struct rdmx_listener_opts *lo)
{
	rdmx_listener_opts_init(lo);
	lo->max_mem = 0;
	lo->max_conns_per_peer = 0;
}
