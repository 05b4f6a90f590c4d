#!/bin/bash
# rdmx sandbox: stage 2, run as PID 1 inside the VM after switch_root.
#
# The root is an overlay of the host's / (read-only, 9p) under a tmpfs, so the
# host's userland (bash, iproute2, rdma-core, perftest, the project's build) is
# what runs here.  Stage 1 (sandbox/init) has mounted everything, loaded the
# modules and configured the network device.  Every program started here is
# loaded over 9p, which is slow under TCG: prefer bash builtins.
#
# /run/rdmx is the per-run share with the host: config.sh, env.sh, cmd.sh come
# in; markers, logs and exit statuses go out.  Markers (ROLE is S for one host,
# A or B for two):
#   ROLE.booted  stage 1 reached the run share (written by init)
#   ROLE.rxe     rxe is ACTIVE; content "rxe0 NETDEV IPV4"
#   A.ready      (two hosts) the server command listens on A
#   ROLE.cmd     CMD is about to run
#   ROLE.status  CMD's exit status
#   ROLE.error   a one-line reason when the guest gives up
# The host creates "done" when host A may power off.

R=/run/rdmx
ROLE=${rdmx_role:-S}
ADDR=${rdmx_addr:-}
PEER_ADDR=${rdmx_peer:-}
exec </dev/null >>"$R/$ROLE.log" 2>&1
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

uptime_s() { local u; read -r u _ </proc/uptime; echo "$u"; }
log() { echo "[$(uptime_s)] $*"; }
now() { printf '%(%s)T' -1; }

poweroff_now() {
	sync
	echo o >/proc/sysrq-trigger
	sleep 10
	echo b >/proc/sysrq-trigger
}

mark() { # name [content]
	printf '%s\n' "${2:-}" >"$R/.$ROLE.$1.tmp" && mv -f "$R/.$ROLE.$1.tmp" "$R/$ROLE.$1"
}

OUTPORT='' ERRPORT=''
die() {
	log "FATAL: $*"
	mark error "$*"
	if [ -n "$ERRPORT" ]; then
		echo "sandbox (guest $ROLE): $*" >"$ERRPORT" 2>/dev/null || true
	fi
	poweroff_now
}

log "stage 2 start, role $ROLE"
# shellcheck source=/dev/null
. "$R/config.sh" || die "cannot read $R/config.sh"
read -r NETDEV <"$R/.$ROLE.netdev" || die "stage 1 did not set up a network device"

case $ROLE in A) hostname rdmx-a ;; B) hostname rdmx-b ;; *) hostname rdmx ;; esac
for l in fd:/proc/self/fd stdin:/proc/self/fd/0 stdout:/proc/self/fd/1 stderr:/proc/self/fd/2; do
	[ -e "/dev/${l%%:*}" ] || ln -s "${l#*:}" "/dev/${l%%:*}"
done

