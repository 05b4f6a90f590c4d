/* SPDX-License-Identifier: MIT */
/*
 * rdmx bench --pcap: tcpdump on the RDMA device's network interface,
 * RoCEv2 only (UDP 4791), for the length of a run (bench_pcap.c).
 */
#ifndef RDMX_TOOLS_BENCH_PCAP_H
#define RDMX_TOOLS_BENCH_PCAP_H

#include <stddef.h>
#include <sys/types.h>

#define BENCH_PCAP_FILTER	"udp port 4791"
#define BENCH_PCAP_START_MS	30000	/* tcpdump up and listening */
#define BENCH_PCAP_STOP_MS	10000	/* tcpdump flushed and gone */

/* A running capture. */
struct bench_pcap {
	pid_t pid;		/* tcpdump; 0: none */
	int err_fd;		/* its stderr (a pipe) */
	char netdev[64];
	char log[1024];		/* what it said on stderr */
	size_t log_len;
};

/**
 * bench_pcap_netdev - the network interface carrying RoCE for RDMA device
 * @dev, from @sys (normally "/sys"): the first of its ports'
 * gid_attrs/ndevs, else its device/net. Returns 0; -ENODEV with the reason
 * in @err when every port is InfiniBand (no netdev: capture needs ibdump)
 * or none has a netdev.
 */
int bench_pcap_netdev(const char *sys, const char *dev, char *buf, size_t len,
		      char *err, size_t err_len);

/**
 * bench_pcap_find_tcpdump - the path of tcpdump in $PATH. Returns 0, or
 * -ENOENT with the Debian package to install in @err.
 */
int bench_pcap_find_tcpdump(char *buf, size_t len, char *err, size_t err_len);

/**
 * bench_pcap_start - run @tcpdump on @netdev writing RoCEv2 packets to
 * @file, and wait (BENCH_PCAP_START_MS at most) until it listens. Returns 0;
 * -EPERM (say CAP_NET_RAW or root) or -EIO with tcpdump's own words in @err.
 */
int bench_pcap_start(struct bench_pcap *p, const char *tcpdump,
		     const char *netdev, const char *file, char *err,
		     size_t err_len);

/**
 * bench_pcap_stop - stop tcpdump (SIGTERM: it flushes and counts) and reap
 * it, SIGKILL after BENCH_PCAP_STOP_MS. Returns the packets it captured, or
 * a negative errno with the reason in @err.
 */
long bench_pcap_stop(struct bench_pcap *p, char *err, size_t err_len);

#endif /* RDMX_TOOLS_BENCH_PCAP_H */
