# Thin wrapper: `make demo` and `make check` do every set-up step on a fresh
# Debian 12 machine (apt-get when root, npm ci), build, then run.
BUILD      ?= build
RELEASE    ?= build-release
SANITIZE   ?= address,undefined
DEB_PKGS   := meson ninja-build gcc clang pkg-config libjansson-dev libseccomp-dev \
              libsqlite3-dev libyaml-dev libcurl4-openssl-dev zlib1g-dev libcmocka-dev \
              libclang-rt-14-dev nettle-dev diffutils bats bubblewrap attr python3 gnuplot-nox \
              hyperfine passwd util-linux coreutils findutils git iproute2 dosfstools \
              btrfs-progs
MESON_OPTS ?=

.PHONY: all build release deps check unit integration crash fuzz-replay demo bench bench-peers clean

all: build

deps: .deps-stamp
.deps-stamp: Makefile package.json package-lock.json
	@./tools/install-deps $(DEB_PKGS)
	@touch $@

$(BUILD)/build.ninja: | deps
	meson setup $(BUILD) -Db_sanitize=$(SANITIZE) -Db_lundef=false $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

release: deps
	@[ -f $(RELEASE)/build.ninja ] || meson setup $(RELEASE) --buildtype=release -Dtests=false
	ninja -C $(RELEASE)

check: build
	./tests/run-all $(BUILD)

unit: build
	meson test -C $(BUILD) --print-errorlogs

integration: build
	./tests/run-integration $(BUILD)

DEMO_SIZE  ?= 250M
BENCH_SIZES ?= 25M,250M,2.5G

demo: release
	./eval/demo $(RELEASE) --size $(DEMO_SIZE)

bench: release
	./bench/run $(RELEASE) --sizes $(BENCH_SIZES) --reps 10 --copy-reps 5,3,1
	./bench/sweep $(RELEASE)

# The sandboxes bench/run measures beside txbox, where installed: Anthropic's
# sandbox-runtime (srt: node, bwrap, socat, ripgrep) and the Codex CLI (its
# native binary comes in an npm platform package and runs the system bwrap).
# Pinned in bench/peers/package-lock.json; neither package needs its install
# scripts. Not part of deps, so `make check` never fetches them.
BENCH_PEER_DEBS := bubblewrap socat ripgrep

bench-peers:
	@./tools/install-deps $(BENCH_PEER_DEBS)
	@cd bench/peers && want=$$(sha256sum package-lock.json | cut -d' ' -f1) && \
	if [ "$$(cat node_modules/.txbox-lock-sha 2>/dev/null)" != "$$want" ]; then \
		echo "txbox: npm ci --ignore-scripts (bench/peers)" >&2 && \
		npm ci --ignore-scripts --no-audit --no-fund --loglevel=error && \
		echo "$$want" > node_modules/.txbox-lock-sha; \
	fi

clean:
	rm -rf $(BUILD) $(RELEASE) .deps-stamp
