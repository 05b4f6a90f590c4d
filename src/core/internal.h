/* SPDX-License-Identifier: MIT */
/* Temporary: every core header (to go). */
#ifndef RDMX_CORE_INTERNAL_H
#define RDMX_CORE_INTERNAL_H
#include "clock.h"
#include "conn.h"
#include "protocol.h"
#include "opts.h"
#include "msg.h"
#include "wait.h"
#include "qp.h"
#include "event.h"
#include "waitset.h"
#include "live.h"
#include "opslots.h"
#include "post.h"
#include "group.h"
#include "accept.h"
#include "mem.h"
#include "token.h"
#include "recvvec.h"
#include "sendvec.h"
#include "wire.h"
#endif
