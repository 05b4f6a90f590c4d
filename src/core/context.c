/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "errors.h"
#include "fabric.h"
#include "mem.h"
#include "opts.h"
#include "wait.h"

static const struct rdmx__fabric_ops *fabric_by_name(const char *name)
{
	if (!name || !strcmp(name, "verbs"))
		return &rdmx__fabric_verbs;
	if (!strcmp(name, "fake"))
		return &rdmx__fabric_fake;
	return NULL;
}

int rdmx_ctx_create(rdmx_ctx **out, const struct rdmx_ctx_opts *opts)
{
	const struct rdmx__fabric_ops *fops;
	struct rdmx_ctx_opts o;
	rdmx_ctx *ctx;
	int rc;

	if (!out)
		return rdmx__fail(-EINVAL, "rdmx_ctx_create: out is NULL");
	rc = rdmx__ctx_opts_copy(opts, &o);
	if (rc)
		return rc;
	if (o.wait_mode > RDMX_WAIT_ADAPTIVE || o.spin_us > RDMX__SPIN_US_MAX)
		return rdmx__fail(-EINVAL, "wait_mode %u / spin_us %u: not an enum rdmx_wait_mode / over %u",
				  o.wait_mode, o.spin_us, RDMX__SPIN_US_MAX);
	fops = fabric_by_name(o.fabric);
	if (!fops)
		return rdmx__fail(-EINVAL, "unknown fabric '%s' (known: verbs, fake)",
				  o.fabric);
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return rdmx__fail(-ENOMEM, "out of memory for a context");
	ctx->fops = fops;
	ctx->wait_mode = o.wait_mode ? o.wait_mode : RDMX_WAIT_ADAPTIVE;
	ctx->spin_us = o.spin_us ? o.spin_us : RDMX__SPIN_US_DEFAULT;
	rc = rdmx__slab_create(ctx);
	if (rc) {
		free(ctx);
		return rc;
	}
	rc = fops->create(&ctx->fab);
	if (rc) {
		rdmx__slab_destroy(ctx);
		free(ctx);
		return rc;
	}
	*out = ctx;
	return 0;
}

void rdmx_ctx_destroy(rdmx_ctx *ctx)
{
	if (!ctx)
		return;
	rdmx__slab_destroy(ctx); /* its registrations before the fabric */
	ctx->fops->destroy(ctx->fab);
	free(ctx);
}

const char *rdmx_ctx_error(const rdmx_ctx *ctx)
{
	return ctx ? ctx->err.msg : "no context";
}
