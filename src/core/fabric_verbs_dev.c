/* SPDX-License-Identifier: MIT */
/*
 * The real fabric's ground floor: the fabric and its devices (a protection
 * domain per device, shared by every ep on it), and memory regions.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "devices.h"
#include "errors.h"
#include "fabric_verbs_dev.h"

struct vmr {
	struct rdmx__mr pub;
	struct ibv_mr *mr;
};


/* ---------------------------------------------------------------- fabric */

int rdmx__verbs_create(struct rdmx__fabric **out)
{
	struct rdmx__fabric *fab = calloc(1, sizeof(*fab));

	if (!fab)
		return rdmx__fail(-ENOMEM, "out of memory for the verbs fabric");
	pthread_mutex_init(&fab->lock, NULL);
	*out = fab;
	return 0;
}

void rdmx__verbs_destroy(struct rdmx__fabric *fab)
{
	if (!fab)
		return;
	for (int i = 0; i < fab->ndevs; i++)
		ibv_dealloc_pd(fab->devs[i].pd);
	pthread_mutex_destroy(&fab->lock);
	free(fab);
}

/* The shared PD (and device limits) of @verbs, made on first use. */
int rdmx__verbs_dev_get(struct rdmx__fabric *fab, struct ibv_context *verbs,
			struct dev **out)
{
	struct dev *d = NULL;
	int rc = 0;

	pthread_mutex_lock(&fab->lock);
	for (int i = 0; i < fab->ndevs && !d; i++)
		if (fab->devs[i].verbs == verbs)
			d = &fab->devs[i];
	if (!d && fab->ndevs == MAX_DEVICES)
		rc = rdmx__fail(-ENOSPC, "more than %d RDMA devices in use", MAX_DEVICES);
	if (!d && !rc) {
		d = &fab->devs[fab->ndevs];
		d->verbs = verbs;
		d->pd = ibv_alloc_pd(verbs);
		if (!d->pd || ibv_query_device(verbs, &d->attr))
			rc = rdmx__fail(-errno ? -errno : -EIO,
					"cannot open %s: %s", ibv_get_device_name(verbs->device),
					strerror(errno));
		else
			fab->ndevs++;
	}
	pthread_mutex_unlock(&fab->lock);
	*out = d;
	return rc;
}

struct ibv_pd *rdmx__verbs_pd(const struct rdmx__ep *ep, struct rdma_cm_id **id)
{
	*id = ep->id;
	return ep->dev ? ep->dev->pd : NULL;
}

/* The device's PD, shared by every ep on the device. */
const void *rdmx__verbs_domain(const struct rdmx__ep *ep)
{
	return ep->dev;
}

/* ---------------------------------------------------------------- memory */

unsigned rdmx__verbs_remote_rights(int access)
{
	unsigned a = 0;

	if (access & RDMX__ACCESS_WRITE)
		a |= IBV_ACCESS_REMOTE_WRITE;
	if (access & RDMX__ACCESS_READ)
		a |= IBV_ACCESS_REMOTE_READ;
	if (access & RDMX__ACCESS_ATOMIC)
		a |= IBV_ACCESS_REMOTE_ATOMIC;
	return a;
}

int rdmx__verbs_reg_mr(struct rdmx__ep *ep, void *addr, size_t len, int access,
		       struct rdmx__mr **out)
{
	int a = IBV_ACCESS_LOCAL_WRITE | (int)rdmx__verbs_remote_rights(access);
	struct vmr *m = calloc(1, sizeof(*m));

	if (!m)
		return rdmx__fail(-ENOMEM, "out of memory for a memory region");
	if ((access & RDMX__ACCESS_MW_BIND) && rdmx__verbs_has_mw(ep->dev))
		a |= IBV_ACCESS_MW_BIND;
	m->mr = ibv_reg_mr(ep->dev->pd, addr, len, a);
	if (!m->mr) {
		int err = errno ? errno : EIO;

		free(m);
		return rdmx__fail(-err, "ibv_reg_mr of %zu bytes: %s (memlock limit? ulimit -l)",
				  len, strerror(err));
	}
	m->pub = (struct rdmx__mr){ addr, len, m->mr->lkey, m->mr->rkey };
	*out = &m->pub;
	return 0;
}

void rdmx__verbs_dereg_mr(struct rdmx__mr *mr)
{
	struct vmr *m = (struct vmr *)mr;

	if (!m)
		return;
	ibv_dereg_mr(m->mr);
	free(m);
}

struct ibv_mr *rdmx__verbs_mr_ibv(const struct rdmx__mr *mr)
{
	return ((const struct vmr *)(const void *)mr)->mr;
}

/* --------------------------------------------------------------- windows */

int rdmx__verbs_has_mw(const struct dev *d)
{
	return rdmx__dev_has_mw(&d->attr);
}

int rdmx__verbs_mw_alloc(struct rdmx__ep *ep, struct rdmx__mw **out)
{
	struct rdmx__vmw *w;

	if (!ep->dev)
		return rdmx__fail(-EINVAL, "memory window before the ep has a device");
	if (!rdmx__verbs_has_mw(ep->dev))
		return rdmx__fail(-ENOTSUP, "device %s has no type 2 memory windows",
				  ibv_get_device_name(ep->dev->verbs->device));
	w = calloc(1, sizeof(*w));
	if (!w)
		return rdmx__fail(-ENOMEM, "out of memory for a memory window");
	w->mw = ibv_alloc_mw(ep->dev->pd, IBV_MW_TYPE_2);
	if (!w->mw) {
		int err = errno ? errno : EIO;

		free(w);
		return rdmx__fail(-err, "ibv_alloc_mw (type 2): %s", strerror(err));
	}
	w->pub.rkey = w->mw->rkey;
	*out = &w->pub;
	return 0;
}

/* ibv_dealloc_mw invalidates the window: its key is refused from then on. */
void rdmx__verbs_mw_dealloc(struct rdmx__mw *mw)
{
	struct rdmx__vmw *w = (struct rdmx__vmw *)mw;

	if (!w)
		return;
	ibv_dealloc_mw(w->mw);
	free(w);
}
