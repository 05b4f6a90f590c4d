// SPDX-License-Identifier: MIT
/* rdmx kv: the rdmx KV server and client (include/rdmx/kv.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmx/kv.h>
#include <rdmx/rdmx.h>

#include "cli.h"
#include "cmds.h"
#include "kv_bench.h"

static const struct opts_page kv_page = {
	.name = "rdmx-kv - the rdmx key-value server",
	.synopsis = "rdmx kv serve [ADDR] [--port PORT] [--transport NAME] [--protocol NAME]\n"
		    "              [--memcached-port PORT] [--memcached-addr ADDR]\n"
		    "              [--capacity N] [--memory BYTES] [--inline-max BYTES]\n"
		    "              [--item-max BYTES] [--max-clients N] [--evict none|lru]\n"
		    "              [--idle-timeout MS] [--conn-buffer BYTES] [--buffer-max BYTES]\n"
		    "              [--reqs-per-event N]\n"
		    "rdmx kv get ADDR KEY [--get-path rpc|read|auto]\n"
		    "rdmx kv put ADDR KEY VALUE\n"
		    "rdmx kv del ADDR KEY\n"
		    "rdmx kv bench [BENCH OPTIONS] [ADDR]",
	.description =
		"'rdmx kv serve' runs a key-value store: a hash table of\n"
		"self-verifying entries in one flat memory region (a version, odd\n"
		"while an entry is written, and a checksum over the key, the value and\n"
		"the version), values longer than --inline-max in a second region.\n"
		"It holds --capacity keys at most and --memory bytes of out-of-line\n"
		"values; a store into a full table is refused (SERVER_ERROR out of\n"
		"memory storing object), nothing is evicted, unless --evict lru: then\n"
		"the least recently used key in the way goes (sampled LRU over access\n"
		"ticks the server keeps; a store, a touch and a GET the server answers\n"
		"count as accesses, a GET by one-sided READ does not: the server never\n"
		"sees it). An evicted key is a miss on both doors; stats counts\n"
		"evictions.\n"
		"\n"
		"With --memcached-port, the store speaks memcached's ASCII protocol\n"
		"over TCP (set, add, replace, append, prepend, cas, get, gets,\n"
		"delete, incr, decr, touch, flush_all, version, verbosity, stats,\n"
		"quit), with memcached 1.6's replies, so memcached clients and load\n"
		"tools work unchanged. It listens on 127.0.0.1 unless\n"
		"--memcached-addr says otherwise (as Debian's memcached.conf: the\n"
		"protocol has no authentication; --memcached-addr 0.0.0.0 opens it to\n"
		"every network). It survives what memcached survives: past\n"
		"--max-clients (memcached -c) or out of file descriptors a newcomer\n"
		"is told \"ERROR Too many open connections\" and closed, and accepting\n"
		"pauses rather than spins; a connection idle for --idle-timeout is\n"
		"closed (memcached -o idle_timeout); a connection runs\n"
		"--reqs-per-event commands, then the others have their turn\n"
		"(memcached -R); what one connection buffers\n"
		"(--conn-buffer) and all of them together (--buffer-max, as memcached\n"
		"-o read_buf_mem_limit) are capped, a request past a cap refused with\n"
		"memcached's \"SERVER_ERROR out of memory ...\" errors.\n"
		"\n"
		"The RDMA door (on ADDR, default every address, and --port; --port -1\n"
		"turns it off) serves the same store to rdmx KV clients: get, put,\n"
		"delete and cas as rdmx RPC methods (--transport, --protocol), and\n"
		"the table and the value slab registered for one-sided RDMA READ, so\n"
		"a client's GET reads the key's entry directly, checks its version,\n"
		"checksum and key, and falls back to the RPC when a concurrent PUT\n"
		"keeps tearing it. A value set over TCP is read over RDMA and the\n"
		"other way round. SIGINT or SIGTERM stops the server.\n"
		"\n"
		"'rdmx kv get|put|del ADDR KEY [VALUE]' are such a client: get prints\n"
		"the value (--get-path: rpc, read, or auto, read with the RPC for what\n"
		"read cannot do), put stores VALUE, del deletes; exit status 1 when\n"
		"the key is absent or the call failed.\n"
		"\n"
		"'rdmx kv bench' measures PUTs and GETs by RPC and by READ against the\n"
		"front door and Debian's memcached; it has its own options: see rdmx\n"
		"kv bench --help (rdmx-kv-bench(1)).",
	.exit_status =
		"0   stopped by a signal\n"
		"1   the server could not start or failed\n"
		"2   usage error",
	.examples =
		"rdmx kv serve --memcached-port 11211 --capacity 1000000 --memory 1G\n"
		"rdmx kv put 10.0.0.1 greeting hello; rdmx kv get 10.0.0.1 greeting --get-path read\n"
		"printf 'set k 0 0 5\\r\\nhello\\r\\nget k\\r\\n' | nc -q1 localhost 11211",
	.see_also = "rdmx(1), rdmx-kv-bench(1), memcached(1)",
};

static const struct opts_page serve_page = {
	.name = "rdmx-kv-serve - the rdmx key-value server",
	.synopsis = "rdmx kv serve [ADDR] [OPTIONS]",
	.description =
		"Runs the store with its memcached front door (--memcached-port) and\n"
		"its RDMA door (ADDR, default every address, and --port; --port -1\n"
		"turns it off) until SIGINT or SIGTERM; see rdmx kv --help. Not on the\n"
		"fake fabric: no other process could reach it.",
	.exit_status = "0   stopped by a signal\n1   the server could not start or failed\n"
		       "2   usage error",
	.examples = "rdmx kv serve --memcached-port 11211 --capacity 1000000 --memory 1G",
	.see_also = "rdmx-kv(1), memcached(1)",
};

static const struct opts_page get_page = {
	.name = "rdmx-kv-get - read a key of an rdmx KV server",
	.synopsis = "rdmx kv get ADDR KEY [OPTIONS]",
	.description =
		"Prints the value of KEY on the server at ADDR and --port, got by\n"
		"--get-path: rpc, read (one-sided RDMA READ of the entry) or auto\n"
		"(read, the RPC for what read cannot do).",
	.exit_status = "0   found\n1   the key is absent or the call failed\n2   usage error",
	.examples = "rdmx kv get 10.0.0.1 greeting --get-path read",
	.see_also = "rdmx-kv(1)",
};

static const struct opts_page put_page = {
	.name = "rdmx-kv-put - store a key in an rdmx KV server",
	.synopsis = "rdmx kv put ADDR KEY VALUE [OPTIONS]",
	.description = "Stores VALUE under KEY on the server at ADDR and --port (an RPC).",
	.exit_status = "0   stored\n1   the call failed\n2   usage error",
	.examples = "rdmx kv put 10.0.0.1 greeting hello",
	.see_also = "rdmx-kv(1)",
};

static const struct opts_page del_page = {
	.name = "rdmx-kv-del - delete a key of an rdmx KV server",
	.synopsis = "rdmx kv del ADDR KEY [OPTIONS]",
	.description = "Deletes KEY on the server at ADDR and --port (an RPC).",
	.exit_status = "0   deleted\n1   the key is absent or the call failed\n"
		       "2   usage error",
	.examples = "rdmx kv del 10.0.0.1 greeting",
	.see_also = "rdmx-kv(1)",
};

static rdmx_kv_server *running;

static void on_signal(int sig)
{
	(void)sig;
	if (running)
		rdmx_kv_server_stop(running);
}

static int serve(const struct rdmx_kv_server_opts *o)
{
	struct sigaction sa = { .sa_handler = on_signal };
	rdmx_kv_server *srv;
	int rc = rdmx_kv_server_create(o, &srv);

	if (rc) {
		fprintf(stderr, "rdmx kv: %s\n", rdmx_last_error());
		return EXIT_FAIL;
	}
	running = srv;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	printf("rdmx kv: serving memcached on %s:%d, RDMA on %s port %d, %llu entries, "
	       "%llu bytes of values\n",
	       o->memcached_addr, rdmx_kv_server_port(srv),
	       o->rdma_addr ? o->rdma_addr : "*", rdmx_kv_server_rdma_port(srv),
	       (unsigned long long)o->capacity, (unsigned long long)o->memory);
	fflush(stdout);
	rc = rdmx_kv_server_run(srv);
	if (rc)
		fprintf(stderr, "rdmx kv: %s\n", rdmx_kv_server_error(srv));
	running = NULL;
	rdmx_kv_server_destroy(srv);
	return rc ? EXIT_FAIL : EXIT_OK;
}

struct kv_cfg {
	const char *fabric, *transport, *protocol, *mode, *addr, *evict, *device;
	long long port, mport, clients, timeout, hello_ms, idle, reqs, gid_index,
		  ib_port;
	uint64_t capacity, memory, inline_max, item_max, conn_buffer, buffer_max;
	long long peer_clients, peer_conns; /* per-peer caps: memcached, RDMA */
};

