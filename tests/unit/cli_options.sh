#!/usr/bin/env bash
# The CLI's options, from the tables themselves (rdmx help --markdown):
#  - docs/options.md is what the build's rdmx writes (one source);
#  - perftest's letters mean perftest's meaning, each long name one letter,
#    in every command;
#  - every command given an empty and a 100 KB value, unknown options and
#    stray arguments; every option (once: a shared row parses the same in
#    each command) an empty value, a word or an overflowing number where a
#    number goes, a word outside its choices, 100 KB where a string goes;
#    the conflicting combinations and unwritable outputs below: exit status
#    2 and a message naming the option, never a signal, never a hang;
#  - RDMX_FABRIC=fake selects the fake fabric; a server on it is refused;
#  - a subcommand's --help prints its own page.
# Usage: cli_options.sh RDMX SOURCE_DIR
set -euo pipefail
rdmx=$1 src=$2
unset RDMX_FABRIC
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$rdmx" help --markdown >"$dir/options.md"
diff -u "$src/docs/options.md" "$dir/options.md" >"$dir/diff" ||
	{ cat "$dir/diff"; fail "docs/options.md differs from 'rdmx help --markdown' (regenerate it)"; }

# The option rows: command, letter, long name, metavar.
awk -F' [|] ' '/^[|] rdmx/ { sub(/^[|] rdmx ?/, "", $1); o = $3; m = "";
	if (o ~ /=/) { m = o; sub(/.*=/, "", m); sub(/=.*/, "", o) }
	print $1 ";" $2 ";" o ";" m }' "$dir/options.md" >"$dir/rows"
[ "$(wc -l <"$dir/rows")" -gt 150 ] || fail "too few option rows: $(wc -l <"$dir/rows")"

# perftest's letters (perftest_parameters.c) and the long name each has here.
declare -A perftest=([p]=--port [d]=--device [i]=--ib-port [x]=--gid-index [s]=--size [n]=--iters
	[D]=--duration [a]=--all-sizes [q]=--conns [l]=--batch [Q]=--signal-every
	[t]=--tx-depth [c]=--protocol)
