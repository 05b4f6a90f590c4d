set -x
env RDMX_TEST_PROTOCOL=srq build/bin/test_conformance; echo "conformance rc=$?"
build/bin/test_srq; echo "test_srq rc=$?"
build/bin/rdmx pingpong -p srq --iters 10000 --verify; echo "pp srq rc=$?"
build/bin/rdmx pingpong -p send_recv --iters 10000 --verify; echo "pp sr rc=$?"
