// SPDX-License-Identifier: MIT
/*
 * rdmx doctor: the checks a person runs by hand in a SoftRoCE lab, one line
 * each (ok, warn, fail, skip) with the fix. The checks are a table; each
 * appends findings to one list, which is printed as text or JSON. Kernel
 * facts come from /sys and /proc, devices from rdmx_devices_list(), the
 * route from rdmx_route() and the round trip from an rdmx connection: the
 * public API and the files a person would read, nothing else.
 */
#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <rdmx/rdmx.h>

#include "cli.h"
#include "cmds.h"

static const struct opts_page doctor_page = {
	.name = "rdmx-doctor - check this host's RDMA set-up, and the way to a peer",
	.synopsis = "rdmx doctor [--json] [-d DEV] [-c PROTOCOL] [-p PORT] [--timeout MS] [PEER]",
	.description =
		"Runs the checks of a SoftRoCE or RoCE lab and prints one line per\n"
		"finding: ok, warn, fail or skip, what was seen and, for warn and\n"
		"fail, the fix. The checks: the kernel modules (ib_core, ib_uverbs,\n"
		"rdma_cm, rdma_ucm and an RDMA driver); the device nodes under\n"
		"/dev/infiniband; the RDMA devices; each port's state; the netdev\n"
		"MTU against the port's active RDMA MTU; the GID rdmx picks (a\n"
		"RoCEv2 GID with an IPv4 address is best; only link-local GIDs\n"
		"fail); the memlock limit against what a default connection\n"
		"registers; hugepages (information only); firewall rules that drop\n"
		"RoCEv2's UDP port 4791 (nft, iptables); and the port hw_counters\n"
		"that point at trouble (retries, sequence errors, RNR). --device and\n"
		"--ib-port check that device's, that port's only.\n"
		"\n"
		"With PEER, also: rdma_cm resolving PEER's address and route to a\n"
		"local device and port, and one 64-byte message echoed by an\n"
		"'rdmx pingpong --server' listening on PEER and --port (with the same\n"
		"--protocol).",
	.exit_status =
		"0   no check failed (warnings allowed)\n"
		"1   at least one check failed\n"
		"2   usage error",
	.examples =
		"rdmx doctor\n"
		"rdmx doctor 10.77.0.2            # with 'rdmx pingpong --server' there\n"
		"rdmx doctor --json | jq '.checks[] | select(.result != \"ok\")'\n"
		"sandbox/run -- rdmx doctor",
	.see_also = "rdmx(1), rdmx-devices(1), rdmx-pingpong(1)",
};

enum verdict { V_OK, V_WARN, V_FAIL, V_SKIP };

static const char *const verdict_name[] = { "ok", "warn", "fail", "skip" };

#define MAX_FINDINGS 64
#define ROCE_HEADROOM 80 /* bytes of headers rxe keeps below the netdev MTU */
#define DEFAULT_CONN_BYTES (128ull * 65536) /* send_recv: 64 + 64 x 64 KiB */

struct finding {
	enum verdict v;
	char check[24];
	char detail[320];
	char fix[256];
};

struct doctor {
	struct finding f[MAX_FINDINGS];
	int n;
	struct rdmx_device_info *devs;
	int ndev;
	const char *peer, *device, *protocol;
	long long port, timeout, ib_port;
};