declare -A letter_of
while IFS=';' read -r cmd letter long meta; do
	if [ -n "$letter" ]; then
		l=${letter#-}
		[ "${perftest[$l]:-}" = "$long" ] ||
			fail "$cmd: $letter is $long, perftest's $letter is ${perftest[$l]:-not ours}"
	fi
	if [ -n "${letter_of[$long]+x}" ] && [ "${letter_of[$long]}" != "$letter" ] &&
	   [ -n "$letter" ] && [ -n "${letter_of[$long]}" ]; then
		fail "$long is ${letter_of[$long]} in one command and $letter in $cmd"
	fi
	[ -n "$letter" ] && letter_of[$long]=$letter
done <"$dir/rows"
# and the letters of the brief are where their meaning is
for want in "pingpong -p --port" "rpc -d --device" "kv serve -d --device" "doctor -d --device" \
	"bench -x --gid-index" "pingpong -i --ib-port" "doctor -i --ib-port" \
	"bench -q --conns" "rpc bench -q --conns" "kv bench -q --conns" \
	"bench -t --tx-depth" "rpc call -t --tx-depth" "bench -l --batch" "bench -Q --signal-every" \
	"rpc call -n --iters" "kv bench -n --iters" "bench -D --duration" "bench -a --all-sizes"; do
	set -- $want
	cmd=${*:1:$#-2}; letter=${*: -2:1}; long=${*: -1}
	grep -q -- "^$cmd;$letter;$long;" "$dir/rows" || fail "rdmx $cmd has no $letter $long"
done

big=$(head -c 100000 /dev/zero | tr '\0' 'a')
runs=0
expect2() { # expect exit status 2 and NAME in the message: NAME CMD ARGS...
	local name=$1 rc; shift
	set +e; timeout 20 "$rdmx" "$@" >/dev/null 2>"$dir/err" </dev/null; rc=$?; set -e
	runs=$((runs + 1))
	[ "$rc" -lt 128 ] || fail "rdmx ${*:1:6}: exit $rc (a signal or a hang)"
	[ "$rc" -eq 2 ] || { head -c 600 "$dir/err"; fail "rdmx ${*:1:6}: exit $rc, expected 2"; }
	grep -qF -- "$name" "$dir/err" ||
		{ head -c 600 "$dir/err"; fail "rdmx ${*:1:6}: the message does not name $name"; }
}

# Every option of every command: hostile values (RDMX_TEST_QUICK, under
# TSan and valgrind: the first command's only).
quick=${RDMX_TEST_QUICK:-}
declare -A valued
while IFS=';' read -r cmd letter long meta; do
	read -ra words <<<"$cmd"
	[ "${#words[@]}" -gt 0 ] || continue # rdmx --version: below
	[ -z "$quick" ] || [ "$cmd" = pingpong ] || continue
	# each command's first row: an empty value and a 100 KB one
	if [ "$cmd" != "${last_cmd:-}" ]; then
		last_cmd=$cmd
		expect2 "$long" "${words[@]}" "$long=" # a flag: any value
		expect2 "$long" "${words[@]}" "$long=$big"
	fi
	# every option once (a row shared by several commands parses the same
	# in each): empty, 100 KB where a string goes, a word and an overflowing
	# number where a number goes, a word not among the choices
	[ -z "${valued[$long$meta]:-}" ] || continue
	valued[$long$meta]=1
	if [ -z "$meta" ]; then
		expect2 "$long" "${words[@]}" "$long=x"
		continue
	fi
	expect2 "$long" "${words[@]}" "$long" ""
	case $meta in
	N | PORT | MS | BYTES | PCT | K)
		expect2 "$long" "${words[@]}" "$long" "x-1"
		expect2 "$long" "${words[@]}" "$long" "99999999999999999999"
		;;
	SEC | NAME | MODE | HOW | WHEN | WHICH | UNIT | PATH | POLICY)
		expect2 "$long" "${words[@]}" "$long" "x-1"
		;;
	*)
		expect2 "$long" "${words[@]}" "$long=$big"
		;;
	esac
done <"$dir/rows"

# Unknown options and arguments, in every command.
for cmd in devices pingpong bench doctor kv "kv serve" "kv get" "kv put" "kv del" "kv bench" \
	rpc "rpc serve" "rpc call" "rpc bench"; do
	read -ra words <<<"$cmd"
	expect2 "--bogus" "${words[@]}" --bogus
	expect2 "--${big:0:40}" "${words[@]}" "--$big"
done
expect2 "-Z" pingpong -Z
expect2 "--help" kv get --help=nroff
expect2 "unexpected argument" devices extra
expect2 "too many arguments" pingpong a b
expect2 "--version" --version extra
expect2 "--help" --help extra
expect2 "nosuch" help rpc nosuch
expect2 "nosuch" help bench nosuch
expect2 "nosuch" help --man kv nosuch
expect2 "nosuch" help nosuch
expect2 "nosuch" nosuch
expect2 "--markdown" help --markdown extra
expect2 "nosuch" kv nosuch
expect2 "nosuch" rpc nosuch

# Conflicting options.
expect2 "--duration" bench --iters 5 --duration 1
expect2 "--size" bench -a --size 64
expect2 "--notify" bench -c send_recv --notify imm
expect2 "--notify" bench --fabric fake --notify imm
expect2 "--ack" pingpong --ack read
expect2 "--notify" rpc bench --notify imm # rpc bench has no --notify
expect2 "only one can go to stdout" bench --fabric fake --json - --csv -
expect2 "--baseline" bench --fabric fake --max-regress 5
expect2 "--fabric" bench --fabric fake --server
expect2 "--fabric" pingpong --fabric fake --server
expect2 "--device" pingpong --device mlx5_0 10.0.0.1
expect2 "--max-size" rpc --size 8K --max-size 4K
expect2 "--workers" rpc call 10.0.0.1 --workers 2
expect2 "--device" rpc call 10.0.0.1 --device mlx5_0
expect2 "--capacity" kv get 10.0.0.1 k --capacity 5
expect2 "--get-path" kv serve --get-path read
expect2 "--inline-max" kv serve --inline-max 12
expect2 "--item-max" kv serve --item-max 8 --inline-max 16
expect2 "--port" kv get 10.0.0.1 k --port -1
expect2 "--memcached" kv bench --memcached-spawn --memcached 11211
expect2 "--duration" rpc bench --iters 5 --duration 1
expect2 "--port" doctor --port 0 10.0.0.1
expect2 "cannot write in $dir/nodir" bench --fabric fake --json "$dir/nodir/x.json"
expect2 "cannot write in $dir/nodir" bench --fabric verbs --pcap "$dir/nodir/x.pcap"
expect2 "cannot write in $dir/nodir" rpc bench --fabric fake --csv "$dir/nodir/x.csv"
expect2 "cannot write in $dir/nodir" kv bench --fabric fake --json "$dir/nodir/x.json"

