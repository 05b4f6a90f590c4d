#!/bin/sh
# Install the build tree into a fresh prefix and build the installed example
# out of tree both ways a user would: pkg-config, and CMake's
# find_package(rdmx). Each program and the installed CLI must load the
# installed librdmx (not the build tree's) and start; the installed CLI
# without LD_LIBRARY_PATH; the man3 pages are installed.
# Usage: consumer.sh BUILD_DIR
set -eu
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rdmx-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pfx=$tmp/prefix
cmake --install "$build" --prefix "$pfx" >/dev/null
hello=$(find "$pfx/share/doc" -name hello.c)
[ -n "$hello" ] || { echo "consumer: the example is not installed" >&2; exit 1; }
libdir=$(dirname "$(find "$pfx" -name 'librdmx.so' | head -n 1)")

# 1. pkg-config, with no variable redefined: the .pc finds its own prefix.
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -Wall -Werror -o "$tmp/hello_pc" "$hello" $(pkg-config --cflags --libs rdmx) -pthread
pkg-config --cflags rdmx | grep -q -- "-I$pfx/" ||
	{ echo "consumer: rdmx.pc points outside the prefix: $(pkg-config --cflags rdmx)" >&2; exit 1; }

# 2. CMake package.
cmake -S "$here" -B "$tmp/cm" -DCMAKE_PREFIX_PATH="$pfx" -DHELLO_SRC="$hello" >/dev/null
cmake --build "$tmp/cm" >/dev/null

loads() { # PROG [LD_LIBRARY_PATH]: fail unless PROG loads the installed librdmx
	lib=$(LD_LIBRARY_PATH="${2:-}" ldd "$1" | awk '/librdmx/ {print $3}')
	case "$lib" in
	"$pfx"/*) ;;
	*) echo "consumer: $1 loads librdmx from '$lib', not the install" >&2; exit 1 ;;
	esac
}
loads "$tmp/hello_pc" "$libdir"
loads "$tmp/cm/hello_cmake" "$libdir"
loads "$pfx/bin/rdmx" # by its own run path, no LD_LIBRARY_PATH
# The installed tool runs as installed: no LD_LIBRARY_PATH, whatever the
# caller's environment holds ($ORIGIN/../LIBDIR, tools/CMakeLists.txt).
env -u LD_LIBRARY_PATH "$pfx/bin/rdmx" --version | grep -q '^rdmx ' ||
	{ echo "consumer: the installed rdmx does not run without LD_LIBRARY_PATH" >&2; exit 1; }
# A section-3 page per public function, from the headers' doc comments.
for f in rdmx_dial rdmx_send rdmx_rpc_call rdmx_kv_get; do
	[ -s "$pfx/share/man/man3/$f.3" ] || { echo "consumer: no installed man page $f(3)" >&2; exit 1; }
done
echo "consumer: pkg-config and find_package(rdmx) builds link the installed librdmx"