static void note(struct doctor *d, enum verdict v, const char *check,
		 const char *fix, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static void note(struct doctor *d, enum verdict v, const char *check,
		 const char *fix, const char *fmt, ...)
{
	struct finding *f;
	va_list ap;

	if (d->n == MAX_FINDINGS)
		return;
	f = &d->f[d->n++];
	f->v = v;
	snprintf(f->check, sizeof(f->check), "%s", check);
	snprintf(f->fix, sizeof(f->fix), "%s", fix ? fix : "");
	va_start(ap, fmt);
	vsnprintf(f->detail, sizeof(f->detail), fmt, ap);
	va_end(ap);
}

static int module_loaded(const char *name)
{
	char p[256];

	snprintf(p, sizeof(p), "/sys/module/%s", name);
	return access(p, F_OK) == 0;
}

/* The first line of a small file as a number; -1 when unreadable. */
static long long read_number(const char *path)
{
	long long v = -1;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* ------------------------------------------------------- host-wide checks */

static void check_modules(struct doctor *d)
{
	static const char *const core[] = { "ib_core", "ib_uverbs", "rdma_cm", "rdma_ucm" };
	static const char *const drivers[] = {
		"rdma_rxe", "siw", "mlx5_ib", "mlx4_ib", "irdma", "bnxt_re", "efa",
		"hns_roce_hw_v2", "qedr", "erdma", "mana_ib", "iw_cxgb4", "vmw_pvrdma",
	};
	char missing[128] = "", fix[160], have[64] = "";

	for (size_t i = 0; i < sizeof(core) / sizeof(core[0]); i++)
		if (!module_loaded(core[i]))
			snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing),
				 " %s", core[i]);
	for (size_t i = 0; i < sizeof(drivers) / sizeof(drivers[0]) && !have[0]; i++)
		if (module_loaded(drivers[i]))
			snprintf(have, sizeof(have), "%s", drivers[i]);
	if (missing[0]) {
		snprintf(fix, sizeof(fix), "modprobe -a%s", missing);
		note(d, V_FAIL, "modules", fix, "not loaded:%s", missing);
	} else if (!have[0]) {
		note(d, V_FAIL, "modules",
		     "for SoftRoCE: modprobe rdma_rxe && rdma link add rxe0 type rxe netdev IFACE",
		     "RDMA core loaded, but no RDMA driver (rdma_rxe, mlx5_ib, ...)");
	} else {
		note(d, V_OK, "modules", NULL, "ib_core ib_uverbs rdma_cm rdma_ucm, driver %s", have);
	}
}

static void check_dev_nodes(struct doctor *d)
{
	glob_t g;
	int uverbs = glob("/dev/infiniband/uverbs*", 0, NULL, &g) == 0;
	int ok_uverbs = uverbs && access(g.gl_pathv[0], R_OK | W_OK) == 0;
	int ok_cm = access("/dev/infiniband/rdma_cm", R_OK | W_OK) == 0;

	if (uverbs)
		globfree(&g);
	if (ok_uverbs && ok_cm)
		note(d, V_OK, "device nodes", NULL, "/dev/infiniband/rdma_cm and uverbs usable");
	else
		note(d, V_FAIL, "device nodes",
		     "modprobe ib_uverbs rdma_ucm; give this user read/write access (udev, group rdma)",
		     "%s%s", ok_cm ? "" : "/dev/infiniband/rdma_cm missing or not read/writable ",
		     ok_uverbs ? "" : "/dev/infiniband/uverbs* missing or not read/writable");
}

static void check_devices(struct doctor *d)
{
	int rc = rdmx_devices_list(&d->devs, &d->ndev);

	if (rc) {
		d->ndev = 0;
		note(d, V_FAIL, "devices", "check the modules above",
		     "cannot list RDMA devices: %s", rdmx_last_error());
	} else if (!d->ndev) {
		note(d, V_FAIL, "devices",
		     "for SoftRoCE: rdma link add rxe0 type rxe netdev IFACE",
		     "no RDMA device");
	} else {
		note(d, V_OK, "devices", NULL, "%d: %s%s", d->ndev, d->devs[0].name,
		     d->ndev > 1 ? ", ..." : "");
	}
}

/* Which isolation a server on each device gives memory it exports to one
 * client (docs/isolation.md): windows bound to the client's QP, or exact
 * rights only (a warning: a key works on every QP of the domain). */
static void check_isolation(struct doctor *d)
{
	for (int i = 0; i < d->ndev; i++) {
		const char *n = d->devs[i].name;
		int iso = rdmx_device_isolation(n);

		if (iso == RDMX_ISOLATION_WINDOWS)
			note(d, V_OK, "isolation", NULL, "%s: memory windows (type 2): memory a "
			     "server exports to a client works only over that client's queue "
			     "pair", n);
		else if (iso == RDMX_ISOLATION_RIGHTS)
			note(d, V_WARN, "isolation", "a device with type 2 memory windows isolates "
			     "clients of one server from each other",
			     "%s: no memory windows: exported memory has exact rights but its "
			     "key works on every queue pair of the server's domain", n);
		else
			note(d, V_FAIL, "isolation", NULL, "%s: %s", n, rdmx_last_error());
	}
}

/* CapEff bit 14 (CAP_IPC_LOCK): registrations are not limited. */
static int has_ipc_lock(void)
{
	char line[128];
	unsigned long long cap = 0;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &cap) == 1)
			break;
	fclose(f);
	return (cap >> 14) & 1;
}

