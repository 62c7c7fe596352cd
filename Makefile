# Thin wrapper: `make demo` and `make check` do every set-up step on a fresh
# Debian 12 machine (apt-get when root, npm ci), build, then run.
BUILD      ?= build
RELEASE    ?= build-release
# release-optimised but with the test hooks (TXBOX_TEST_RESOLVE): bench/net's
# fake registry on 127.0.0.1 is reached through the proxy by a registry's name
NETBENCH   ?= build-netbench
SANITIZE   ?= address,undefined
DEB_PKGS   := meson ninja-build gcc clang pkg-config libjansson-dev libseccomp-dev \
              libsqlite3-dev libyaml-dev libcurl4-openssl-dev libmicrohttpd-dev zlib1g-dev libcmocka-dev \
              libclang-rt-14-dev nettle-dev diffutils bats bubblewrap attr python3 gnuplot-nox help2man \
              hyperfine passwd util-linux coreutils findutils git iproute2 dosfstools \
               btrfs-progs xfsprogs e2fsprogs clang-format-14 libgit2-dev libfuse3-dev fuse3
MESON_OPTS ?=

.PHONY: all build release deps check unit integration crash fuzz-replay demo bench bench-peers clean \
        install uninstall deb check-clients check-big format container check-containers

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

# The crash matrices at issue 26's sizes: the change set also writes
# 10,000 files and a 64 MiB file. As root every kill point and the EIO and
# ENOSPC matrices of both backends (about 13 minutes here), then the
# unprivileged user on the overlay backend. Then the power-loss replay as
# root with the writes a disk may reorder between flushes (make check runs
# its in-order prefixes only), its in-order prefixes as the unprivileged
# user, and its self-test (a skipped fsync must be caught). Not in make
# check (its 20 minutes); .ci/run runs it.
check-big: build
	./tests/crash/run $(BUILD) --big --only root
	./tests/crash/run $(BUILD) --big --only user --backends overlay
	./tests/crash/powerloss $(BUILD) --only root
	./tests/crash/powerloss $(BUILD) --only user --prefixes-only
	./tests/crash/powerloss $(BUILD) --selftest

unit: build
	meson test -C $(BUILD) --print-errorlogs

integration: build
	./tests/run-integration $(BUILD)

# make install [PREFIX=/usr/local] [DESTDIR=]: the release build through
# meson install: bin/txbox, the man pages, the bash completion, the docs.
# make uninstall removes exactly what meson lists as installed.
PREFIX        ?= /usr/local
INSTALL_BUILD ?= $(RELEASE)

install: $(if $(filter $(RELEASE),$(INSTALL_BUILD)),release)
	@[ "$$(meson introspect $(INSTALL_BUILD) --buildoptions | python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"][0])')" = "$(PREFIX)" ] || \
		meson configure $(INSTALL_BUILD) -Dprefix=$(PREFIX)
	meson install -C $(INSTALL_BUILD) --destdir "$(DESTDIR)"

uninstall:
	@[ -f $(INSTALL_BUILD)/build.ninja ] || { echo "make uninstall: no $(INSTALL_BUILD)/ (the build make install used)" >&2; exit 1; }
	@meson introspect $(INSTALL_BUILD) --installed | python3 -c 'import json,sys,os; [print(p) for p in json.load(sys.stdin).values()]' | \
	while read -r f; do \
		[ -e "$(DESTDIR)$$f" ] || [ -L "$(DESTDIR)$$f" ] || continue; \
		echo "rm $(DESTDIR)$$f"; rm -f "$(DESTDIR)$$f"; \
		case "$$f" in */doc/txbox/*) rmdir "$$(dirname "$(DESTDIR)$$f")" 2>/dev/null || true ;; esac; \
		case "$$f" in */doc/txbox/docs/*) rmdir "$(DESTDIR)$${f%/docs/*}" 2>/dev/null || true ;; esac; \
	done

# make deb: the Debian package (debian/), built offline from this tree with
# dpkg-buildpackage, then checked with lintian; the .deb lands in ../ and is
# copied to build-deb/.
DEB_TOOLS := debhelper dpkg-dev fakeroot lintian help2man
deb:
	@./tools/install-deps $(DEB_PKGS) $(DEB_TOOLS)
	./tools/make-deb

# make check-clients: the real agent CLIs (npm, pinned in tests/clients/)
# driven against txbox with fake model servers on 127.0.0.1. Downloads, so
# never part of make check; .ci/run runs it when the npm registry answers.
check-clients: build
	./tests/clients/run $(BUILD)

# make container: the txbox image (localhost/txbox:latest), offline: a
# Debian 12 base by mmdebstrap from the Debian mirror, `podman import`, then
# containers/Containerfile over `make install` (containers/build).
# make check-containers: tests/containers/run, txbox in podman and docker
# (rootful, rootless) and with a pod's settings, against tests/containers/matrix;
# tests/containers/kube, deploy/k8s's manifests under podman kube play;
# then deploy/k8s/validate (npm: the Kubernetes schemas, pinned). Not part
# of make check (a few minutes, and the image); .ci/run runs it.
CONTAINER_PKGS := podman runc uidmap slirp4netns fuse-overlayfs mmdebstrap docker.io rootlesskit catatonit
container:
	@./tools/install-deps $(DEB_PKGS) $(CONTAINER_PKGS)
	./containers/build

check-containers: container
	./tests/containers/run
	./tests/containers/kube
	./deploy/k8s/validate

DEMO_SIZE  ?= 250M
BENCH_SIZES ?= 25M,250M,2.5G

demo: release
	./eval/demo $(RELEASE) --size $(DEMO_SIZE)

bench: release
	./bench/run $(RELEASE) --sizes $(BENCH_SIZES) --reps 10 --copy-reps 5,3,1
	./bench/sweep $(RELEASE)
	./bench/targets $(RELEASE) $(if $(BENCH_BASELINE),--baseline $(BENCH_BASELINE))
	./bench/session $(RELEASE) $(if $(BENCH_BASELINE),--baseline $(BENCH_BASELINE)) --out bench/results/session-bench.md
	@[ -f $(NETBENCH)/build.ninja ] || meson setup $(NETBENCH) --buildtype=release -Dtests=true
	ninja -C $(NETBENCH) txbox
	./bench/net $(NETBENCH)

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

# The C sources in the tree's style (.clang-format); make check's meson test
# `format` fails on a file that differs.
format:
	./tools/format

clean:
	rm -rf $(BUILD) $(RELEASE) .deps-stamp
