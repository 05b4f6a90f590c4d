#!/bin/sh
# examples/hello.c (the README's code) on the RDMA device: fabric verbs, at
# RDMX_TEST_ADDR, the sandbox's address, or the one rdmx picks.
# Usage: hello.sh EXAMPLE_HELLO RDMX_CLI
set -eu
addr=${RDMX_TEST_ADDR:-${RDMX_SANDBOX_ADDR:-}}
[ -n "$addr" ] || addr=$("$2" devices --json | jq -r '.picked.address')
exec "$1" verbs "$addr"
