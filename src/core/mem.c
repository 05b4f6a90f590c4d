/* SPDX-License-Identifier: MIT */
/*
 * Application memory: registrations (rdmx_mr_reg) and the registered
 * allocator (rdmx_alloc).
 *
 * An rdmx_mr belongs to a context, not to a device: a context's
 * connections may sit on different devices, and a registration is only
 * valid in the protection domain it was made in. So rdmx_mr_reg() only
 * records the range and the rights, and rdmx__mr_on() registers it with a
 * connection's domain the first time it is used there (at most
 * MR_DOMAINS of them), keeping the registration until rdmx_mr_dereg().
 * On a device with memory windows a registration with remote rights is
 * made with local rights and window binds only: its own key opens nothing
 * remotely, and rdmx_mr_export() (onesided.c) hands each peer a window
 * bound to its connection's QP (mw.h). Without windows it is made with
 * the remote rights asked for, and its key is what an export hands out.
 *
 * The allocator follows the zero-copy allocator of "Towards Zero Copy
 * Dataflows using RDMA" (SIGCOMM'17 posters): memory is registered in
 * large chunks once, and small allocations are carved out of them, so
 * allocating message-ready memory costs what malloc costs. Each chunk is
 * a slab of one size class (64 B .. 64 KiB, powers of two); larger
 * requests get a chunk of their own. The free lists are index stacks kept
 * outside the registered memory, with a used flag per block, so a double
 * free is refused rather than corrupting the list. One mutex guards it
 * all: the allocator is thread-safe.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "errors.h"
#include "fabric.h"
#include "mem.h"
#include "mw.h"
#include "post.h"

#define MR_DOMAINS 4
#define SLAB_MIN_SHIFT 6      /* 64 B */
#define SLAB_CLASSES 11       /* 64 B .. 64 KiB */
#define SLAB_CHUNK (1u << 20) /* bytes of one slab chunk */
#define ALLOC_ALIGN 64

struct rdmx_mr {
	rdmx_ctx *ctx;
	void *addr;
	size_t len;
	unsigned access;         /* enum rdmx_access bits */
	pthread_mutex_t lock;    /* guards reg[] */
	struct rdmx__export_node *exports; /* windows bound on it (mw.h) */
	int nreg;
	struct {
		const void *domain;
		struct rdmx__mr *m;
		int windows;     /* made for window binds, no remote rights */
	} reg[MR_DOMAINS];
};

#define ACCESS_KNOWN (RDMX_ACCESS_REMOTE_READ | RDMX_ACCESS_REMOTE_WRITE | \
		      RDMX_ACCESS_REMOTE_ATOMIC)

/* ---------------------------------------------------------- registration */

int rdmx_mr_reg(rdmx_ctx *ctx, void *addr, size_t len, unsigned access,
		rdmx_mr **out)
{
	rdmx_mr *mr;

	if (!ctx || !addr || !len || !out)
		return rdmx__fail(-EINVAL, "rdmx_mr_reg: ctx, addr, a length and out are required");
	if (access & ~(unsigned)ACCESS_KNOWN)
		return rdmx__failo(&ctx->err, -EINVAL,
				   "rdmx_mr_reg: unknown access bits 0x%x", access);
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return rdmx__failo(&ctx->err, -ENOMEM, "out of memory for a registration");
	mr->ctx = ctx;
	mr->addr = addr;
	mr->len = len;
	mr->access = access;
	pthread_mutex_init(&mr->lock, NULL);
	*out = mr;
	return 0;
}

void rdmx_mr_dereg(rdmx_mr *mr)
{
	if (!mr)
		return;
	rdmx__export_revoke_all(&mr->exports); /* the device keeps a registration
						* with windows bound on it */
	for (int i = 0; i < mr->nreg; i++)
		mr->ctx->fops->dereg_mr(mr->reg[i].m);
	pthread_mutex_destroy(&mr->lock);
	free(mr);
}

void *rdmx_mr_addr(const rdmx_mr *mr)
{
	return mr ? mr->addr : NULL;
}

size_t rdmx_mr_len(const rdmx_mr *mr)
{
	return mr ? mr->len : 0;
}

struct rdmx__export_node **rdmx__mr_exports(rdmx_mr *mr)
{
	return &mr->exports;
}

unsigned rdmx__mr_access(const rdmx_mr *mr)
{
	return mr->access;
}

int rdmx__mr_range(const rdmx_mr *mr, size_t off, size_t len)
{
	if (off > mr->len || len > mr->len - off)
		return rdmx__fail(-EINVAL, "range %zu+%zu is outside the registration "
				  "of %zu bytes", off, len, mr->len);
	return 0;
}

