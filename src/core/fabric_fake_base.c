/* SPDX-License-Identifier: MIT */
/*
 * The fake fabric's ground floor: its one state (fabric_fake_base.h), the
 * fabric and its domain, and memory regions. The model is described at the
 * top of fabric_fake.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "errors.h"
#include "fabric_fake_base.h"

struct rdmx__fake_globals rdmx__fake_g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.next_key = 1,
	.next_qpn = FIRST_QPN,
	.next_port = EPHEMERAL_FIRST,
};

static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void g_init(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&G.cm, &a);
	pthread_condattr_destroy(&a);
}

/* ---------------------------------------------------------------- fabric */

int rdmx__fake_create(struct rdmx__fabric **out)
{
	struct rdmx__fabric *fab;

	pthread_once(&g_once, g_init);
	fab = calloc(1, sizeof(*fab));
	if (!fab)
		return rdmx__fail(-ENOMEM, "fake: out of memory for the fabric");
	*out = fab;
	return 0;
}

void rdmx__fake_destroy(struct rdmx__fabric *fab)
{
	free(fab);
}

/* One process-wide domain per fabric: any rkey is valid remotely. */
const void *rdmx__fake_domain(const struct rdmx__ep *ep)
{
	return ep->fab;
}

/* ---------------------------------------------------------------- memory */

uint32_t rdmx__fake_rkey_new(void)
{
	uint32_t k = G.next_key * 2 + 1;

	G.next_key = G.next_key % 0x7fffffff + 1;
	return k;
}

int rdmx__fake_reg_mr(struct rdmx__ep *ep, void *addr, size_t len, int access,
		      struct rdmx__mr **out)
{
	struct fmr *m = calloc(1, sizeof(*m));

	(void)ep;
	if (!m)
		return rdmx__fail(-ENOMEM, "fake: out of memory for a memory region");
	m->access = access;
	lock();
	m->pub = (struct rdmx__mr){ addr, len, G.next_key * 2, rdmx__fake_rkey_new() };
	m->next = G.mrs;
	G.mrs = m;
	unlock();
	*out = &m->pub;
	return 0;
}

void rdmx__fake_dereg_mr(struct rdmx__mr *mr)
{
	struct fmr *m = (struct fmr *)mr, **pp;

	if (!m)
		return;
	lock();
	for (pp = &G.mrs; *pp && *pp != m; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = m->next;
	for (struct fmr *w = G.mrs; w; w = w->next)
		if (w->parent == m) { /* a window into it: no key finds it now */
			w->parent = NULL;
			w->qpn = 0;
		}
	unlock();
	free(m);
}

/* A window is an entry of the regions' list that no key finds until it is
 * bound (fabric_fake_dgram.c); dealloc takes it out: its key is unknown. */
int rdmx__fake_mw_alloc(struct rdmx__ep *ep, struct rdmx__mw **out)
{
	struct fmr *m = calloc(1, sizeof(*m));

	(void)ep;
	if (!m)
		return rdmx__fail(-ENOMEM, "fake: out of memory for a memory window");
	m->is_mw = 1;
	lock();
	m->mw.rkey = m->pub.rkey = rdmx__fake_rkey_new();
	m->next = G.mrs;
	G.mrs = m;
	unlock();
	*out = &m->mw;
	return 0;
}

void rdmx__fake_mw_dealloc(struct rdmx__mw *mw)
{
	if (mw)
		rdmx__fake_dereg_mr(&((struct fmr *)(void *)((char *)mw -
						offsetof(struct fmr, mw)))->pub);
}