static void check_memlock(struct doctor *d)
{
	const char *fix = "ulimit -l unlimited (or 'memlock unlimited' in "
			  "/etc/security/limits.conf, LimitMEMLOCK=infinity for a service)";
	struct rlimit r;
	double mib = (double)DEFAULT_CONN_BYTES / (1 << 20);

	if (getrlimit(RLIMIT_MEMLOCK, &r) || r.rlim_cur == RLIM_INFINITY)
		note(d, V_OK, "memlock", NULL, "unlimited");
	else if (has_ipc_lock())
		note(d, V_OK, "memlock", NULL, "limit %llu KiB, but CAP_IPC_LOCK lifts it",
		     (unsigned long long)r.rlim_cur >> 10);
	else if (r.rlim_cur < DEFAULT_CONN_BYTES)
		note(d, V_FAIL, "memlock", fix,
		     "limit %llu KiB: less than one default connection registers (%.0f MiB)",
		     (unsigned long long)r.rlim_cur >> 10, mib);
	else if (r.rlim_cur < 16 * DEFAULT_CONN_BYTES)
		note(d, V_WARN, "memlock", fix,
		     "limit %llu KiB: %llu default connections (%.0f MiB each)",
		     (unsigned long long)r.rlim_cur >> 10,
		     (unsigned long long)(r.rlim_cur / DEFAULT_CONN_BYTES), mib);
	else
		note(d, V_OK, "memlock", NULL, "limit %llu KiB", (unsigned long long)r.rlim_cur >> 10);
}

static void check_hugepages(struct doctor *d)
{
	long long total = -1, nfree = -1, kb = -1;
	char line[128];
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f)) {
		sscanf(line, "HugePages_Total: %lld", &total);
		sscanf(line, "HugePages_Free: %lld", &nfree);
		sscanf(line, "Hugepagesize: %lld", &kb);
	}
	if (f)
		fclose(f);
	if (total < 0)
		note(d, V_SKIP, "hugepages", NULL, "/proc/meminfo has no hugepage figures");
	else
		note(d, V_OK, "hugepages", NULL,
		     "%lld of %lld kB configured, %lld free (rdmx does not need them)",
		     total, kb, nfree);
}

/* Lines of @cmd's output that drop or reject UDP 4791; -1 if it did not run. */
static int firewall_scan(const char *cmd, char *hit, size_t len)
{
	char line[512], low[512];
	int n = 0, lines = 0;
	FILE *p = popen(cmd, "r");

	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		size_t i;

		lines++;
		for (i = 0; line[i] && i < sizeof(low) - 1; i++)
			low[i] = (char)tolower((unsigned char)line[i]);
		low[i] = 0;
		if (!strstr(low, "4791") || (!strstr(low, "drop") && !strstr(low, "reject")))
			continue;
		if (!n++)
			snprintf(hit, len, "%s", line);
	}
	if (pclose(p) != 0 && !lines)
		return -1;
	return n;
}

static void check_firewall(struct doctor *d)
{
	char hit[512] = "";
	int nft = firewall_scan("nft list ruleset 2>/dev/null", hit, sizeof(hit));
	int ipt = firewall_scan("iptables-save 2>/dev/null", hit, sizeof(hit));

	hit[strcspn(hit, "\n")] = 0;
	if (nft > 0 || ipt > 0)
		note(d, V_FAIL, "firewall",
		     "delete the rule: RoCEv2 runs over UDP port 4791",
		     "a rule drops UDP 4791: %s", hit);
	else if (nft < 0 && ipt < 0)
		note(d, V_SKIP, "firewall", NULL,
		     "cannot read the rules (nft/iptables-save missing or not permitted)");
	else
		note(d, V_OK, "firewall", NULL, "no rule drops UDP 4791");
}

/* ------------------------------------------------------- per-port checks */

static const char *port_netdev(const struct rdmx_port_info *p)
{
	if (p->picked_gid >= 0 && p->picked_gid < p->n_gids && p->gids[p->picked_gid].netdev[0])
		return p->gids[p->picked_gid].netdev;
	for (int i = 0; i < p->n_gids; i++)
		if (p->gids[i].netdev[0])
			return p->gids[i].netdev;
	return NULL;
}

static void check_port_state(struct doctor *d, const char *dev,
			     const struct rdmx_port_info *p)
{
	const char *nd = port_netdev(p);
	char fix[128];

	snprintf(fix, sizeof(fix), "ip link set dev %s up", nd ? nd : "NETDEV");
	if (!strcasecmp(p->state_name, "active"))
		note(d, V_OK, "port", NULL, "%s port %d %s (%s)", dev, p->port, p->state_name, p->link_layer);
	else
		note(d, V_FAIL, "port", fix, "%s port %d is %s", dev, p->port, p->state_name);
}