# The fake fabric: RDMX_FABRIC selects it, a server on it is refused.
expect2 "--fabric fake" rpc serve --fabric fake
expect2 "--fabric fake" kv serve --fabric fake
RDMX_FABRIC=fake expect2 "RDMX_FABRIC=fake" rpc serve
RDMX_FABRIC=fake expect2 "RDMX_FABRIC=fake" kv serve --memcached-port 0
RDMX_FABRIC=fake expect2 "RDMX_FABRIC=fake" pingpong --server
RDMX_FABRIC=fake expect2 "RDMX_FABRIC=fake" bench --server
RDMX_FABRIC=fake expect2 "RDMX_FABRIC=fake" rpc bench --server
RDMX_FABRIC=fake expect2 "RDMX_FABRIC=fake" kv bench 10.0.0.1
RDMX_FABRIC=nonsense expect2 "RDMX_FABRIC" pingpong
RDMX_FABRIC=fake timeout 60 "$rdmx" pingpong --iters 20 --warmup 2 >"$dir/out" 2>&1 ||
	{ cat "$dir/out"; fail "RDMX_FABRIC=fake rdmx pingpong"; }
RDMX_FABRIC=fake timeout 60 "$rdmx" rpc --iters 20 >"$dir/out" 2>&1 ||
	{ cat "$dir/out"; fail "RDMX_FABRIC=fake rdmx rpc"; }
grep -q "20 calls" "$dir/out" || { cat "$dir/out"; fail "RDMX_FABRIC=fake rdmx rpc: no calls"; }
# an old spelling still works, with a note naming the one to use
RDMX_FABRIC=fake timeout 60 "$rdmx" rpc --count 20 --window 2 >"$dir/out" 2>&1 ||
	{ cat "$dir/out"; fail "rdmx rpc --count 20 --window 2"; }
grep -q "note: --count is another spelling of --iters" "$dir/out" &&
	grep -q "note: --window is another spelling of --tx-depth" "$dir/out" &&
	grep -q "20 calls of 64 bytes checked, window 2" "$dir/out" ||
	{ cat "$dir/out"; fail "rdmx rpc --count --window: no note or not honoured"; }
RDMX_FABRIC=fake "$rdmx" pingpong --help >"$dir/page"
grep -q "default: fake" "$dir/page" ||
	fail "RDMX_FABRIC=fake: --help does not show the fake fabric as the default"

# Each subcommand's --help is its own page.
for sub in "kv serve" "kv get" "kv put" "kv del" "kv bench" "rpc serve" "rpc call" "rpc bench"; do
	read -ra words <<<"$sub"
	page="rdmx-${words[0]}-${words[1]} "
	"$rdmx" "${words[@]}" --help >"$dir/page"
	sed -n 2p "$dir/page" | grep -qF "$page" || fail "rdmx $sub --help does not print $page"
	"$rdmx" help "${words[@]}" >"$dir/page"
	sed -n 2p "$dir/page" | grep -qF "$page" || fail "rdmx help $sub does not print $page"
done
"$rdmx" kv get --help >"$dir/page"
grep -q -- "--capacity" "$dir/page" && fail "kv get --help lists serve's --capacity"
echo "cli_options: $(wc -l <"$dir/rows") option rows, $runs refused command lines, all exit 2"