# Output ports (virtio-serial) to the host's stdout/stderr, found by name.
for p in /sys/class/virtio-ports/*; do
	[ -r "$p/name" ] || continue
	read -r name <"$p/name"
	case $name in
	rdmx.stdout) OUTPORT=/dev/${p##*/} ;;
	rdmx.stderr) ERRPORT=/dev/${p##*/} ;;
	esac
done

rdma link add rxe0 type rxe netdev "$NETDEV" || die "rdma link add rxe0 type rxe netdev $NETDEV failed"

# Wait (bounded) for the port to be ACTIVE and the IPv4 GID to be present.
IFS=. read -r a b c d <<<"$ADDR"
gid=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
port=/sys/class/infiniband/rxe0/ports/1
deadline=$(($(now) + RXE_WAIT))
while :; do
	state='' ok=''
	read -r _ state <"$port/state" 2>/dev/null || true
	if [ "$state" = ACTIVE ]; then
		for g in "$port"/gids/*; do
			read -r v <"$g" 2>/dev/null || continue
			if [ "$v" = "$gid" ]; then ok=1; break; fi
		done
	fi
	[ -z "$ok" ] || break
	[ "$(now)" -lt "$deadline" ] || die "rxe0 port not ACTIVE with a GID for $ADDR after ${RXE_WAIT}s (state '$state')"
	sleep 0.05
done
log "rxe0 ACTIVE on $NETDEV $ADDR"
mark rxe "rxe0 $NETDEV $ADDR"

ulimit -l unlimited
ulimit -n 65536 2>/dev/null || true

# Run something with the caller's environment (env.sh), not PID 1's.
with_env() {
	local v
	for v in $(compgen -e); do unset "$v" 2>/dev/null; done
	export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
	# shellcheck source=/dev/null
	. "$R/env.sh"
	export RDMX_SANDBOX=1 RDMX_SANDBOX_ADDR="$ADDR" RDMX_SANDBOX_ROLE="$ROLE"
	if [ -n "$PEER_ADDR" ] && [ "$ROLE" = B ]; then export RDMX_PEER_ADDR="$PEER_ADDR"; fi
	cd "$WORKDIR" 2>/dev/null || cd / || true
	"$@"
}

# The rdma_cm IDs in state LISTEN on this host.
listening() { rdma res show cm_id 2>/dev/null | grep -c ' state LISTEN '; }

# The client may dial as soon as the server listens: wait (bounded by
# SERVER_WAIT) until it has an rdma_cm listener and their number held still
# for SERVER_SETTLE (a server may listen on several ports, from several
# processes), or it exited. A fixed sleep raced a slow start under load:
# every dial of the run was refused.
wait_listening() {
	local deadline=$(($(now) + SERVER_WAIT)) n last=-1
	while :; do
		[ ! -e "$R/server.status" ] || { log "server command exited (status $(cat "$R/server.status"))"; return; }
		n=$(listening)
		if [ "$n" -gt 0 ] && [ "$n" = "$last" ]; then
			log "server listening ($n rdma_cm listeners)"
			return
		fi
		last=$n
		[ "$(now)" -lt "$deadline" ] || { log "no stable rdma_cm listener after ${SERVER_WAIT}s ($n); going on"; return; }
		sleep "$SERVER_SETTLE"
	done
}

if [ -n "${SERVER_CMD:-}" ] && [ "$ROLE" != B ]; then
	log "starting server command"
	(
		with_env sh -c "$SERVER_CMD" </dev/null >>"$R/server.log" 2>&1
		echo $? >"$R/server.status"
	) &
	wait_listening
fi
[ "$ROLE" != A ] || mark ready

if [ "$ROLE" = A ]; then
	# Serve until the host says B is done (the host enforces the overall timeout).
	while [ ! -e "$R/done" ]; do sleep 0.2; done
	log "host says done; powering off"
	poweroff_now
fi

if [ "$ROLE" = B ]; then
	deadline=$(($(now) + PEER_WAIT))
	until [ -e "$R/A.ready" ]; do
		[ ! -e "$R/A.error" ] || die "host A failed"
		[ "$(now)" -lt "$deadline" ] || die "host A not ready after ${PEER_WAIT}s"
		sleep 0.1
	done
	if [ -n "${NETEM:-}" ]; then
		# shellcheck disable=SC2086  # NETEM is a list of netem arguments
		tc qdisc add dev "$NETDEV" root netem $NETEM || die "tc qdisc add dev $NETDEV root netem $NETEM failed"
		log "netem on $NETDEV: $NETEM"
	fi
fi

# shellcheck source=/dev/null
. "$R/cmd.sh" || die "cannot read $R/cmd.sh"
log "running CMD: ${CMD[*]}"
mark cmd
(with_env "${CMD[@]}") </dev/null >"${OUTPORT:-/dev/null}" 2>"${ERRPORT:-/dev/null}"
rc=$?
log "CMD exited with status $rc"
mark status "$rc"
poweroff_now
