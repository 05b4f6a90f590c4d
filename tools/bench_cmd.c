// SPDX-License-Identifier: MIT
/* What rdmx kv bench and rdmx rpc bench share around their own tests. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "bench_cmd.h"
#include "bench_ep.h"
#include "cmds.h"

const char *const bench_fabrics[] = { "verbs", "fake", NULL };

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

int bench_cmd_main(char *name, const struct opts_page *page, const struct opt *table,
		   int argc, char **argv, const char **addr, int (*check)(void *cfg),
		   int (*run)(const void *cfg), void *cfg)
{
	const char *pos[1];
	int n_pos, rc;

	argv[0] = name;
	rc = cmd_parse(page, table, argc, argv, pos, 1, &n_pos);
	if (rc != CMD_CONTINUE)
		return rc;
	*addr = n_pos ? pos[0] : NULL;
	rc = check(cfg);
	return rc == CMD_CONTINUE ? run(cfg) : rc;
}

int bench_ctx_create(const char *cmd, const char *fabric, rdmx_ctx **ctx)
{
	struct rdmx_ctx_opts o;
	int rc;

	rdmx_ctx_opts_init(&o);
	o.fabric = fabric;
	rc = rdmx_ctx_create(ctx, &o);
	if (rc) {
		fprintf(stderr, "rdmx %s: context: %s (%s)\n", cmd, rdmx_strerror(rc),
			rdmx_last_error());
		return EXIT_FAIL;
	}
	return EXIT_OK;
}

int bench_stop_status(const char *cmd, bool files)
{
	fprintf(stderr, "rdmx %s: stopped by signal %d; the tests finished before it "
		"are above%s\n", cmd, bench_stopped(), files ? " and in the files" : "");
	return 128 + bench_stopped();
}