int rdmx__mr_rights(unsigned access)
{
	int a = 0;

	if (access & RDMX_ACCESS_REMOTE_READ)
		a |= RDMX__ACCESS_READ;
	if (access & RDMX_ACCESS_REMOTE_WRITE)
		a |= RDMX__ACCESS_WRITE;
	if (access & RDMX_ACCESS_REMOTE_ATOMIC)
		a |= RDMX__ACCESS_ATOMIC;
	return a;
}

/* Register on @dom through @c (mr->lock held): local write always (READ
 * destinations and atomic results land in it); remote rights on windows
 * where the device has them, else on the registration. Its index. */
static int mr_add(rdmx_conn *c, rdmx_mr *mr, const void *dom)
{
	int rights = rdmx__mr_rights(mr->access), i = mr->nreg, rc;
	int windows = rights && rdmx__iso_of(c->f, c->ep) == RDMX__ISO_WINDOW;

	if (i == MR_DOMAINS)
		return rdmx__fail(-ENOSPC, "a registration is used on more than %d devices",
				  MR_DOMAINS);
	rc = c->f->reg_mr(c->ep, mr->addr, mr->len, RDMX__ACCESS_LOCAL |
			  (windows ? RDMX__ACCESS_MW_BIND : rights), &mr->reg[i].m);
	if (rc)
		return rc;
	mr->reg[i].domain = dom;
	mr->reg[i].windows = windows;
	mr->nreg++;
	return i;
}

/* @mr's registration on @c's domain, made there on its first use
 * (mr->lock held): its index or -errno. */
static int mr_find(rdmx_conn *c, rdmx_mr *mr)
{
	const void *dom = c->f->domain(c->ep);

	if (mr->ctx != c->ctx)
		return rdmx__fail(-EINVAL, "the registration belongs to another context");
	for (int i = 0; i < mr->nreg; i++)
		if (mr->reg[i].domain == dom)
			return i;
	return mr_add(c, mr, dom);
}

int rdmx__mr_on(rdmx_conn *c, rdmx_mr *mr, const struct rdmx__mr **out)
{
	struct rdmx__mr *m;
	int rc = rdmx__mr_bindable(c, mr, &m);

	*out = m;
	return rc < 0 ? rc : 0;
}

int rdmx__mr_bindable(rdmx_conn *c, rdmx_mr *mr, struct rdmx__mr **out)
{
	int i;

	pthread_mutex_lock(&mr->lock);
	i = mr_find(c, mr);
	*out = i < 0 ? NULL : mr->reg[i].m;
	i = i < 0 ? i : mr->reg[i].windows;
	pthread_mutex_unlock(&mr->lock);
	return i;
}

/* ------------------------------------------------------------ allocator */

struct chunk {
	char *base;
	size_t size;             /* bytes */
	int cls;                 /* size class, -1: one large block */
	uint32_t nblk, nfree;
	uint32_t *free;          /* stack of free block indexes */
	uint8_t *used;           /* per block */
	rdmx_mr *mr;
	struct chunk *next;
};

struct rdmx__slab {
	pthread_mutex_t lock;
	struct chunk *chunks;
};

int rdmx__slab_create(rdmx_ctx *ctx)
{
	ctx->slab = calloc(1, sizeof(*ctx->slab));
	if (!ctx->slab)
		return rdmx__fail(-ENOMEM, "out of memory for the allocator");
	pthread_mutex_init(&ctx->slab->lock, NULL);
	return 0;
}

static void chunk_free(struct chunk *k)
{
	rdmx_mr_dereg(k->mr);
	free(k->base);
	free(k->free);
	free(k->used);
	free(k);
}

void rdmx__slab_destroy(rdmx_ctx *ctx)
{
	struct chunk *k, *next;

	if (!ctx->slab)
		return;
	for (k = ctx->slab->chunks; k; k = next) {
		next = k->next;
		chunk_free(k);
	}
	pthread_mutex_destroy(&ctx->slab->lock);
	free(ctx->slab);
	ctx->slab = NULL;
}

/* Size class of @size, or -1 above the largest. */
static int size_class(size_t size)
{
	for (int c = 0; c < SLAB_CLASSES; c++)
		if (size <= (size_t)1 << (SLAB_MIN_SHIFT + c))
			return c;
	return -1;
}

/* A new chunk of class @cls (or one block of @size when -1). */
static struct chunk *chunk_new(rdmx_ctx *ctx, int cls, size_t size)
{
	struct chunk *k = calloc(1, sizeof(*k));
	size_t blk = cls < 0 ? size : (size_t)1 << (SLAB_MIN_SHIFT + cls);

