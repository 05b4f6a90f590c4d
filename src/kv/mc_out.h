/* SPDX-License-Identifier: MIT */
/* A memcached session's output and the caps of its buffers (mc_out.c). */
#ifndef RDMX_KV_MC_OUT_H
#define RDMX_KV_MC_OUT_H

#include "kv/mc_sess.h"

void rdmx__mc_out_consume(struct rdmx__mc_sess *s, size_t n);
size_t rdmx__mc_out_high(const struct rdmx__mc_sess *s);
bool rdmx__mc_out_fits(struct rdmx__mc_sess *s, size_t n);
void rdmx__mc_out_bytes(struct rdmx__mc_sess *s, const void *p, size_t n);
void rdmx__mc_out_printf(struct rdmx__mc_sess *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void rdmx__mc_reply(struct rdmx__mc_sess *s, const char *line);
void rdmx__mc_reply_error(struct rdmx__mc_sess *s, const char *line);
bool rdmx__mc_charge(struct rdmx__mc_sess *s, size_t from, size_t to);
void rdmx__mc_refuse_read(struct rdmx__mc_sess *s);

#endif /* RDMX_KV_MC_OUT_H */
