/* SPDX-License-Identifier: MIT */
/* What to do without an RDMA device, for the source tree and the packages
 * (hint.h). */
#include "hint.h"

#include <string.h>

#define SANDBOX_PREFIX "sandbox/run -- "

#ifdef RDMX_PACKAGED
void hint_no_device(FILE *f, const char *cmd)
{
	fprintf(f, "rdmx %s: without an RDMA NIC, set up SoftRoCE (as root: "
		"modprobe rdma_rxe; rdma link add rxe0 type rxe netdev IFACE), "
		"then check with 'rdmx doctor'\n", cmd);
}

const char *hint_examples(const char *text)
{
	static char buf[8192];
	size_t n = 0, skip = strlen(SANDBOX_PREFIX);
	const char *s = text;

	if (!text)
		return NULL;
	while (*s && n + 1 < sizeof(buf)) {
		if (!strncmp(s, SANDBOX_PREFIX, skip))
			s += skip;
		else
			buf[n++] = *s++;
	}
	if (*s) /* longer than any page: shown as written */
		return text;
	buf[n] = '\0';
	return buf;
}
#else
void hint_no_device(FILE *f, const char *cmd)
{
	fprintf(f, "rdmx %s: without an RDMA NIC, try: " SANDBOX_PREFIX "rdmx %s "
		"(SoftRoCE in a VM)\n", cmd, cmd);
}

const char *hint_examples(const char *text)
{
	return text;
}
#endif
