# rdmx: the two set-up commands are `make demo` (main job) and `make check`
# (tests). Both install their own dependencies from Debian's packages.
# The integration tests and the demo run on an RDMA device: the real one if
# the machine has an ACTIVE port, otherwise SoftRoCE in the sandbox VM.

BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
CMAKE_GEN  := -G Ninja
SANDBOX    := sandbox/run
VALGRIND   := RDMX_TEST_QUICK=1 valgrind --fair-sched=yes --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --quiet

.PHONY: soak all deps build asan tsan fuzz check unit-check valgrind-check integration-check twohost-check twohost-live twohost-pcap deb deb-check demo clean

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD)

asan: deps
	@cmake -S . -B $(ASAN_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DRDMX_SANITIZE=address,undefined >/dev/null
	@cmake --build $(ASAN_BUILD)

tsan: deps
	@cmake -S . -B $(TSAN_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug -DRDMX_SANITIZE=thread >/dev/null
	@cmake --build $(TSAN_BUILD)

# libFuzzer harnesses (tests/fuzz), clang with ASan/UBSan: each runs
# FUZZ_SECONDS, then what it found that adds coverage is merged into the
# committed corpus (tests/fuzz/corpus/<harness>; commit it, keep it small).
# make check replays that corpus in the unit tests (the *_replay tests).
fuzz:
	@scripts/install-deps --fuzz
	@CC=clang cmake -S . -B $(FUZZ_BUILD) $(CMAKE_GEN) -DCMAKE_BUILD_TYPE=Debug \
	  -DRDMX_SANITIZE=address,undefined -DRDMX_FUZZ=ON >/dev/null
	@cmake --build $(FUZZ_BUILD)
	tests/fuzz/run-fuzz $(FUZZ_BUILD) $(FUZZ_SECONDS)

# Unit tests run natively: plain, ASan/UBSan, TSan, and under valgrind. The
# TSan and valgrind runs use the suites' quick counts (RDMX_TEST_QUICK: a
# twentieth of the messages): they look for races and memory errors, the
# plain and ASan runs carry the volume.
# The plain and ASan runs and valgrind run two tests at a time (the two
# cores; the unit tests share no ports or files); TSan runs one at a time.
unit-check: build asan tsan
	ctest --test-dir $(BUILD) -L unit -j2 --output-on-failure
	ctest --test-dir $(ASAN_BUILD) -L unit -j2 --output-on-failure
	RDMX_TEST_QUICK=1 ctest --test-dir $(TSAN_BUILD) -L unit --output-on-failure

valgrind-check: build
	@ctest --test-dir $(BUILD) -L unit -N | awk '/Test +#/ {print $$3}' | \
	  xargs -P2 -I{} sh -c '[ -x $(BUILD)/bin/{} ] || exit 0; echo "valgrind: {}"; \
	    $(VALGRIND) $(BUILD)/bin/{} >/dev/null || { echo "valgrind: {} failed"; exit 255; }'

# Integration tests on an RDMA device (the sandbox boots one if needed).
# The conformance suite's in-order stream carries 25,000 messages per
# protocol here (RDMX_TEST_STREAM; its 100,000 run in make soak).
integration-check: build asan
	RDMX_TEST_STREAM=$${RDMX_TEST_STREAM:-25000} \
	$(SANDBOX) -- tests/run-integration $(BUILD) $(ASAN_BUILD)

# Every protocol between two VMs with 1% packet loss on the link: RC must
# hide it. 3,000 messages per protocol here (a lost FETCH_ADD or READ reply
# costs rdma_cm's 0.54 s ACK timeout); set RDMX_TWO_HOST_COUNT=100000 for
# the full run. A protocol not done in
# RDMX_TWO_HOST_STALL seconds fails.
twohost-check: build
	RDMX_TWO_HOST_COUNT=$${RDMX_TWO_HOST_COUNT:-3000} \
	RDMX_TWO_HOST_STALL=$${RDMX_TWO_HOST_STALL:-400} \
	tests/two-host-loss $(BUILD)

# Liveness between two VMs (not in make check: about 4 min for the 1 s bound
# on every protocol, 1 min per protocol for the default 10 s): the link cut
# while busy and while the peer is frozen with SIGSTOP; docs/library.md "Liveness".
# RDMX_LIVE_BOUNDS and RDMX_LIVE_PROTOCOLS narrow it.
twohost-live: build
	tests/two-host-live $(BUILD)

# rdmx bench --pcap between two VMs (about 1 min): tshark finds the RDMA
# WRITE and READ packets of write_simplex and read in B's capture.
twohost-pcap: build
	tests/integration/pcap_rxe.sh $(BUILD)

# Debian packages (debian/: librdmx0, librdmx-dev, rdmx-tools) into
# $(BUILD)/deb from the tracked files; deb-check also checks their contents
# (about 2 min under load here, so in check).
deb:
	@scripts/build-deb $(BUILD)/deb

deb-check: deps
	tests/deb-check $(BUILD)/deb

check: unit-check valgrind-check integration-check twohost-check twohost-pcap deb-check
	@echo "make check: all suites passed"

# Long volume runs, not in make check: the KV torture tests (store, RDMA GET
# by READ on the fake fabric and on rxe in the sandbox: issue 12's 30 s) for
# 30 s each, the RPC suite's 100,000 checksummed calls of 1 B..max
# (RDMX_RPC_CALLS; make check makes a few thousand) over every transport on the
# fake fabric and on rxe, and the integration suite of the ASan build at full
# volume (make check runs it with the quick counts; about 20 min here).
soak: build asan
	RDMX_KV_TORTURE_SECONDS=$${RDMX_KV_TORTURE_SECONDS:-30} $(BUILD)/bin/test_kv_store
	RDMX_KV_RDMA_SECONDS=$${RDMX_KV_RDMA_SECONDS:-30} $(BUILD)/bin/test_kv_rdma
	$(SANDBOX) -- sh -c 'ulimit -l unlimited 2>/dev/null; cd $(CURDIR) && \
	  RDMX_KV_RDMA_SECONDS=$${RDMX_KV_RDMA_SECONDS:-30} $(BUILD)/bin/test_kv_rdma_rxe'
	for e in RPC_TRANSPORT=msg RPC_PROTOCOL=write_duplex RPC_TRANSPORT=rfp RPC_TRANSPORT=herd; do \
	  env RDMX_RPC_CALLS=$${RDMX_RPC_CALLS:-100000} $$e $(BUILD)/bin/test_rpc || exit 1; done
	RDMX_RPC_CALLS=$${RDMX_RPC_CALLS:-100000} $(SANDBOX) -- tests/run-integration $(ASAN_BUILD)

# rdmx bench -c all in the sandbox; report, charts and data in results/<UTC>/.
demo: build
	BUILD=$(BUILD) bench/demo

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