static const char *const transports[] = { "msg", "rfp", "herd", NULL };
static const char *const modes[] = { "auto", "rpc", "read", NULL };
static const char *const evicts[] = { "none", "lru", NULL };

static int kv_fail(const char *what, int rc, const char *msg)
{
	fprintf(stderr, "rdmx kv: %s: %s (%s)\n", what, msg, rdmx_strerror(rc));
	return EXIT_FAIL;
}

static int serve_door(const struct kv_cfg *cfg, const char *addr)
{
	struct rdmx_listener_opts caps;
	struct rdmx_kv_server_opts o;
	struct rdmx_ctx_opts co;
	rdmx_ctx *ctx = NULL;
	int rc;

	rdmx_kv_server_opts_init(&o);
	o.capacity = cfg->capacity;
	o.memory = cfg->memory;
	o.inline_max = (uint32_t)cfg->inline_max;
	o.item_max = (uint32_t)cfg->item_max;
	o.memcached_addr = cfg->addr;
	o.memcached_port = (int)cfg->mport;
	o.max_clients = (int)cfg->clients;
	o.rdma_addr = addr;
	o.rdma_port = (int)cfg->port;
	o.transport = cfg->transport;
	o.protocol = cfg->protocol;
	o.evict = strcmp(cfg->evict, "lru") ? RDMX_KV_EVICT_NONE : RDMX_KV_EVICT_LRU;
	o.idle_timeout_ms = (int)cfg->idle;
	o.conn_buffer_max = cfg->conn_buffer;
	o.buffer_max = cfg->buffer_max;
	o.hello_ms = (int)cfg->hello_ms;
	o.reqs_per_event = (int)cfg->reqs;
	o.max_clients_per_peer = (int)cfg->peer_clients;
	rdmx_listener_opts_init(&caps);
	caps.max_conns_per_peer = (uint32_t)cfg->peer_conns;
	o.rpc_caps = &caps;
	o.read_caps = &caps;

	if (cfg->port >= 0) {
		rdmx_ctx_opts_init(&co);
		co.fabric = cfg->fabric;
		rc = rdmx_ctx_create(&ctx, &co);
		if (rc)
			return kv_fail("context", rc, rdmx_last_error());
		o.ctx = ctx;
	}
	rc = serve(&o);
	if (ctx)
		rdmx_ctx_destroy(ctx);
	return rc;
}