/* The largest IB MTU a netdev MTU carries with RoCE's headers. */
static int mtu_fit(long long netdev_mtu, int max_mtu)
{
	int m = 4096;

	while (m > 256 && (m + ROCE_HEADROOM > netdev_mtu || m > max_mtu))
		m /= 2;
	return m;
}

static void check_mtu(struct doctor *d, const char *dev, const struct rdmx_port_info *p)
{
	const char *nd = port_netdev(p);
	char path[160], fix[160];
	long long mtu;
	int fit;

	if (!nd || strcmp(p->link_layer, "Ethernet"))
		return;
	snprintf(path, sizeof(path), "/sys/class/net/%s/mtu", nd);
	mtu = read_number(path);
	if (mtu < 0) {
		note(d, V_SKIP, "mtu", NULL, "cannot read %s", path);
		return;
	}
	fit = mtu_fit(mtu, p->max_mtu);
	snprintf(fix, sizeof(fix), "ip link set dev %s mtu %d", nd,
		 p->active_mtu + ROCE_HEADROOM > 1500 ? p->active_mtu + ROCE_HEADROOM : 1500);
	if (p->active_mtu + ROCE_HEADROOM > mtu)
		note(d, V_FAIL, "mtu", fix, "%s port %d: RDMA MTU %d does not fit %s's MTU %lld: "
		     "full-size packets are dropped", dev, p->port, p->active_mtu, nd, mtu);
	else if (p->active_mtu < 1024)
		note(d, V_FAIL, "mtu", fix, "%s port %d: %s's MTU %lld leaves room for RDMA MTU %d "
		     "only (RoCE expects 1024 or more: a 1500-byte Ethernet MTU)",
		     dev, p->port, nd, mtu, p->active_mtu);
	else if (p->active_mtu < fit)
		note(d, V_WARN, "mtu", "set the port's MTU to match (rxe follows its netdev "
		     "when rxe0 is created)", "%s port %d: RDMA MTU %d, %s's MTU %lld allows %d",
		     dev, p->port, p->active_mtu, nd, mtu, fit);
	else
		note(d, V_OK, "mtu", NULL, "%s port %d: RDMA MTU %d within %s's MTU %lld",
		     dev, p->port, p->active_mtu, nd, mtu);
}

static void check_gid(struct doctor *d, const char *dev, const struct rdmx_port_info *p)
{
	const struct rdmx_gid_info *g = p->picked_gid >= 0 && p->picked_gid < p->n_gids ?
					&p->gids[p->picked_gid] : NULL;
	const char *nd = port_netdev(p);
	char fix[160];

	snprintf(fix, sizeof(fix), "give %s an IPv4 address: ip addr add A.B.C.D/24 dev %s",
		 nd ? nd : "the netdev", nd ? nd : "NETDEV");
	if (!strcmp(p->link_layer, "InfiniBand"))
		note(d, V_OK, "gid", NULL, "%s port %d: InfiniBand, GID index %d", dev, p->port,
		     g ? g->index : 0);
	else if (!g || !strncmp(g->addr, "fe80:", 5))
		note(d, V_FAIL, "gid", fix, "%s port %d: no routable GID (only link-local ones): "
		     "rdma_cm has no address to connect from", dev, p->port);
	else if (g->type == RDMX_GID_ROCE_V2 && strchr(g->addr, '.'))
		note(d, V_OK, "gid", NULL, "%s port %d: rdmx uses GID index %d, RoCEv2 %s",
		     dev, p->port, g->index, g->addr);
	else
		note(d, V_WARN, "gid", fix, "%s port %d: no RoCEv2 IPv4 GID; rdmx uses index %d (%s%s)",
		     dev, p->port, g->index, g->type == RDMX_GID_ROCE_V2 ? "RoCEv2 " : "RoCEv1 ",
		     g->addr);
}

static const struct {
	const char *name;
	const char *means;
} trouble[] = {
	{ "retry_exceeded_err", "requests gave up after the transport retries" },
	{ "retry_rnr_exceeded_err", "RNR retries exhausted" },
	{ "local_ack_timeout_err", "ACK timeouts" },
	{ "completer_retry_err", "retransmissions" },
	{ "rcvd_seq_err", "out-of-sequence packets" },
	{ "out_of_sequence", "out-of-sequence packets" },
	{ "out_of_seq_request", "out-of-sequence requests" },
	{ "duplicate_request", "duplicate requests (retransmitted)" },
	{ "rnr_nak_retry_err", "RNR NAK retries" },
	{ "rcvd_rnr_err", "RNR NAKs received (a peer had no receive posted)" },
};

