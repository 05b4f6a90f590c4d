/* SPDX-License-Identifier: MIT */
/*
 * What the tools tell a user who has no RDMA device. The source tree has
 * the sandbox (sandbox/run: SoftRoCE in a VM); the packages do not ship
 * it, so a packaged build (-DRDMX_PACKAGED=ON, debian/rules) names the
 * SoftRoCE set-up instead, and its --help and man pages show the examples
 * without the "sandbox/run -- " in front. One place decides both.
 */
#ifndef RDMX_TOOLS_HINT_H
#define RDMX_TOOLS_HINT_H

#include <stdio.h>

/* One line on @f: what to do without an RDMA NIC, for command @cmd. */
void hint_no_device(FILE *f, const char *cmd);

/* @text (a page's examples) as this build shows it: unchanged in the
 * source tree, without "sandbox/run -- " in a packaged build. The result
 * lives until the next call. */
const char *hint_examples(const char *text);

#endif