/* serve on ADDR, or on the address of --device, --ib-port, --gid-index, or everywhere. */
static int serve_at(const struct kv_cfg *cfg, const char *addr)
{
	char buf[64];

	if (!addr && cfg->port >= 0 && (cfg->device || cfg->ib_port || cfg->gid_index >= 0)) {
		if (cli_local_addr("kv", cfg->fabric, cfg->device, (int)cfg->ib_port,
				   (int)cfg->gid_index, buf, sizeof(buf)))
			return EXIT_FAIL;
		addr = buf;
	}
	return serve_door(cfg, addr);
}

/* One client op: get prints the value. */
static int client_op(rdmx_kv_client *c, const char **pos, int npos)
{
	static char buf[RDMX_KV_RPC_VALUE_MAX + 1];
	const char *key = pos[2];
	size_t len = 0;
	int rc;

	if (!strcmp(pos[0], "put"))
		rc = rdmx_kv_put(c, key, strlen(key), pos[3], strlen(pos[3]), 0,
				 RDMX_KV_SET, NULL);
	else if (!strcmp(pos[0], "del"))
		rc = rdmx_kv_del(c, key, strlen(key));
	else
		rc = rdmx_kv_get(c, key, strlen(key), buf, sizeof(buf) - 1, &len, NULL, NULL);
	if (rc == -ENOENT) {
		fprintf(stderr, "rdmx kv: %s: not found\n", key);
		return EXIT_FAIL;
	}
	if (rc)
		return kv_fail(pos[0], rc, rdmx_kv_client_error(c));
	if (!strcmp(pos[0], "get"))
		printf("%.*s\n", (int)len, buf);
	(void)npos;
	return EXIT_OK;
}