	if (!k)
		return NULL;
	k->cls = cls;
	k->size = cls < 0 ? (size + 4095) & ~(size_t)4095 : SLAB_CHUNK;
	k->nblk = (uint32_t)(k->size / blk);
	k->base = rdmx__alloc_buf(k->size);
	k->free = calloc(k->nblk, sizeof(*k->free));
	k->used = calloc(k->nblk, 1);
	if (!k->base || !k->free || !k->used ||
	    rdmx_mr_reg(ctx, k->base, k->size, RDMX_ACCESS_LOCAL, &k->mr)) {
		chunk_free(k);
		return NULL;
	}
	for (uint32_t i = 0; i < k->nblk; i++)
		k->free[i] = k->nblk - 1 - i; /* lowest index on top */
	k->nfree = k->nblk;
	return k;
}

static size_t blk_size(const struct chunk *k)
{
	return k->cls < 0 ? k->size : (size_t)1 << (SLAB_MIN_SHIFT + k->cls);
}

/* Take a block of class @cls from an existing chunk (locked). */
static void *slab_take(struct rdmx__slab *s, int cls)
{
	for (struct chunk *k = s->chunks; k; k = k->next) {
		uint32_t i;

		if (k->cls != cls || !k->nfree)
			continue;
		i = k->free[--k->nfree];
		k->used[i] = 1;
		return k->base + (size_t)i * blk_size(k);
	}
	return NULL;
}

void *rdmx_alloc(rdmx_ctx *ctx, size_t size)
{
	struct chunk *k;
	void *p;
	int cls = size_class(size);

	if (!ctx || !size) {
		rdmx__fail(-EINVAL, "rdmx_alloc: a context and a non-zero size are required");
		return NULL;
	}
	pthread_mutex_lock(&ctx->slab->lock);
	p = cls < 0 ? NULL : slab_take(ctx->slab, cls);
	if (!p) {
		k = chunk_new(ctx, cls, size);
		if (k) {
			k->next = ctx->slab->chunks;
			ctx->slab->chunks = k;
			p = slab_take(ctx->slab, cls);
		}
	}
	pthread_mutex_unlock(&ctx->slab->lock);
	if (!p)
		rdmx__failo(&ctx->err, -ENOMEM, "rdmx_alloc: out of memory for %zu bytes", size);
	return p;
}

/* The chunk holding @p, its block index in *@blk (locked). */
static struct chunk **chunk_of(struct rdmx__slab *s, const void *p,
			       uint32_t *blk)
{
	const char *q = p;

	for (struct chunk **pp = &s->chunks; *pp; pp = &(*pp)->next) {
		struct chunk *k = *pp;

		if (q < k->base || q >= k->base + k->size)
			continue;
		if ((size_t)(q - k->base) % blk_size(k))
			return NULL; /* not the start of a block */
		*blk = (uint32_t)((size_t)(q - k->base) / blk_size(k));
		return pp;
	}
	return NULL;
}

void rdmx_free(rdmx_ctx *ctx, void *p)
{
	struct chunk **pp, *k = NULL;
	uint32_t i = 0;

	if (!ctx || !p)
		return;
	pthread_mutex_lock(&ctx->slab->lock);
	pp = chunk_of(ctx->slab, p, &i);
	if (pp && (*pp)->used[i]) {
		(*pp)->used[i] = 0;
		(*pp)->free[(*pp)->nfree++] = i;
		if ((*pp)->cls < 0) { /* a large block goes back at once */
			k = *pp;
			*pp = k->next;
		}
	} else {
		rdmx__failo(&ctx->err, -EINVAL, "rdmx_free: %p is not allocated memory "
			    "(freed twice, or not from rdmx_alloc)", p);
	}
	pthread_mutex_unlock(&ctx->slab->lock);
	if (k)
		chunk_free(k);
}

int rdmx_alloc_mr(rdmx_ctx *ctx, const void *p, rdmx_mr **mr, size_t *off)
{
	struct chunk **pp;
	uint32_t i = 0;
	int rc = 0;

	if (!ctx || !p || !mr || !off)
		return rdmx__fail(-EINVAL, "rdmx_alloc_mr: ctx, p, mr and off are required");
	pthread_mutex_lock(&ctx->slab->lock);
	pp = chunk_of(ctx->slab, p, &i);
	if (pp && (*pp)->used[i]) {
		*mr = (*pp)->mr;
		*off = (size_t)((const char *)p - (*pp)->base);
	} else {
		rc = rdmx__failo(&ctx->err, -EINVAL, "rdmx_alloc_mr: %p is not allocated "
				 "memory of this context", p);
	}
	pthread_mutex_unlock(&ctx->slab->lock);
	return rc;
}
