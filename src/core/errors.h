/* SPDX-License-Identifier: MIT */
/*
 * Error detail: every failing internal call returns a negative errno and
 * records a readable message with rdmx__fail(). The message lives in the
 * calling thread (rdmx_last_error()); rdmx__keep() copies it onto the public
 * object the caller called, so it survives later calls in the same thread.
 */
#ifndef RDMX_CORE_ERRORS_H
#define RDMX_CORE_ERRORS_H

#include <stddef.h>

#define RDMX__ERRMSG_LEN 256

/* What a message about a missing RDMA device suggests: the sandbox in the
 * source tree; a packaged build (RDMX_PACKAGED) ships none, so it names
 * the SoftRoCE set-up. */
#ifdef RDMX_PACKAGED
#define RDMX__NO_DEVICE_HINT "without an RDMA NIC, set up SoftRoCE: " \
	"rdma link add rxe0 type rxe netdev IFACE"
#else
#define RDMX__NO_DEVICE_HINT "without an RDMA NIC, try sandbox/run"
#endif

struct rdmx__err {
	char msg[RDMX__ERRMSG_LEN];
};

/* Record "fmt..." as the thread's last error; returns @rc (a -errno). */
int rdmx__fail(int rc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * -EAGAIN for a poll that found nothing, with no message formatted (a
 * zero-timeout poll costs no vsnprintf): the thread's last error and the
 * object's stay what they were; rdmx__keep() copies nothing for it.
 */
int rdmx__again(void);

/* When @rc < 0, copy the thread's last error into @obj; returns @rc. */
int rdmx__keep(struct rdmx__err *obj, int rc);

/* rdmx__fail() then rdmx__keep(): the common case in public functions. */
int rdmx__failo(struct rdmx__err *obj, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The thread's last error (never NULL). */
const char *rdmx__last(void);

#endif /* RDMX_CORE_ERRORS_H */
