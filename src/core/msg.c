/* SPDX-License-Identifier: MIT */
/* Message handles: the one-buffer-at-a-time check of the protocols. */
#include <errno.h>

#include "conn.h"
#include "errors.h"
#include "msg.h"
#include "protocol.h"

int rdmx__one_buf_busy(const rdmx_conn *c, const struct rdmx__one_buf *b)
{
	if (!b->live)
		return 0;
	return rdmx__fail(-EBUSY, "%s: one buffer at a time: send or release the last one from rdmx_msg_alloc first",
			  c->proto->name);
}
