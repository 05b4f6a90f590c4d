/* SPDX-License-Identifier: MIT */
#include "errors.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <rdmx/rdmx.h>

#include "fabric.h"

static _Thread_local char last_error[RDMX__ERRMSG_LEN];
static _Thread_local int quiet; /* the last failure was rdmx__again() */

__attribute__((format(printf, 1, 0)))
static void vrecord(const char *fmt, va_list ap)
{
	quiet = 0;
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
}

int rdmx__fail(int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vrecord(fmt, ap);
	va_end(ap);
	return rc;
}

int rdmx__again(void)
{
	quiet = 1;
	return -EAGAIN;
}

int rdmx__keep(struct rdmx__err *obj, int rc)
{
	if (rc == -EAGAIN && quiet)
		return rc;
	if (obj && rc < 0)
		snprintf(obj->msg, sizeof(obj->msg), "%s", last_error);
	return rc;
}

int rdmx__failo(struct rdmx__err *obj, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vrecord(fmt, ap);
	va_end(ap);
	return rdmx__keep(obj, rc);
}

const char *rdmx__last(void)
{
	return last_error;
}

const char *rdmx_last_error(void)
{
	return last_error;
}

const char *rdmx_strerror(int rc)
{
	if (rc == 0)
		return "success";
	if (rc > 0)
		return "not an error code";
	switch (-rc) {
	case EMSGSIZE:
		return "message too long for the connection";
	case ECONNREFUSED:
		return "connection refused";
	case ECONNRESET:
		return "connection closed by peer";
	case ETIMEDOUT:
		return "timed out";
	case EAGAIN:
		return "no resource free now, try again";
	case EPROTO:
		return "protocol error";
	case EHOSTUNREACH:
		return "host unreachable";
	case ENODEV:
		return "no RDMA device";
	case ENOTCONN:
		return "not connected";
	default:
		return strerror(-rc);
	}
}

const char *rdmx__wc_status_name(enum rdmx__wc_status st)
{
	static const char *const names[] = {
		[RDMX__WC_OK] = "success",
		[RDMX__WC_FLUSHED] = "flushed (queue pair in error)",
		[RDMX__WC_REMOTE_ACCESS] = "remote access error",
		[RDMX__WC_RNR_RETRY] = "receiver not ready, retries exhausted",
		[RDMX__WC_RETRY] = "transport retries exhausted",
		[RDMX__WC_LOCAL_LENGTH] = "message longer than the receive buffer",
		[RDMX__WC_OTHER] = "other error",
	};

	if ((unsigned)st >= sizeof(names) / sizeof(names[0]))
		return "unknown status";
	return names[st];
}
