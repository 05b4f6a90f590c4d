// SPDX-License-Identifier: MIT
/*
 * rdmx bench --pcap: tcpdump on the RoCE network interface of the RDMA
 * device, filtered to RoCEv2 (UDP 4791), started before the first test and
 * stopped (flushed) after the last one or on SIGINT/SIGTERM.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_pcap.h"
#include "bench_pre.h"

/* ------------------------------------------------------- the interface */

/* A path into @buf; -1 if it does not fit. */
static int __attribute__((format(printf, 3, 4)))
pathf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* The first line of @path, without its newline; -1 if unreadable or empty. */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	bool ok;

	if (!f)
		return -1;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (!ok)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	return buf[0] ? 0 : -1;
}

/* The first readable, non-empty entry of directory @dir: its content, or
 * (@names) its name. */
static int first_entry(const char *dir, bool names, char *buf, size_t len)
{
	char path[PATH_MAX];
	struct dirent *e;
	int rc = -1;
	DIR *d;

	d = opendir(dir);
	if (!d)
		return -1;
	while (rc && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (names) {
			rc = snprintf(buf, len, "%s", e->d_name) < (int)len ? 0 : -1;
			continue;
		}
		/* unused GID slots read as EINVAL */
		if (!pathf(path, sizeof(path), "%s/%s", dir, e->d_name))
			rc = read_line(path, buf, len);
	}
	closedir(d);
	return rc;
}

/* Ports of @base/ports: a netdev of an Ethernet port into @buf (0), else
 * counts the InfiniBand ones. */
static int port_netdev(const char *base, char *buf, size_t len, int *ib_ports)
{
	char path[PATH_MAX], ll[32];
	struct dirent *e;
	int rc = -1;
	DIR *d;

	if (pathf(path, sizeof(path), "%s/ports", base))
		return -1;
	d = opendir(path);
	if (!d)
		return -1;
	while (rc && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (pathf(path, sizeof(path), "%s/ports/%s/link_layer", base,
			  e->d_name))
			continue;
		if (!read_line(path, ll, sizeof(ll)) && !strcmp(ll, "InfiniBand")) {
			(*ib_ports)++;
			continue;
		}
		if (!pathf(path, sizeof(path), "%s/ports/%s/gid_attrs/ndevs", base,
			   e->d_name))
			rc = first_entry(path, false, buf, len);
	}
	closedir(d);
	return rc;
}

int bench_pcap_netdev(const char *sys, const char *dev, char *buf, size_t len,
		      char *err, size_t err_len)
{
	char base[PATH_MAX], path[PATH_MAX];
	int ib_ports = 0;

	if (!pathf(base, sizeof(base), "%s/class/infiniband/%s", sys, dev) &&
	    !port_netdev(base, buf, len, &ib_ports))
		return 0;
	if (ib_ports) {
		snprintf(err, err_len, "--pcap: %s is an InfiniBand device: it has "
			 "no network interface for tcpdump (capture InfiniBand "
			 "with ibdump)", dev);
		return -ENODEV;
	}
	if (!pathf(path, sizeof(path), "%s/device/net", base) &&
	    !first_entry(path, true, buf, len))
		return 0;
	snprintf(err, err_len, "--pcap: RDMA device %s has no network interface "
		 "(no gid_attrs/ndevs, no device/net in %s): nothing for tcpdump "
		 "to capture on", dev, base);
	return -ENODEV;
}

int bench_pcap_find_tcpdump(char *buf, size_t len, char *err, size_t err_len)
{
	if (!bench_find_program("tcpdump", buf, len))
		return 0;
	snprintf(err, err_len, "--pcap needs tcpdump, which is not in PATH "
		 "(Debian: apt install tcpdump)");
	return -ENOENT;
}

/* ------------------------------------------------------------- tcpdump */

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Append what tcpdump wrote on stderr, waiting up to @ms. 0: more may come;
 * 1: end of file (tcpdump closed it: exited). */
static int read_log(struct bench_pcap *p, int ms)
{
	struct pollfd pfd = { .fd = p->err_fd, .events = POLLIN };
	char junk[256];
	ssize_t n;

	if (poll(&pfd, 1, ms) <= 0)
		return 0;
	if (p->log_len + 1 < sizeof(p->log))
		n = read(p->err_fd, p->log + p->log_len, sizeof(p->log) - 1 - p->log_len);
	else
		n = read(p->err_fd, junk, sizeof(junk)); /* keep it draining */
	if (n <= 0)
		return n == 0 || errno != EINTR;
	if (p->log_len + 1 < sizeof(p->log)) {
		p->log_len += (size_t)n;
		p->log[p->log_len] = '\0';
	}
	return 0;
}

/* The child: stderr to the pipe, stdout to /dev/null, tcpdump. Only
 * async-signal-safe calls (the parent may have threads). */
static void exec_tcpdump(const char *tcpdump, char *const argv[], int err_w)
{
	int null = open("/dev/null", O_RDWR);

	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
	}
	dup2(err_w, STDERR_FILENO);
	prctl(PR_SET_PDEATHSIG, SIGTERM); /* rdmx killed: the capture ends */
	execv(tcpdump, argv);
	_exit(127);
}

