// SPDX-License-Identifier: MIT
/* What rdmx kv bench and rdmx rpc bench share around their own tests. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "bench_cmd.h"
#include "bench_ep.h"
#include "cmds.h"

void bench_head_init(struct jw_head *h, struct bench_head_buf *b, const char *fabric,
		     const char *addr, const char *local, int argc, char **argv)
{
	jw_provenance(&b->prov, argc, argv);
	b->device[0] = '\0';
	if (strcmp(fabric, "fake"))
		bench_device_of(addr ? NULL : local, b->device, sizeof(b->device));
	*h = (struct jw_head){
		.timestamp = bench_timestamp(b->stamp, sizeof(b->stamp)),
		.device = b->device[0] ? b->device : fabric, .fabric = fabric,
		.peer = addr ? addr : "self-test", .version = RDMX_VERSION_STRING,
		.cmdline = b->prov.cmdline, .host = b->prov.host,
		.kernel = b->prov.kernel, .config_json = b->config,
	};
}

/* A context on @fabric, @c->run on it. */
static int run_on_ctx(const struct bench_cmd *c, const char *fabric, const void *cfg)
{
	struct rdmx_ctx_opts o;
	rdmx_ctx *ctx;
	int rc;

	rdmx_ctx_opts_init(&o);
	o.fabric = fabric;
	rc = rdmx_ctx_create(&ctx, &o);
	if (rc) {
		fprintf(stderr, "rdmx %s: context: %s (%s)\n", c->name, rdmx_strerror(rc),
			rdmx_last_error());
		return EXIT_FAIL;
	}
	rc = c->run(ctx, cfg);
	rdmx_ctx_destroy(ctx);
	return rc;
}

int bench_cmd_main(const struct bench_cmd *c, const struct opt *table, int argc,
		   char **argv, const struct bench_cmd_cfg *into)
{
	const char *pos[1];
	int n_pos, rc;

	argv[0] = c->name;
	rc = cmd_parse(c->page, table, argc, argv, pos, 1, &n_pos);
	if (rc != CMD_CONTINUE)
		return rc;
	*into->addr = n_pos ? pos[0] : NULL;
	rc = cli_conn_check(c->name, into->conn);
	if (rc == CMD_CONTINUE)
		rc = c->check(into->cfg);
	return rc == CMD_CONTINUE ? run_on_ctx(c, *into->fabric, into->cfg) : rc;
}

int bench_stop_status(const char *cmd, bool files)
{
	fprintf(stderr, "rdmx %s: stopped by signal %d; the tests finished before it "
		"are above%s\n", cmd, bench_stopped(), files ? " and in the files" : "");
	return 128 + bench_stopped();
}
