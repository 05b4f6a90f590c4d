/* SPDX-License-Identifier: MIT */
/* rdmx KV's RDMA door (kv_door.c), as the server object uses it. */
#ifndef RDMX_KV_DOOR_H
#define RDMX_KV_DOOR_H

#include <rdmx/kv.h>

struct rdmx__kv;
struct rdmx__kv_door;

int rdmx__kv_door_open(struct rdmx__kv *kv, const struct rdmx_kv_server_opts *o,
		       struct rdmx__kv_door **out);
int rdmx__kv_door_port(const struct rdmx__kv_door *d);
int rdmx__kv_door_start(struct rdmx__kv_door *d);
int rdmx__kv_door_stop(struct rdmx__kv_door *d);
void rdmx__kv_door_close(struct rdmx__kv_door *d);
/* The thread's last error copied to @buf (@n bytes): a message may quote
 * it without formatting the buffer into itself. */
const char *rdmx__kv_last(char *buf, size_t n);

#endif /* RDMX_KV_DOOR_H */
