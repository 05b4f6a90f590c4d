/* SPDX-License-Identifier: MIT */
/*
 * A connection's state: it goes down once, with its first reason kept
 * under down_lock (a disconnect, a failed completion, a dead peer), and
 * every call on it returns that reason from then on.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "conn.h"
#include "errors.h"
#include "fabric.h"

/* The reason @c went down, as this thread's error; its down_rc. */
int rdmx__conn_down_reason(rdmx_conn *c)
{
	int rc;

	pthread_mutex_lock(&c->down_lock);
	rc = rdmx__fail(c->down_rc, "%s", c->err.msg);
	pthread_mutex_unlock(&c->down_lock);
	return rc;
}

int rdmx__conn_down(rdmx_conn *c, int rc, const char *fmt, ...)
{
	char msg[RDMX__ERRMSG_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&c->down_lock);
	if (c->state != RDMX__CONN_DOWN) {
		memcpy(c->err.msg, msg, sizeof(msg));
		c->down_rc = rc;
		c->state = RDMX__CONN_DOWN;
	}
	rc = rdmx__fail(c->down_rc, "%s", c->err.msg);
	pthread_mutex_unlock(&c->down_lock);
	return rc;
}

int rdmx__conn_keep_err(rdmx_conn *c, int rc)
{
	pthread_mutex_lock(&c->down_lock);
	rdmx__keep(&c->err, rc);
	pthread_mutex_unlock(&c->down_lock);
	return rc;
}

int rdmx__conn_wc_error(rdmx_conn *c, const struct rdmx__wc *wc,
			const char *what)
{
	if (wc->status == RDMX__WC_RETRY)
		RDMX__COUNT(c, retry_exceeded, 1);
	if (wc->status == RDMX__WC_RNR_RETRY)
		RDMX__COUNT(c, rnr_exceeded, 1);
	if (c->f->check_event(c->ep) == -ECONNRESET ||
	    wc->status == RDMX__WC_RETRY)
		return rdmx__conn_down(c, -ECONNRESET,
				       "%s: peer stopped answering (%s)", what,
				       rdmx__wc_status_name(wc->status));
	return rdmx__conn_down(c, -EIO, "%s failed: %s (status %d)", what,
			       rdmx__wc_status_name(wc->status),
			       wc->vendor_status);
}
