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
# what it maps, as it maps it: every id root's namespace has
def ids(f, what):
    r = []
    for l in open(f):
        a, _, c = map(int, l.split())
        r.append(str(a) if c == 1 else "%d-%d" % (a, a + c - 1))
    return what + ("s" if len(r) > 1 or "-" in r[0] else "") + " " + ", ".join(r)
want = "unprivileged, %s and %s mapped to themselves" % (ids("/proc/self/uid_map", "uid"), ids("/proc/self/gid_map", "gid"))
assert r["protections"]["user_namespace"] == want, (r["protections"]["user_namespace"], want)
PY
    [ "$(cat "$WS/new.txt")" = x ]
}

@test "root without CAP_SYS_ADMIN and CAP_SETFCAP: fails closed naming that capability" {
    is_root || skip "applies to root only"
    command -v setpriv >/dev/null || need "setpriv (util-linux) is missing"
    # (docker and podman with --cap-drop ALL: mapping uid 0 needs CAP_SETFCAP)
    run --separate-stderr setpriv --bounding-set -sys_admin,-setfcap --inh-caps -sys_admin,-setfcap -- \
        "$TXBOX" run -C "$WS" -c 'echo x > new.txt'
    assert_txbox_error
    [[ "$stderr" == "txbox: the sandbox lacks 1 setting: root lacks CAP_SETFCAP to map its uid (podman, docker: --cap-add SETFCAP; Kubernetes: capabilities add SETFCAP; or a non-root user)" ]] ||
        fail "$stderr"
    assert_tree pre "$WS" --mtime
}

@test "a masked /proc and no CAP_SETFCAP: both named in one refusal" {
    is_root || skip "applies to root only"
    command -v setpriv >/dev/null || need "setpriv (util-linux) is missing"
    run --separate-stderr unshare -m --propagation private -- sh -c \
        'mount --bind /dev/null /proc/timer_list && exec setpriv --bounding-set -sys_admin,-setfcap --inh-caps -sys_admin,-setfcap -- "$0" run -C "$1" -c "echo x > new.txt"' \
        "$TXBOX" "$WS"
    assert_txbox_error
    [[ "$stderr" == *"the sandbox lacks 2 settings: (1) /proc is masked (podman: --security-opt unmask=/proc/*; docker: --security-opt systempaths=unconfined; Kubernetes: procMount: Unmasked); (2) root lacks CAP_SETFCAP to map its uid (podman, docker: --cap-add SETFCAP; Kubernetes: capabilities add SETFCAP; or a non-root user)"* ]] ||
        fail "$stderr"
    assert_tree pre "$WS" --mtime
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
    [[ "$stderr" == *"the sandbox lacks 1 setting: /proc is masked (podman: --security-opt unmask=/proc/*; docker: --security-opt systempaths=unconfined; Kubernetes: procMount: Unmasked)"* ]] ||
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
    [[ "$stderr" == *"the sandbox lacks 1 setting: seccomp refuses namespaces (podman, docker: --security-opt seccomp=containers/seccomp.json; Kubernetes: seccompProfile Localhost txbox/seccomp.json)"* ]] ||
        fail "$(clip "$output")" "$(clip "$stderr")"
    [ ! -e "$WS/inner/f" ]
}
