#!/usr/bin/env bats
# What a container changes for txbox, reproduced outside one (the real
# containers are tests/containers/run, make check-containers): root without
# CAP_SYS_ADMIN (the runtimes' default for a container's root) works through
# a user namespace; a /proc with parts masked and a seccomp filter that
# refuses namespaces fail closed with an error naming the option to add.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    new_ws
    snap pre "$WS" --mtime
}

# no_sys_admin CMD...: CMD as root without CAP_SYS_ADMIN, as in a container
no_sys_admin() {
    setpriv --bounding-set -sys_admin --inh-caps -sys_admin -- "$@"
}

@test "root without CAP_SYS_ADMIN: commits through a user namespace of its own" {
    is_root || skip "applies to root only"
    command -v setpriv >/dev/null || need "setpriv (util-linux) is missing"
    run --separate-stderr no_sys_admin "$TXBOX" run --json -C "$WS" -c 'echo x > new.txt; grep CapEff /proc/self/status'
    [ "$status" = 0 ] || fail "status $status" "$(clip "$stderr")" "$(clip "$output")"
    python3 - "$output" <<'PY' || fail "$(clip "$output")"
import json, sys
r = json.loads(sys.argv[1])
assert r["outcome"] == "committed", r["outcome"]
assert r["protections"]["user_namespace"].startswith("unprivileged"), r["protections"]["user_namespace"]
PY
    [ "$(cat "$WS/new.txt")" = x ]
}

@test "root without CAP_SYS_ADMIN: changes files of other uids in the workspace, owners kept" {
    is_root || skip "applies to root only"
    command -v setpriv >/dev/null || need "setpriv (util-linux) is missing"
    # a checkout owned by the host's user, bound into a root container
    mkdir "$WS/theirs"
    echo old >"$WS/theirs/f.txt"
    chown -R 4321:4321 "$WS/theirs"
    run --separate-stderr no_sys_admin "$TXBOX" run -C "$WS" -c 'echo new > theirs/f.txt; echo x > theirs/g.txt; chmod 0600 theirs/f.txt'
    [ "$status" = 0 ] || fail "status $status" "$(clip "$stderr")"
    [ "$(cat "$WS/theirs/f.txt")" = new ]
    [ "$(stat -c '%u:%g %a' "$WS/theirs/f.txt")" = "4321:4321 600" ] || fail "$(stat -c '%u:%g %a' "$WS/theirs/f.txt")"
    [ "$(stat -c '%u:%g' "$WS/theirs/g.txt")" = "0:0" ] || fail "$(stat -c '%u:%g' "$WS/theirs/g.txt")"
}

@test "root without CAP_SYS_ADMIN, a masked /proc: fails closed naming the runtimes' unmask options" {
    is_root || skip "applies to root only"
    command -v setpriv >/dev/null || need "setpriv (util-linux) is missing"
    # a runtime's mask: /dev/null bound over a /proc file
    run --separate-stderr unshare -m --propagation private -- sh -c \
        'mount --bind /dev/null /proc/timer_list && exec setpriv --bounding-set -sys_admin --inh-caps -sys_admin -- "$0" run -C "$1" -c "echo x > new.txt"' \
        "$TXBOX" "$WS"
    assert_txbox_error
    [[ "$stderr" == *"cannot mount /proc (the container runtime masks parts of /proc: podman --security-opt unmask=/proc/*, docker --security-opt systempaths=unconfined, Kubernetes procMount: Unmasked)"* ]] ||
        fail "$stderr"
    assert_tree pre "$WS" --mtime
}

@test "under a seccomp filter that refuses namespaces: fails closed naming containers/seccomp.json" {
    is_root && skip "applies to the unprivileged user (root inside txbox meets its cgroup check first)"
    # txbox's own sandbox refuses new user namespaces, as a container
    # runtime's default profile does: a txbox inside it meets that filter
    cp "$TXBOX" "$WS/inner-txbox"
    mkdir "$WS/inner"
    # (--memory and no leak check: for an ASan build; --backend copy: the
    # inner workspace is on the outer's overlay)
    tx --memory 64T -c 'ASAN_OPTIONS=detect_leaks=0 ./inner-txbox run --backend copy -C inner -c "echo x > f"; exit 0'
    [ "$status" = 0 ] || fail "status $status" "$(clip "$stderr")"
    [[ "$stderr" == *"cannot create the sandbox namespaces (a seccomp filter refuses them, as container runtimes' default profiles do: run the container with txbox's containers/seccomp.json): Operation not permitted"* ]] ||
        fail "$(clip "$output")" "$(clip "$stderr")"
    [ ! -e "$WS/inner/f" ]
}