static void check_counters(struct doctor *d, const char *dev, const struct rdmx_port_info *p)
{
	char dir[160], path[256], seen[256] = "";
	int any = 0;

	snprintf(dir, sizeof(dir), "/sys/class/infiniband/%s/ports/%d/hw_counters", dev, p->port);
	if (access(dir, R_OK)) {
		note(d, V_SKIP, "hw_counters", NULL, "%s port %d: no %s", dev, p->port, dir);
		return;
	}
	for (size_t i = 0; i < sizeof(trouble) / sizeof(trouble[0]); i++) {
		long long v;

		snprintf(path, sizeof(path), "%s/%s", dir, trouble[i].name);
		v = read_number(path);
		if (v <= 0)
			continue;
		any = 1;
		snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), "%s%s %lld (%s)",
			 seen[0] ? ", " : "", trouble[i].name, v, trouble[i].means);
	}
	if (any)
		note(d, V_WARN, "hw_counters", "look for packet loss (netem, a congested link, an "
		     "MTU mismatch); the counters add up since the device was created",
		     "%s port %d: %s", dev, p->port, seen);
	else
		note(d, V_OK, "hw_counters", NULL, "%s port %d: no retries, sequence errors or RNR",
		     dev, p->port);
}

static void check_ports(struct doctor *d)
{
	bool seen = false;

	for (int i = 0; i < d->ndev; i++) {
		const struct rdmx_device_info *dv = &d->devs[i];

		if (d->device && strcmp(d->device, dv->name))
			continue;
		for (int k = 0; k < dv->n_ports; k++) {
			if (d->ib_port && dv->ports[k].port != d->ib_port)
				continue;
			seen = true;
			check_port_state(d, dv->name, &dv->ports[k]);
			check_mtu(d, dv->name, &dv->ports[k]);
			check_gid(d, dv->name, &dv->ports[k]);
			check_counters(d, dv->name, &dv->ports[k]);
		}
	}
	if ((d->device || d->ib_port) && !seen)
		note(d, V_FAIL, "device", "see 'rdmx devices'", "no port %lld of RDMA "
		     "device %s", d->ib_port, d->device ? d->device : "(any)");
}

/* ------------------------------------------------------------ the peer */

static void check_route(struct doctor *d)
{
	char dev[64];
	int port = 0;

	if (!d->peer)
		return;
	if (rdmx_route(d->peer, (int)d->timeout, dev, sizeof(dev), &port))
		note(d, V_FAIL, "route", "check the address and 'ip route get PEER': the interface "
		     "that reaches it needs an RDMA device", "%s", rdmx_last_error());
	else
		note(d, V_OK, "route", NULL, "%s resolves via %s port %d", d->peer, dev, port);
}

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* One 64-byte message to a pingpong server and its echo; 0 or -errno. */
static int round_trip(rdmx_conn *c, int timeout_ms, double *us)
{
	struct rdmx_msg m;
	double t0 = now_us();
	int rc;

	rc = rdmx_msg_alloc(c, 64, &m, timeout_ms);
	if (rc)
		return rc;
	memset(m.data, 0x5a, 64);
	m.len = 64;
	rc = rdmx_send(c, &m);
	if (!rc)
		rc = rdmx_recv(c, &m, timeout_ms);
	if (rc)
		return rc;
	if (m.len != 64 || ((const unsigned char *)m.data)[63] != 0x5a)
		rc = -EPROTO;
	rdmx_msg_release(c, &m);
	*us = now_us() - t0;
	return rc;
}

