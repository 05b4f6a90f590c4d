/* SPDX-License-Identifier: MIT */
/*
 * echo_server: a many-client echo server that is one loop over
 * rdmx_listener_next() - new connections, messages from any of them, and
 * departures all come from that one call. To be self-contained it also
 * starts CLIENTS client threads in the same process (echo_clients.c); each
 * sends ROUNDS numbered messages, checks every echo, and leaves. The server
 * ends when all have left.
 *
 *   sandbox/run -- build/bin/example_echo_server                 # 3 clients
 *   build/bin/example_echo_server 10.0.0.1 [protocol [clients]]  # RDMA host
 *   build/bin/example_echo_server "" srq                         # srq, picked address
 */
#include <stdio.h>

#include <rdmx/rdmx.h>

#include "echo_clients.h"

static int serve(rdmx_listener *lis, int clients)
{
	struct rdmx_event ev;
	int left = 0, echoed = 0, rc = 0;

	while (left < clients && !(rc = rdmx_listener_next(lis, &ev, WAIT_MS))) {
		switch (ev.type) {
		case RDMX_EVENT_CONN:
			printf("server: a client connected (%s)\n", rdmx_conn_protocol(ev.conn));
			break;
		case RDMX_EVENT_MSG:
			rc = echo_reply(ev.conn, &ev.msg);
			rdmx_msg_release(ev.conn, &ev.msg);
			echoed++;
			break;
		case RDMX_EVENT_CLOSED:
			rdmx_conn_close(ev.conn);
			left++;
			break;
		}
		if (rc)
			break;
	}
	if (rc)
		fprintf(stderr, "server: %s (%s)\n", rdmx_strerror(rc), rdmx_listener_error(lis));
	else
		printf("server: echoed %d messages for %d clients\n", echoed, clients);
	return rc;
}

int main(int argc, char **argv)
{
	struct echo_run r;

	if (echo_run_open(&r, "echo_server", argc, argv))
		return 1;
	echo_clients_start(&r);
	return echo_run_close(&r, serve(r.lis, r.n));
}