static int spawn(struct bench_pcap *p, const char *tcpdump, const char *file)
{
	/* --immediate-mode: packets leave the kernel's ring as they come, not
	 * per filled block, which SIGTERM would drop (a 4 s run lost every
	 * packet); -U: each written at once, so what a signal cuts is on disk;
	 * -Z root: Debian's tcpdump drops root for "tcpdump", which may not
	 * write FILE */
	char *argv[] = { "tcpdump", "-i", p->netdev, "-n", "--immediate-mode", "-U",
			 "-w", (char *)file, BENCH_PCAP_FILTER, NULL, NULL, NULL };
	int fds[2];

	if (geteuid() == 0) {
		argv[8] = "-Z";
		argv[9] = "root";
		argv[10] = BENCH_PCAP_FILTER;
	}
	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	p->pid = fork();
	if (p->pid == 0)
		exec_tcpdump(tcpdump, argv, fds[1]);
	close(fds[1]);
	if (p->pid < 0) {
		p->pid = 0;
		close(fds[0]);
		return -errno;
	}
	p->err_fd = fds[0];
	return 0;
}

/* tcpdump exited before listening: why, from its own words. */
static int start_failed(struct bench_pcap *p, char *err, size_t err_len)
{
	bool perm = strstr(p->log, "ermission") || strstr(p->log, "not permitted");

	p->log[strcspn(p->log, "\n")] = '\0';
	if (perm)
		snprintf(err, err_len, "--pcap: no permission to capture on %s: "
			 "run as root or give tcpdump CAP_NET_RAW (tcpdump: %s)",
			 p->netdev, p->log);
	else
		snprintf(err, err_len, "--pcap: tcpdump on %s did not start: %s",
			 p->netdev, p->log[0] ? p->log : "no message");
	bench_pcap_stop(p, NULL, 0);
	return perm ? -EPERM : -EIO;
}

int bench_pcap_start(struct bench_pcap *p, const char *tcpdump,
		     const char *netdev, const char *file, char *err,
		     size_t err_len)
{
	long long deadline = now_ms() + BENCH_PCAP_START_MS;
	int rc;

	*p = (struct bench_pcap){ .err_fd = -1 };
	snprintf(p->netdev, sizeof(p->netdev), "%s", netdev);
	rc = spawn(p, tcpdump, file);
	if (rc) {
		snprintf(err, err_len, "--pcap: cannot start %s: %s", tcpdump,
			 strerror(-rc));
		return rc;
	}
	while (!strstr(p->log, "listening on")) {
		if (read_log(p, 100) == 1)
			return start_failed(p, err, err_len);
		if (now_ms() >= deadline) {
			snprintf(err, err_len, "--pcap: tcpdump on %s not listening "
				 "after %d s", netdev, BENCH_PCAP_START_MS / 1000);
			bench_pcap_stop(p, NULL, 0);
			return -ETIMEDOUT;
		}
	}
	return 0;
}

/* Wait for tcpdump to exit, reading its stderr; SIGKILL after the bound. */
static int reap(struct bench_pcap *p, int *status)
{
	long long deadline = now_ms() + BENCH_PCAP_STOP_MS;
	pid_t r;

	while ((r = waitpid(p->pid, status, WNOHANG)) == 0) {
		if (now_ms() >= deadline) {
			kill(p->pid, SIGKILL);
			waitpid(p->pid, status, 0);
			return -ETIMEDOUT;
		}
		read_log(p, 50);
	}
	while (read_log(p, 0) == 0 && p->log_len + 1 < sizeof(p->log))
		; /* the rest of its stderr ("N packets captured") */
	return r < 0 ? -errno : 0;
}

long bench_pcap_stop(struct bench_pcap *p, char *err, size_t err_len)
{
	const char *c;
	int status = 0, rc;

	if (!p->pid)
		return -ESRCH;
	kill(p->pid, SIGTERM); /* gone already after a Ctrl-C: harmless */
	rc = reap(p, &status);
	p->pid = 0;
	close(p->err_fd);
	p->err_fd = -1;
	if (rc && err)
		snprintf(err, err_len, "--pcap: tcpdump on %s did not stop within "
			 "%d s; killed (the file may lack its last packets)",
			 p->netdev, BENCH_PCAP_STOP_MS / 1000);
	if (rc)
		return rc;
	c = strstr(p->log, "packets captured");
	if (!c) /* "N packet captured" for one */
		c = strstr(p->log, "packet captured");
	while (c && c > p->log && c[-1] == ' ')
		c--;
	while (c && c > p->log && c[-1] >= '0' && c[-1] <= '9')
		c--;
	if (c)
		return strtol(c, NULL, 10);
	if (err)
		snprintf(err, err_len, "--pcap: tcpdump on %s ended without its "
			 "count (exit status %d): %s", p->netdev,
			 WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
			 p->log);
	return -EIO;
}
