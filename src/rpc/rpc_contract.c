/* SPDX-License-Identifier: MIT */
/*
 * The contract: a checked, id-sorted copy of a method table and its hash
 * (FNV-1a over the table's wire form, so both sides hash the same bytes
 * whatever order they declared the methods in).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/rpc_int.h"

static int method_check(const struct rdmx_rpc_method *m, size_t i)
{
	size_t len = m->name ? strlen(m->name) : 0;

	if (len < 1 || len > RDMX_RPC_NAME_MAX)
		return rdmx__fail(-EINVAL, "method %zu (id %u): name of %zu bytes, "
				  "want 1..%u", i, m->id, len, RDMX_RPC_NAME_MAX);
	if (m->flags & ~RDMX_RPC_IDEMPOTENT)
		return rdmx__fail(-EINVAL, "method %u '%s': unknown flags 0x%x",
				  m->id, m->name, m->flags);
	return 0;
}

static int by_id(const void *a, const void *b)
{
	const struct rpc_method *x = a, *y = b;

	return (int)x->id - (int)y->id;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* The hash of the whole table in its wire form. */
static uint64_t contract_hash(const struct rpc_contract *k)
{
	unsigned char e[RPC_TABLE_ENTRY + 4];
	size_t n = rdmx__rpc_table_put(e, 4, k); /* the count */
	uint64_t h = fnv1a(0xcbf29ce484222325ull, e, n);

	for (size_t i = 0; i < k->n; i++) {
		struct rpc_contract one = { .m = &k->m[i], .n = 1 };

		n = rdmx__rpc_table_put(e, sizeof(e), &one);
		h = fnv1a(h, e + 4, n - 4);
	}
	return h;
}

static void contract_maxima(struct rpc_contract *k)
{
	for (size_t i = 0; i < k->n; i++) {
		if (k->m[i].max_req > k->max_req)
			k->max_req = k->m[i].max_req;
		if (k->m[i].max_resp > k->max_resp)
			k->max_resp = k->m[i].max_resp;
	}
}

int rdmx__rpc_contract_load(struct rpc_contract *k, const struct rdmx_rpc_method *m,
		      size_t n)
{
	memset(k, 0, sizeof(*k));
	if (!m || n < 1 || n > RDMX_RPC_MAX_METHODS)
		return rdmx__fail(-EINVAL, "a contract has 1..%u methods, not %zu",
				  RDMX_RPC_MAX_METHODS, m ? n : 0);
	for (size_t i = 0; i < n; i++)
		if (method_check(&m[i], i))
			return -EINVAL;
	k->m = calloc(n, sizeof(*k->m));
	if (!k->m)
		return rdmx__fail(-ENOMEM, "out of memory for a contract of %zu methods", n);
	for (size_t i = 0; i < n; i++) {
		k->m[i] = (struct rpc_method){ .id = m[i].id, .max_req = m[i].max_req,
			.max_resp = m[i].max_resp, .flags = m[i].flags };
		memcpy(k->m[i].name, m[i].name, strlen(m[i].name));
	}
	k->n = n;
	qsort(k->m, n, sizeof(*k->m), by_id);
	for (size_t i = 1; i < n; i++)
		if (k->m[i].id == k->m[i - 1].id) {
			rdmx__rpc_contract_free(k);
			return rdmx__fail(-EINVAL, "method id %u declared twice", m[i].id);
		}
	contract_maxima(k);
	k->hash = contract_hash(k);
	return 0;
}

void rdmx__rpc_contract_free(struct rpc_contract *k)
{
	free(k->m);
	memset(k, 0, sizeof(*k));
}

const struct rpc_method *rdmx__rpc_contract_find(const struct rpc_contract *k, uint16_t id)
{
	size_t lo = 0, hi = k->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->m[mid].id == id)
			return &k->m[mid];
		if (k->m[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

size_t rdmx__rpc_contract_index(const struct rpc_contract *k, const struct rpc_method *m)
{
	return (size_t)(m - k->m);
}

int rdmx_rpc_contract_check(const struct rdmx_rpc_method *methods, size_t n)
{
	struct rpc_contract k;
	int rc = rdmx__rpc_contract_load(&k, methods, n);

	if (!rc)
		rdmx__rpc_contract_free(&k);
	return rc;
}
