/* SPDX-License-Identifier: MIT */
/*
 * Memory exported to one client (see mw.h): a type 2 window bound to the
 * client's QP, or, on a device without windows, the region's own key.
 * Set-up time only: nothing here runs per message.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "mw.h"

#define BIND_WR_ID 0x6d77626e64ull /* "mwbnd" */

enum rdmx__iso rdmx__iso_of(const struct rdmx__fabric_ops *f, struct rdmx__ep *ep)
{
	struct rdmx__mw *mw;

	if (f->mw_alloc(ep, &mw))
		return RDMX__ISO_RIGHTS;
	f->mw_dealloc(mw);
	return RDMX__ISO_WINDOW;
}

const char *rdmx__iso_name(enum rdmx__iso how)
{
	return how == RDMX__ISO_WINDOW ?
	       "memory windows bound to the client's queue pair" :
	       "exact rights only (the device has no memory windows: a key is valid "
	       "on every queue pair of the shared protection domain)";
}

/* The bind's completion on @g's send CQ (nothing else is sent there while
 * a server sets a client up). */
static int bind_wait(struct rdmx__dgram *g, int timeout_ms)
{
	struct rdmx__wc wc;
	int rc = rdmx__dgram_wait(g, 0, timeout_ms, "a memory window bind", &wc);

	if (rc)
		return rc;
	if (wc.wr_id != BIND_WR_ID || wc.op != RDMX__OP_BIND_MW)
		return rdmx__fail(-EPROTO, "UC QP %u: a completion other than the window "
				  "bind (op %d) on its send queue", g->self.qpn, (int)wc.op);
	return 0;
}

int rdmx__export_begin(const struct rdmx__fabric_ops *f, struct rdmx__ep *ep, void *addr,
			size_t len, int access, struct rdmx__export *out)
{
	int rc;

	memset(out, 0, sizeof(*out));
	out->f = f;
	rc = f->mw_alloc(ep, &out->mw);
	if (rc == -ENOTSUP) { /* no windows: the region's own key, exact rights */
		out->mw = NULL;
		out->how = RDMX__ISO_RIGHTS;
		rc = f->reg_mr(ep, addr, len, RDMX__ACCESS_LOCAL | access, &out->mr);
		if (!rc)
			out->rkey = out->mr->rkey;
		return rc;
	}
	out->how = RDMX__ISO_WINDOW;
	if (!rc) /* remote rights on the window alone */
		rc = f->reg_mr(ep, addr, len, RDMX__ACCESS_LOCAL | RDMX__ACCESS_MW_BIND, &out->mr);
	out->under = out->mr;
	if (rc)
		rdmx__export_revoke(out);
	return rc;
}

int rdmx__export_window(const struct rdmx__fabric_ops *f, struct rdmx__ep *ep,
			struct rdmx__mr *under, struct rdmx__export *out)
{
	memset(out, 0, sizeof(*out));
	out->f = f;
	out->how = RDMX__ISO_WINDOW;
	out->under = under;
	return f->mw_alloc(ep, &out->mw);
}

int rdmx__export_dgram(struct rdmx__dgram *g, void *addr, size_t len, int access,
		       int timeout_ms, struct rdmx__export *out)
{
	struct rdmx__mw_bind b = { .qp = g->qp, .addr = addr, .len = len,
				   .access = access, .wr_id = BIND_WR_ID };
	int rc = rdmx__export_begin(g->f, g->ep, addr, len, access, out);

	if (rc || out->how == RDMX__ISO_RIGHTS)
		return rc;
	b.mr = out->under;
	rc = g->f->mw_bind(out->mw, &b);
	if (!rc)
		rc = bind_wait(g, timeout_ms);
	if (rc) {
		rdmx__export_revoke(out);
		return rc;
	}
	out->rkey = out->mw->rkey;
	return 0;
}

void rdmx__export_revoke(struct rdmx__export *e)
{
	if (e->mw)
		e->f->mw_dealloc(e->mw);
	if (e->mr)
		e->f->dereg_mr(e->mr);
	e->mw = NULL;
	e->mr = NULL;
	e->under = NULL;
	e->rkey = 0;
}

/* ------------------------------------------------------ kept exports */

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER; /* set-up time only */

static void node_link(struct rdmx__export_node *n, int i, struct rdmx__export_node **head)
{
	n->l[i].next = *head;
	n->l[i].prev = head;
	if (*head)
		(*head)->l[i].prev = &n->l[i].next;
	*head = n;
}

static void node_unlink(struct rdmx__export_node *n, int i)
{
	*n->l[i].prev = n->l[i].next;
	if (n->l[i].next)
		n->l[i].next->l[i].prev = n->l[i].prev;
}

int rdmx__export_keep(struct rdmx__export_node **by_conn, struct rdmx__export_node **by_mr,
		      const struct rdmx__export *e)
{
	struct rdmx__export_node *n = malloc(sizeof(*n));

	if (!n)
		return rdmx__fail(-ENOMEM, "out of memory for an export's record");
	n->e = *e;
	pthread_mutex_lock(&kept_lock);
	node_link(n, RDMX__KEPT_BY_CONN, by_conn);
	node_link(n, RDMX__KEPT_BY_MR, by_mr);
	pthread_mutex_unlock(&kept_lock);
	return 0;
}

void rdmx__export_revoke_all(struct rdmx__export_node **list)
{
	struct rdmx__export_node *n;

	pthread_mutex_lock(&kept_lock);
	while ((n = *list)) {
		node_unlink(n, RDMX__KEPT_BY_CONN);
		node_unlink(n, RDMX__KEPT_BY_MR);
		rdmx__export_revoke(&n->e);
		free(n);
	}
	pthread_mutex_unlock(&kept_lock);
}