static int client_run(const struct kv_cfg *cfg, const char **pos, int npos)
{
	struct rdmx_kv_client_opts o;
	struct rdmx_ctx_opts co;
	rdmx_kv_client *c;
	rdmx_ctx *ctx;
	int rc;

	rdmx_kv_client_opts_init(&o);
	o.transport = cfg->transport;
	o.protocol = cfg->protocol;
	o.timeout_ms = (int)cfg->timeout;

	o.get_mode = !strcmp(cfg->mode, "rpc") ? RDMX_KV_GET_RPC :
		     !strcmp(cfg->mode, "read") ? RDMX_KV_GET_READ : RDMX_KV_GET_AUTO;
	if (strcmp(pos[0], "get"))
		o.get_mode = RDMX_KV_GET_RPC; /* put and del are RPCs */
	rdmx_ctx_opts_init(&co);
	co.fabric = cfg->fabric;
	rc = rdmx_ctx_create(&ctx, &co);
	if (rc)
		return kv_fail("context", rc, rdmx_last_error());
	rc = rdmx_kv_client_create(ctx, pos[1], (uint16_t)cfg->port, &o, &c);
	if (rc) {
		rc = kv_fail("connect", rc, rdmx_last_error());
	} else {
		rc = client_op(c, pos, npos);
		rdmx_kv_client_destroy(c);
	}
	rdmx_ctx_destroy(ctx);
	return rc;
}

/* Positional arguments: serve [ADDR], get|del ADDR KEY, put ADDR KEY VALUE;
 * what the options may not say together. CMD_CONTINUE or EXIT_USAGE. */
static int check_args(const struct kv_cfg *cfg, const struct cmd_sub *sub, int npos)
{
	static const char *const usage = "usage: rdmx kv serve [ADDR] | get ADDR KEY | "
		"put ADDR KEY VALUE | del ADDR KEY";
	bool is_serve = sub && !strcmp(sub->name, "serve");
	int want = !sub ? -1 : is_serve ? 2 : !strcmp(sub->name, "put") ? 4 : 3;

	if (!sub)
		return cmd_usage_err("kv", "%s", usage);
	if (is_serve ? npos > want : npos != want)
		return cmd_usage_err("kv", "%s: %s", sub->name, usage);
	if (cfg->inline_max % 8)
		return cmd_usage_err("kv", "--inline-max %llu: not a multiple of 8",
				     (unsigned long long)cfg->inline_max);
	if (cfg->item_max && cfg->item_max < cfg->inline_max)
		return cmd_usage_err("kv", "--item-max %llu: less than --inline-max %llu",
				     (unsigned long long)cfg->item_max,
				     (unsigned long long)cfg->inline_max);
	if (!is_serve && (cfg->device || cfg->ib_port || cfg->gid_index >= 0))
		return cmd_usage_err("kv", "%s", "--device, --ib-port and --gid-index choose a "
				     "local address: for serve");
	if (!is_serve && cfg->port < 1)
		return cmd_usage_err("kv", "--port %lld: a client dials a port, 1-65535",
				     cfg->port);
	if (is_serve && npos > 1 && (cfg->device || cfg->ib_port || cfg->gid_index >= 0))
		return cmd_usage_err("kv serve", "%s", "ADDR, or --device and "
				     "--gid-index: one way to choose the address");
	if (!strcmp(cfg->fabric, "fake") && (!is_serve || cfg->port >= 0))
		return cli_fake_server_refused(is_serve ? "kv serve" : "kv", cfg->fabric);
	return CMD_CONTINUE;
}

