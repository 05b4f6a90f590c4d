// SPDX-License-Identifier: MIT
/* rdmx kv: the rdmx KV server (include/rdmx/kv.h). */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <rdmx/kv.h>
#include <rdmx/rdmx.h>

#include "cmds.h"

static const struct opts_page kv_page = {
	.name = "rdmx-kv - the rdmx key-value server",
	.synopsis = "rdmx kv serve [--memcached-port PORT] [--memcached-addr ADDR]\n"
		    "              [--capacity N] [--memory BYTES] [--inline-max BYTES]\n"
		    "              [--max-clients N]",
	.description =
		"'rdmx kv serve' runs a key-value store: a hash table of\n"
		"self-verifying entries in one flat memory region (a version, odd\n"
		"while an entry is written, and a checksum over the key, the value and\n"
		"the version), values longer than --inline-max in a second region.\n"
		"It holds --capacity keys at most and --memory bytes of out-of-line\n"
		"values; a store into a full table is refused (SERVER_ERROR out of\n"
		"memory storing object), nothing is evicted.\n"
		"\n"
		"With --memcached-port, the store speaks memcached's ASCII protocol\n"
		"over TCP (set, add, replace, append, prepend, cas, get, gets,\n"
		"delete, incr, decr, touch, flush_all, version, verbosity, stats,\n"
		"quit), with memcached 1.6's replies, so memcached clients and load\n"
		"tools work unchanged. The RDMA side (GET by RPC and by one-sided\n"
		"READ) comes with rdmx RPC. SIGINT or SIGTERM stops the server.",
	.exit_status =
		"0   stopped by a signal\n"
		"1   the server could not start or failed\n"
		"2   usage error",
	.examples =
		"rdmx kv serve --memcached-port 11211 --capacity 1000000 --memory 1G\n"
		"printf 'set k 0 0 5\\r\\nhello\\r\\nget k\\r\\n' | nc -q1 localhost 11211",
	.see_also = "rdmx(1), memcached(1)",
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
	printf("rdmx kv: serving memcached on %s:%d, %llu entries, %llu bytes of values\n",
	       o->memcached_addr ? o->memcached_addr : "0.0.0.0", rdmx_kv_server_port(srv),
	       (unsigned long long)o->capacity, (unsigned long long)o->memory);
	fflush(stdout);
	rc = rdmx_kv_server_run(srv);
	if (rc)
		fprintf(stderr, "rdmx kv: %s\n", rdmx_kv_server_error(srv));
	running = NULL;
	rdmx_kv_server_destroy(srv);
	return rc ? EXIT_FAIL : EXIT_OK;
}

int cmd_kv(int argc, char **argv)
{
	long long port = 11211, clients = 1024;
	uint64_t capacity = 65536, memory = 64ULL << 20, inline_max = 1024;
	const char *addr = "0.0.0.0";
	const struct opt table[] = {
		{ "memcached-port", 0, OPT_INT, &port, 0, 65535, NULL, "PORT",
		  "TCP port of the memcached front door (default 11211; 0: any free port)" },
		{ "memcached-addr", 0, OPT_STRING, &addr, 0, 0, NULL, "ADDR",
		  "IPv4 address the front door listens on (default 0.0.0.0)" },
		{ "capacity", 0, OPT_SIZE, &capacity, 1, 1LL << 32, NULL, "N",
		  "keys the store holds at most (default 65536)" },
		{ "memory", 0, OPT_SIZE, &memory, 0, 1LL << 40, NULL, "BYTES",
		  "bytes for values kept out of line (default 64M)" },
		{ "inline-max", 0, OPT_SIZE, &inline_max, 8, 65536, NULL, "BYTES",
		  "longest value kept in its entry, a multiple of 8 (default 1024)" },
		{ "max-clients", 0, OPT_INT, &clients, 1, 65536, NULL, "N",
		  "front door connections at once (default 1024)" },
		{ 0 },
	};
	struct rdmx_kv_server_opts o;
	const char *pos[1];
	int rc, npos = 0;

	rc = cmd_parse(&kv_page, table, argc, argv, pos, 1, &npos);
	if (rc != CMD_CONTINUE)
		return rc;
	if (npos != 1 || strcmp(pos[0], "serve") || inline_max % 8) {
		fprintf(stderr, "rdmx kv: usage: rdmx kv serve [OPTIONS] (--inline-max a "
			"multiple of 8); see 'rdmx kv --help'\n");
		return EXIT_USAGE;
	}
	o = (struct rdmx_kv_server_opts){ .capacity = capacity, .memory = memory,
					  .inline_max = (uint32_t)inline_max,
					  .memcached_addr = addr, .memcached_port = (int)port,
					  .max_clients = (int)clients };
	return serve(&o);
}
