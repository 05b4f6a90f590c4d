/* SPDX-License-Identifier: MIT */
#include "errors.h"

#include <errno.h>
#include <limits.h>
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

/*
 * The one table of return codes, as libuv's UV_ERRNO_MAP: every code rdmx
 * returns itself (tests/unit/test_errors.c checks each -E literal in src/
 * against it) and the system errors it passes on from rdma_cm, sockets and
 * the allocator. rdmx_strerror() and rdmx_err_name() both read it. A NULL
 * text means the C library's strerror() says it well enough.
 */
#define RDMX__ERRNO_MAP(XX)                                              \
	XX(EMSGSIZE, "message too long for the connection")             \
	XX(ECONNREFUSED, "connection refused")                          \
	XX(ECONNRESET, "connection closed by peer")                     \
	XX(ETIMEDOUT, "timed out")                                      \
	XX(EAGAIN, "no resource free now, try again")                   \
	XX(EPROTO, "protocol error")                                    \
	XX(EHOSTUNREACH, "host unreachable")                            \
	XX(ENODEV, "no RDMA device")                                    \
	XX(ENOTCONN, "not connected")                                   \
	XX(EINVAL, NULL) XX(ENOMEM, NULL) XX(ENOENT, NULL) XX(EIO, NULL)  \
	XX(ENOSPC, NULL) XX(ENOBUFS, NULL) XX(ESHUTDOWN, NULL)          \
	XX(EEXIST, NULL) XX(EOPNOTSUPP, NULL) XX(ENOTSUP, NULL)         \
	XX(EBUSY, NULL) XX(EADDRNOTAVAIL, NULL) XX(EACCES, NULL)        \
	XX(E2BIG, NULL) XX(ECONNABORTED, NULL) XX(EOVERFLOW, NULL)      \
	XX(ENOSYS, NULL) XX(EADDRINUSE, NULL) XX(EPERM, NULL)           \
	XX(EINTR, NULL) XX(EBADF, NULL) XX(EFAULT, NULL) XX(ENFILE, NULL) \
	XX(EMFILE, NULL) XX(EPIPE, NULL) XX(ERANGE, NULL)               \
	XX(EPROTONOSUPPORT, NULL) XX(EAFNOSUPPORT, NULL)                \
	XX(ENETDOWN, NULL) XX(ENETUNREACH, NULL) XX(EHOSTDOWN, NULL)    \
	XX(EISCONN, NULL) XX(EALREADY, NULL) XX(EINPROGRESS, NULL)      \
	XX(ECANCELED, NULL) XX(ENODATA, NULL) XX(ESRCH, NULL)           \
	XX(ENXIO, NULL) XX(ENOTSOCK, NULL)

struct rdmx__errno_row {
	int code;
	const char *name;
	const char *text;
};

#define RDMX__ERRNO_ROW(code, text) {code, #code, text},
static const struct rdmx__errno_row errno_rows[] = {
	RDMX__ERRNO_MAP(RDMX__ERRNO_ROW)
};
#undef RDMX__ERRNO_ROW

/* The table's row of @rc (a -errno other than INT_MIN); aliases (ENOTSUP
 * is EOPNOTSUPP on Linux) find the first. NULL when @rc is not in it. */
static const struct rdmx__errno_row *errno_row(int rc)
{
	size_t i;

	for (i = 0; i < sizeof(errno_rows) / sizeof(errno_rows[0]); i++)
		if (-rc == errno_rows[i].code)
			return &errno_rows[i];
	return NULL;
}

const char *rdmx_strerror(int rc)
{
	const struct rdmx__errno_row *row;

	if (rc == 0)
		return "success";
	if (rc > 0 || rc == INT_MIN)
		return "not an error code";
	row = errno_row(rc);
	return row && row->text ? row->text : strerror(-rc);
}

const char *rdmx_err_name(int rc)
{
	const struct rdmx__errno_row *row;

	if (rc == 0)
		return "OK";
	row = rc < 0 && rc != INT_MIN ? errno_row(rc) : NULL;
	return row ? row->name : "EUNKNOWN";
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