int cmd_kv(int argc, char **argv)
{
	struct kv_cfg cfg = { .fabric = "verbs", .transport = "msg",
		.protocol = "send_recv", .mode = "auto", .addr = "127.0.0.1",
		.port = RDMX_DEFAULT_PORT, .mport = 11211, .clients = 1024,
		.timeout = 5000, .reqs = 20, .capacity = 65536, .memory = 64ULL << 20,
		.inline_max = 1024, .evict = "none", .gid_index = -1, .peer_conns = 64 };
	const struct cli_conn_dest conn = {
		.protocol = &cfg.protocol, .protocols = rdmx_protocol_names(),
		.device = &cfg.device, .ib_port = &cfg.ib_port, .gid_index = &cfg.gid_index, .port = &cfg.port,
		.port_min = -1, .timeout = &cfg.timeout, .fabric = &cfg.fabric,
	};
	struct cli_conn_dest client_conn = conn;	/* no local address */
	struct opt conn_rows[CLI_CONN_ROWS], client_conn_rows[CLI_CONN_ROWS];
	const struct opt door_rows[] = {
		{ "transport", 0, OPT_CHOICE, &cfg.transport, 0, 0, transports, "NAME",
		  "RPC transport of the RDMA door" },
		{ 0 },
	};
	const struct opt server_rows[] = {
		{ "memcached-port", 0, OPT_INT, &cfg.mport, -1, 65535, NULL, "PORT",
		  "TCP port of the memcached front door (default 11211; 0: any free port; "
		  "-1: none)" },
		{ "memcached-addr", 0, OPT_STRING, &cfg.addr, 0, 0, NULL, "ADDR",
		  "IPv4 address the front door listens on (default 127.0.0.1, as Debian's "
		  "memcached; 0.0.0.0: every address)" },
		{ "capacity", 0, OPT_SIZE, &cfg.capacity, 1, 1LL << 32, NULL, "N",
		  "keys the store holds at most (default 65536)" },
		{ "memory", 0, OPT_SIZE, &cfg.memory, 0, 1LL << 40, NULL, "BYTES",
		  "bytes for values kept out of line (default 64M)" },
		{ "inline-max", 0, OPT_SIZE, &cfg.inline_max, 8, 65536, NULL, "BYTES",
		  "longest value kept in its entry, a multiple of 8 (default 1024)" },
		{ "item-max", 0, OPT_SIZE, &cfg.item_max, 8, 1LL << 30, NULL, "BYTES",
		  "longest value, at least --inline-max (default 1M less 512, as memcached's "
		  "-I 1m; a PUT over RDMA carries 64K at most)" },
		{ "max-clients", 0, OPT_INT, &cfg.clients, 1, 65536, NULL, "N",
		  "front door connections at once (default 1024, as memcached -c)" },
		{ "idle-timeout", 0, OPT_INT, &cfg.idle, 0, 86400000, NULL, "MS",
		  "close a front door connection idle this long (memcached -o idle_timeout, "
		  "in seconds there; default 0: never)" },
		{ "conn-buffer", 0, OPT_SIZE, &cfg.conn_buffer, 0, 1LL << 40, NULL, "BYTES",
		  "bytes one front door connection may buffer, request and replies (default "
		  "0: twice --item-max and 2M; at least 64K)" },
		{ "buffer-max", 0, OPT_SIZE, &cfg.buffer_max, 0, 1LL << 40, NULL, "BYTES",
		  "bytes all front door connections may buffer together (default 256M; as "
		  "memcached -o read_buf_mem_limit)" },
		{ "reqs-per-event", 0, OPT_INT, &cfg.reqs, 1, 1000000, NULL, "N",
		  "commands a front door connection runs before the others have their "
		  "turn (default 20, as memcached -R)" },
		{ "max-clients-per-peer", 0, OPT_INT, &cfg.peer_clients, -1, 65536, NULL, "N",
		  "front door connections from one address (0: a quarter of --max-clients, "
		  "-1: no cap)" },
		{ "max-conns-per-peer", 0, OPT_INT, &cfg.peer_conns, 0, 65536, NULL, "N",
		  "RDMA door connections (RPC, read) from one address (0: no cap)" },
		{ "evict", 0, OPT_CHOICE, &cfg.evict, 0, 0, evicts, "POLICY",
		  "serve, a full table or slab: none (refuse the store, default) or lru "
		  "(evict the least recently used key in the way)" },
		{ "hello-timeout", 0, OPT_INT, &cfg.hello_ms, 0, 3600000, NULL, "MS",
		  "serve: close an RDMA door connection with no valid hello, or a read "
		  "connection with no RPC client of its host, by then (0: 5000)" },
		{ 0 },
	};
	const struct opt client_rows[] = {
		{ "get-path", 0, OPT_CHOICE, &cfg.mode, 0, 0, modes, "PATH",
		  "how get reads: auto (read, the RPC for what read cannot do), rpc "
		  "or read" },
		{ "mode", 0, OPT_CHOICE, &cfg.mode, 0, 0, modes, "PATH", NULL },
		{ 0 },
	};
	const struct opt table[] = {
		OPTS_INCLUDE(conn_rows), OPTS_INCLUDE(door_rows), OPTS_INCLUDE(server_rows),
		OPTS_INCLUDE(client_rows), { 0 },
	};
	const struct opt serve_table[] = {
		OPTS_INCLUDE(conn_rows), OPTS_INCLUDE(door_rows), OPTS_INCLUDE(server_rows),
		{ 0 },
	};
	const struct opt get_table[] = {
		OPTS_INCLUDE(client_conn_rows), OPTS_INCLUDE(door_rows),
		OPTS_INCLUDE(client_rows), { 0 },
	};
	const struct opt op_table[] = { /* put, del */
		OPTS_INCLUDE(client_conn_rows), OPTS_INCLUDE(door_rows), { 0 },
	};
	const struct cmd_sub subs[] = {
		{ "serve", &serve_page, serve_table },
		{ "get", &get_page, get_table },
		{ "put", &put_page, op_table },
		{ "del", &del_page, op_table },
		{ NULL, NULL, NULL },
	};
	const struct cmd_sub *sub;
	const char *pos[5];
	int rc, npos = 0;

	if (argc > 1 && !strcmp(argv[1], "bench")) /* its own options and page */
		return cmd_kv_bench(argc - 1, argv + 1);
	client_conn.device = NULL;
	client_conn.ib_port = NULL;
	client_conn.gid_index = NULL;
	cli_conn_rows(&conn, conn_rows);
	cli_conn_rows(&client_conn, client_conn_rows);
	rc = cmd_parse_subs(&kv_page, table, subs, argc, argv, pos, 5, &npos, &sub);
	if (rc != CMD_CONTINUE)
		return rc;
	rc = cli_conn_check("kv", &conn);
	if (rc == CMD_CONTINUE)
		rc = check_args(&cfg, sub, npos);
	if (rc != CMD_CONTINUE)
		return rc;
	if (strcmp(pos[0], "serve"))
		return client_run(&cfg, pos, npos);
	return serve_at(&cfg, npos > 1 ? pos[1] : NULL);
}
