/* SPDX-License-Identifier: MIT */
/* The KV option structs loaded by their size, defaults filled (kv_opts.c). */
#ifndef RDMX_KV_OPTS_H
#define RDMX_KV_OPTS_H

#include <rdmx/kv.h>

int rdmx__kv_server_opts_load(const struct rdmx_kv_server_opts *in,
			      struct rdmx_kv_server_opts *out);
int rdmx__kv_client_opts_load(const struct rdmx_kv_client_opts *in,
			      struct rdmx_kv_client_opts *out);

#endif /* RDMX_KV_OPTS_H */