static void check_pingpong(struct doctor *d)
{
	struct rdmx_ctx_opts co = { 0 };
	struct rdmx_conn_opts o;
	char fix[160];
	rdmx_ctx *ctx;
	rdmx_conn *c;
	double us = 0;
	int rc;

	if (!d->peer)
		return;
	snprintf(fix, sizeof(fix), "start 'rdmx pingpong --server' on %s (port %lld), or "
		 "give its --port", d->peer, d->port);
	rdmx_conn_opts_init(&o);
	o.connect_timeout_ms = (int)d->timeout;
	if (d->protocol)
		o.protocol = d->protocol;
	rc = rdmx_ctx_create(&ctx, &co);
	if (rc) {
		note(d, V_FAIL, "pingpong", NULL, "no rdmx context: %s", rdmx_last_error());
		return;
	}
	rc = rdmx_dial(ctx, d->peer, (uint16_t)d->port, &o, &c);
	if (rc) {
		note(d, V_FAIL, "pingpong", fix, "cannot connect to %s port %lld: %s", d->peer,
		     d->port, rdmx_last_error());
	} else {
		rc = round_trip(c, (int)d->timeout, &us);
		if (rc)
			note(d, V_FAIL, "pingpong", fix, "no echo from %s: %s (%s)", d->peer,
			     rdmx_strerror(rc), rdmx_conn_error(c));
		else
			note(d, V_OK, "pingpong", NULL, "64 bytes to %s port %lld and back in %.0f us",
			     d->peer, d->port, us);
		rdmx_conn_close(c);
	}
	rdmx_ctx_destroy(ctx);
}

/* ------------------------------------------------------------- output */

static void json_str(const char *key, const char *s, const char *sep)
{
	printf("\"%s\": \"", key);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	printf("\"%s", sep);
}

static void print_json(const struct doctor *d, const int *count)
{
	printf("{\n  \"checks\": [\n");
	for (int i = 0; i < d->n; i++) {
		printf("    {");
		json_str("check", d->f[i].check, ", ");
		json_str("result", verdict_name[d->f[i].v], ", ");
		json_str("detail", d->f[i].detail, ", ");
		json_str("fix", d->f[i].fix, "");
		printf("}%s\n", i == d->n - 1 ? "" : ",");
	}
	printf("  ],\n  \"ok\": %d, \"warn\": %d, \"fail\": %d, \"skip\": %d\n}\n",
	       count[V_OK], count[V_WARN], count[V_FAIL], count[V_SKIP]);
}

static void print_text(const struct doctor *d, const int *count)
{
	for (int i = 0; i < d->n; i++) {
		printf("%-5s %-13s %s\n", verdict_name[d->f[i].v], d->f[i].check, d->f[i].detail);
		if (d->f[i].fix[0] && (d->f[i].v == V_WARN || d->f[i].v == V_FAIL))
			printf("%-19s fix: %s\n", "", d->f[i].fix);
	}
	printf("rdmx doctor: %d ok, %d warning%s, %d failure%s, %d skipped\n", count[V_OK],
	       count[V_WARN], count[V_WARN] == 1 ? "" : "s", count[V_FAIL],
	       count[V_FAIL] == 1 ? "" : "s", count[V_SKIP]);
}

static void (*const checks[])(struct doctor *d) = {
	check_modules, check_dev_nodes, check_devices, check_ports, check_isolation,
	check_memlock, check_hugepages, check_firewall, check_route, check_pingpong,
};

int cmd_doctor(int argc, char **argv)
{
	static struct doctor d;
	bool json = false;
	const struct cli_conn_dest conn = {
		.protocol = &d.protocol, .protocols = rdmx_protocol_names(),
		.device = &d.device, .ib_port = &d.ib_port, .port = &d.port, .timeout = &d.timeout,
	};
	struct opt conn_rows[CLI_CONN_ROWS];
	const struct opt table[] = {
		OPTS_INCLUDE(conn_rows),
		{ "json", 0, OPT_FLAG, &json, 0, 0, NULL, NULL,
		  "print the findings as one JSON object" },
		{ 0 },
	};
	const char *pos[1];
	int count[4] = { 0 }, rc, npos = 0;

	d.port = RDMX_DEFAULT_PORT;
	d.timeout = 5000;
	cli_conn_rows(&conn, conn_rows);
	rc = cmd_parse(&doctor_page, table, argc, argv, pos, 1, &npos);
	if (rc == CMD_CONTINUE)
		rc = cli_conn_check("doctor", &conn);
	if (rc == CMD_CONTINUE && npos && d.port == 0)
		rc = cmd_usage_err("doctor", "%s", "--port 0: the peer's pingpong "
				   "server listens on a port, 1-65535");
	if (rc != CMD_CONTINUE)
		return rc;
	d.peer = npos ? pos[0] : NULL;
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
		checks[i](&d);
	rdmx_devices_free(d.devs, d.ndev);
	for (int i = 0; i < d.n; i++)
		count[d.f[i].v]++;
	if (json)
		print_json(&d, count);
	else
		print_text(&d, count);
	return count[V_FAIL] ? EXIT_FAIL : EXIT_OK;
}
