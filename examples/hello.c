/* hello: a listener and a dialer in one process send one message. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <rdmx/rdmx.h>

#define CHECK(call) do { int rc_ = (call); if (rc_ < 0) { fprintf(stderr, "%s: %s: %s\n", \
	#call, rdmx_strerror(rc_), rdmx_last_error()); exit(1); } } while (0)

static void *server(void *lis)             /* accept, print one message */
{
	rdmx_conn *c;
	struct rdmx_msg m;

	CHECK(rdmx_accept(lis, 5000, &c));
	CHECK(rdmx_recv(c, &m, 5000));
	printf("server got: %.*s\n", (int)m.len, (const char *)m.data);
	CHECK(rdmx_msg_release(c, &m));
	return c;                                 /* main closes it */
}

int main(int argc, char **argv)            /* hello [fake|verbs [ADDR]] */
{
	struct rdmx_ctx_opts co;
	const char *addr = argc > 2 ? argv[2] : "127.0.0.1";
	rdmx_ctx *ctx;
	rdmx_listener *lis;
	rdmx_conn *c;
	void *sc;
	struct rdmx_msg m;
	pthread_t t;

	rdmx_ctx_opts_init(&co);
	co.fabric = argc > 1 ? argv[1] : "fake"; /* fake: in-process, no RDMA device */
	CHECK(rdmx_ctx_create(&ctx, &co));
	CHECK(rdmx_listen(ctx, addr, 0, NULL, &lis));
	CHECK(-pthread_create(&t, NULL, server, lis));
	CHECK(rdmx_dial(ctx, addr, rdmx_listener_port(lis), NULL, &c));
	CHECK(rdmx_msg_alloc(c, 64, &m, 5000));   /* a buffer in registered memory */
	m.len = (size_t)snprintf(m.data, m.cap, "hello over %s", rdmx_conn_protocol(c));
	CHECK(rdmx_send(c, &m));
	CHECK(rdmx_flush(c, 5000));               /* it is in the server's memory */
	CHECK(-pthread_join(t, &sc));
	rdmx_conn_close(sc);
	rdmx_conn_close(c);
	rdmx_listener_destroy(lis);
	rdmx_ctx_destroy(ctx);
	return 0;
}
