#!/usr/bin/env bats
# Escape attempts, the system: device nodes, mounts, new user namespaces,
# other namespaces, ptrace and other processes' memory, signals to host
# processes, setuid programs, /proc/sys and /sys, cgroups, the host's /dev,
# and the kernel's own interfaces (modules, kexec, bpf, keyrings, clocks...).
#
# As in escape_fs.bats: every attempt ends with `exit 3`, no call in it may
# succeed, the host and the workspace must be unchanged.

bats_require_minimum_version 1.5.0
load ../lib/common
load ../lib/escape_helpers

@test "device nodes: mknod of character and block devices in the workspace, /tmp, /dev and /dev/shm" {
    attempt <<'EOF'
"$PROBE" mknod "$ESC_WS" "$ESC_WS/src" /tmp /dev /dev/shm
try coreutils-mknod-c mknod "x-$ESC_MARK-c" c 1 1
try coreutils-mknod-b mknod "x-$ESC_MARK-b" b 7 0
try python-mknod python3 -c 'import os; os.mknod("py-dev", 0o20666, os.makedev(1, 1))'
exit 3
EOF
    esc_check
    esc_done
}

@test "device nodes made inside never reach the workspace, even when the command succeeds" {
    attempt <<'EOF'
"$PROBE" mknod "$ESC_WS"
mknod "x-$ESC_MARK-c" c 1 1 2>/dev/null
echo made >committed.txt
exit 0
EOF
    # the command succeeded: the commit takes its changes, but no device node
    grep -q '^TXBOX-ATTEMPT-RAN$' <<<"$ATT_OUT" && [ "$status" = 0 ] ||
        ESC_ERRS+=("the attempt did not run to its end (status $status): $(clip "$ATT_ERR")")
    local devs
    devs="$(find "$WS" -path "$WS/.txbox" -prune -o \( -type c -o -type b \) -print)"
    [ -z "$devs" ] || ESC_ERRS+=("ESCAPE: device nodes in the workspace after the commit: $devs")
    esc_oks >/dev/null && ESC_ERRS+=("ESCAPE: device nodes could be made inside: $(esc_oks)")
    local msg
    msg="$(esc_host_diff)" || ESC_ERRS+=("ESCAPE: the host changed: $msg")
    esc_done
}

@test "device nodes already in the workspace (made on the host) give no access to the device" {
    root_only "only root can make device nodes on the host"
    local rootdev
    rootdev="$(stat -c '%d' /)"
    mknod "$WS/mem" c 1 1 && mknod "$WS/disk" b "$((rootdev >> 8))" "$((rootdev & 255))" ||
        fail "cannot make device nodes on the host"
    esc_snap pre
    attempt <<'EOF'
"$PROBE" devread mem disk
try dd-disk dd if=disk of=/dev/null bs=512 count=1
exit 3
EOF
    esc_check
    esc_done
}

@test "mounting: every mount system call fails (tmpfs, bind, rbind, remount rw, proc, cgroup, new mount API, pivot_root, chroot)" {
    attempt <<'EOF'
"$PROBE" mount "$ESC_WS" "$ESC_OUT"
try mount-binary-tmpfs mount -t tmpfs none /mnt
try mount-binary-remount-rw mount -o remount,rw /
try mount-binary-remount-ws-suid mount -o remount,suid "$ESC_WS"
try write-etc-after-remount sh -c 'echo pwned >"/etc/$ESC_MARK"'
exit 3
EOF
    esc_check
    esc_done
}

@test "unmounting what hides things: the state directory, the secrets, the workspace view, /proc, /dev" {
    attempt <<'EOF'
try umount-txbox umount -l "$ESC_WS/.txbox"
try list-txbox sh -c 'ls -A "$ESC_WS/.txbox" | grep -q .'
try umount-ssh umount -l "$ESC_HOME/.ssh"
try read-ssh sh -c 'grep -q TXBOX-SECRET "$ESC_HOME/.ssh/secret"'
try umount-netrc umount -l "$ESC_HOME/.netrc"
try read-netrc sh -c 'grep -q TXBOX-SECRET "$ESC_HOME/.netrc"'
try umount-ws umount -l "$ESC_WS"
try umount-proc umount -l /proc
try umount-dev-null umount /dev/null
try umount-tmp umount -l /tmp
# if the view could be unmounted, this would write the real workspace (the
# check after the rollback would see it)
umount -l "$ESC_WS" 2>/dev/null
echo pwned >>"$ESC_WS/README" 2>/dev/null
exit 3
EOF
    esc_check
    esc_done
}

@test "new user namespaces to regain capabilities: unshare, clone, clone3, and a mount inside them" {
    attempt <<'EOF'
"$PROBE" userns
try unshare-U unshare -U true
try unshare-Ur unshare -Ur true
try unshare-m unshare -m true
try unshare-Urm-mount unshare -Urm mount -t tmpfs none /tmp
try unshare-Urm-remount unshare -Urm mount -o remount,rw /
try unshare-Urm-write unshare -Urm sh -c 'mount --bind "$ESC_OUT" /mnt && echo pwned >>/mnt/a.txt'
exit 3
EOF
    esc_check
    esc_done
}

@test "entering other namespaces: setns and nsenter into the sandbox init's, which hold more privilege" {
    attempt <<'EOF'
try nsenter-all nsenter -t 1 -a true
try nsenter-mnt nsenter -t 1 -m sh -c 'echo pwned >>"$ESC_OUT/a.txt"'
try nsenter-user-mnt nsenter -t 1 -U -m true
try read-init-ns-link readlink /proc/1/ns/mnt
try open-init-ns-file sh -c 'exec 7</proc/1/ns/user'
exit 3
EOF
    esc_check
    esc_done
}

@test "lifting its own confinement: no_new_privs, seccomp and Landlock hold in every descendant, after exec and in new namespaces" {
    attempt <<'EOF'
check() {
    nnp="$(awk '/^NoNewPrivs:/{print $2}' /proc/self/status)"
    sc="$(awk '/^Seccomp:/{print $2}' /proc/self/status)"
    [ "$nnp" = 1 ] || echo "OK $1-no_new_privs-cleared"
    [ "$sc" = 2 ] || echo "OK $1-seccomp-gone ($sc)"
    if echo pwned 2>/dev/null >"$ESC_OUT/$ESC_MARK-$1"; then echo "OK $1-wrote-outside"; fi
}
check self
( check subshell )
python3 -c 'import ctypes; l = ctypes.CDLL(None); print("INFO prctl(PR_SET_NO_NEW_PRIVS, 0):", l.prctl(38, 0, 0, 0, 0)); print("INFO prctl(PR_SET_SECCOMP, 0):", l.prctl(22, 0, 0, 0, 0))'
unshare -n sh -c 'awk "/^(NoNewPrivs|Seccomp):/" /proc/self/status' | sed 's/^/INFO in a new net namespace: /'
for d in $(unshare -n sh -c 'awk "/^NoNewPrivs:/{print \$2}" /proc/self/status'); do [ "$d" = 1 ] || echo "OK netns-no_new_privs-cleared"; done
env -i /bin/sh -c 'awk "/^Seccomp:/{print \$2}" /proc/self/status' | grep -qx 2 || echo "OK exec-env-i-seccomp-gone"
exit 3
EOF
    esc_check
    esc_done
}

@test "ptrace, process_vm_readv/writev, /proc/<pid>/mem and pidfd_getfd on the sandbox's init, the host sentinel's pid and a child (control)" {
    attempt <<'EOF'
"$PROBE" ptrace 1 "$SENT_PID"
"$PROBE" ptrace-child
try strace-attach-init strace -p 1 -o /dev/null -e trace=none
try gdb-style-mem-read sh -c 'head -c 16 /proc/1/mem >/dev/null'
try read-init-environ sh -c 'cat /proc/1/environ | grep -q .'
try read-init-maps sh -c 'grep -q . /proc/1/maps'
exit 3
EOF
    esc_check
    esc_done
    # the control: the same user may trace a child of its own where nothing forbids it
    attempt_out_ok="$(ESC_MARK="$ESC_MARK" "$ESC_TOOLS/probe" ptrace-child)"
    grep -q '^OK ptrace-attach-own-child$' <<<"$attempt_out_ok" ||
        fail "control: ptrace of an own child fails even without txbox, so its FAIL proves nothing: $attempt_out_ok"
}

@test "signals to host processes: by pid, by process group, to -1, sigqueue and tgkill (control)" {
    attempt <<'EOF'
"$PROBE" signals "$SENT_PID" "$SENT_PGID"
try kill-binary-pid kill -s WINCH "$SENT_PID"
try kill-binary-group kill -s WINCH -- "-$SENT_PGID"
exit 3
EOF
    # kill -1 inside reaches the command's own processes: harmless, ignored signals
    ATT_OUT="$(grep -v '^OK kill-minus-1' <<<"$ATT_OUT")"
    esc_check
    esc_done_controlled "signals by pid"
}

@test "signals to the caller's process group: kill(0, ...) reaches no host process (control)" {
    # The sentinel is in this test's process group, as is txbox itself:
    # kill(0) inside must not reach them. The signal is one every process
    # here ignores (SIGWINCH), so a success harms nothing but is seen.
    attempt <<'EOF'
try kill-zero sh -c 'kill -s WINCH 0'
try kill-zero-probe-style sh -c 'kill -s URG 0'
exit 3
EOF
    # kill(0) succeeding on the sandbox's own group would be harmless: the
    # host check (did the sentinel get a signal?) decides
    ATT_OUT="$(grep -v '^OK kill-zero' <<<"$ATT_OUT")"
    esc_check
    esc_done_controlled "kill(0)"
}

@test "setuid programs run inside gain no privilege" {
    local suid=""
    if is_root; then
        # a setuid program of another user: without no_new_privs it would run as 1234
        suid="$ESC_BASE/tools/probe-suid-$BATS_TEST_NUMBER"
        cp "$ESC_TOOLS/probe" "$suid"
        chown 1234:1234 "$suid"
        chmod 4755 "$suid"
    fi
    export ESC_SUID="$suid"
    attempt <<'EOF'
me="$(id -u)"
if [ -n "$ESC_SUID" ]; then
    e="$("$ESC_SUID" euid)"
    echo "$e"
    case "$e" in *"euid=$me "*) ;; *) echo "OK setuid-probe-changed-euid" ;; esac
fi
for p in /usr/bin/passwd /usr/bin/su /usr/bin/chsh /usr/bin/newgrp; do
    [ -u "$p" ] || continue
    (sleep 2 | "$p" >/dev/null 2>&1) &
    sleep 0.5
    for pid in $(pgrep -x "$(basename "$p")"); do
        eu="$(awk '/^Uid:/{print $3}' /proc/$pid/status 2>/dev/null)"
        echo "INFO $p pid $pid euid $eu"
        [ -z "$eu" ] || [ "$eu" = "$me" ] || echo "OK setuid-$(basename "$p")-euid-$eu"
    done
    wait
done
try mount-setuid-binary /usr/bin/mount -t tmpfs none /mnt
exit 3
EOF
    esc_check
    esc_done
    if [ -n "$suid" ]; then
        # the control: outside, the setuid bit works
        [[ "$("$suid" euid)" == *"euid=1234 "* ]] ||
            fail "control: the setuid probe does not change the euid even outside txbox: $("$suid" euid)"
    fi
}

@test "setuid bits and file capabilities made inside do not reach the workspace" {
    attempt <<'EOF'
cp "$ESC_TOOLS/probe" suid-probe
chmod 4755 suid-probe
cp "$ESC_TOOLS/probe" sgid-probe
chmod 2755 sgid-probe
cp "$ESC_TOOLS/probe" cap-probe
setcap cap_setuid,cap_sys_admin+ep cap-probe 2>/dev/null
chmod u+s exec.sh
exit 0
EOF
    local f bad=""
    [ -e "$WS/suid-probe" ] || ESC_ERRS+=("the command's files were not committed: $(clip "$ATT_ERR")")
    for f in "$WS"/suid-probe "$WS"/sgid-probe "$WS"/exec.sh; do
        [ -e "$f" ] || continue
        if [ -u "$f" ] || [ -g "$f" ]; then
            bad+=" $(stat -c '%n %A %U' "$f")"
        fi
    done
    if [ -e "$WS/cap-probe" ] && getfattr -n security.capability "$WS/cap-probe" >/dev/null 2>&1; then
        bad+=" $WS/cap-probe has file capabilities: $(getcap "$WS/cap-probe")"
    fi
    [ -z "$bad" ] || ESC_ERRS+=("ESCAPE (privilege outlives the transaction): committed into the workspace:$bad")
    local msg
    msg="$(esc_host_diff)" || ESC_ERRS+=("ESCAPE: the host changed: $msg")
    esc_done
}

@test "writing /proc/sys and /proc/sysrq-trigger" {
    attempt <<'EOF'
try core_pattern sh -c 'echo "|/nonexistent-$ESC_MARK" >/proc/sys/kernel/core_pattern'
try hostname-sysctl sh -c 'echo "$ESC_MARK" >/proc/sys/kernel/hostname'
try domainname-sysctl sh -c 'echo "$ESC_MARK" >/proc/sys/kernel/domainname'
try drop_caches sh -c 'echo 1 >/proc/sys/vm/drop_caches'
try overcommit-same sh -c 'cat /proc/sys/vm/overcommit_memory >/proc/sys/vm/overcommit_memory'
try ip_forward-same sh -c 'cat /proc/sys/net/ipv4/ip_forward >/proc/sys/net/ipv4/ip_forward'
try sysrq-same sh -c 'cat /proc/sys/kernel/sysrq >/proc/sys/kernel/sysrq'
try protected_symlinks-same sh -c 'cat /proc/sys/fs/protected_symlinks >/proc/sys/fs/protected_symlinks'
try randomize_va_space-same sh -c 'cat /proc/sys/kernel/randomize_va_space >/proc/sys/kernel/randomize_va_space'
try sysrq-trigger-help sh -c 'echo h >/proc/sysrq-trigger'
try sysctl-binary sysctl -w "kernel.domainname=$ESC_MARK"
try proc-self-oom-score-adj-down sh -c 'echo -1000 >/proc/self/oom_score_adj'
try proc-1-oom-score-adj sh -c 'echo -1000 >/proc/1/oom_score_adj'
exit 3
EOF
    esc_check
    esc_done
}

@test "writing /sys: kernel settings, network devices, cgroup release agents" {
    attempt <<'EOF'
try thp-same sh -c 'sed "s/.*\[\(.*\)\].*/\1/" /sys/kernel/mm/transparent_hugepage/enabled >/sys/kernel/mm/transparent_hugepage/enabled'
try lo-mtu-same sh -c 'cat /sys/class/net/lo/mtu >/sys/class/net/lo/mtu'
try release_agent-pids sh -c 'echo "/nonexistent-$ESC_MARK" >/sys/fs/cgroup/pids/release_agent'
try release_agent-memory sh -c 'echo "/nonexistent-$ESC_MARK" >/sys/fs/cgroup/memory/release_agent'
try notify_on_release sh -c 'echo 1 >/sys/fs/cgroup/pids/notify_on_release'
try uevent-helper sh -c 'echo "/nonexistent-$ESC_MARK" >/sys/kernel/uevent_helper'
try cgroup2-subtree sh -c 'echo +pids >/sys/fs/cgroup/unified/cgroup.subtree_control'
try mkdir-cgroup mkdir "/sys/fs/cgroup/pids/$ESC_MARK"
exit 3
EOF
    esc_check
    esc_done
}

@test "leaving its cgroup to shed the process and memory limits" {
    attempt --pids 64 --memory 512M <<'EOF'
cat /proc/self/cgroup | sed 's/^/INFO before /'
for c in pids memory unified; do
    try "join-root-$c" sh -c "echo \$\$ >/sys/fs/cgroup/$c/cgroup.procs"
done
own="$(awk -F: '$2 == "pids" {print $3}' /proc/self/cgroup)"
if [ -n "$own" ] && [ "$own" != / ]; then
    try raise-own-pids-max sh -c "echo max >/sys/fs/cgroup/pids$own/pids.max"
    try raise-own-memory sh -c "echo -1 >/sys/fs/cgroup/memory$own/memory.limit_in_bytes"
fi
for l in NPROC DATA FSIZE; do
    try "raise-hard-$l" python3 -c "import resource as r; s, h = r.getrlimit(r.RLIMIT_$l); assert h != r.RLIM_INFINITY; r.setrlimit(r.RLIMIT_$l, (h + 1, h + 1))"
done
cat /proc/self/cgroup | sed 's/^/INFO after /'
exit 3
EOF
    esc_check
    esc_done
}

@test "the kernel's own interfaces: modules, kexec, bpf, perf, keyrings, syslog, reboot, swap, clocks, I/O ports, quotas" {
    local t0 t1
    t0="$(date +%s)"
    attempt <<'EOF'
"$PROBE" kernel
try date-set-now sh -c 'date -s "@$(date +%s)"'
try dmesg dmesg
try keyctl-show sh -c 'command -v keyctl >/dev/null && keyctl show @u'
exit 3
EOF
    t1="$(date +%s)"
    [ $((t1 - t0)) -ge 0 ] && [ $((t1 - t0)) -lt 120 ] ||
        ESC_ERRS+=("the host clock jumped during the attempt ($t0 -> $t1)")
    esc_check
    esc_done
}

@test "the host's device nodes bound into the sandbox's /dev: chmod, chown, touch, remove" {
    attempt <<'EOF'
for d in null zero full random urandom tty; do
    try "chmod-$d" chmod 0666 "/dev/$d"
    try "chown-$d" sh -c "chown \$(stat -c %u:%g /dev/$d) /dev/$d"
    try "touch-$d" touch "/dev/$d"
    try "setfattr-$d" setfattr -n user.pwned -v 1 "/dev/$d"
done
try rm-null rm -f /dev/null
try mv-zero mv /dev/zero /dev/zero.old
exit 3
EOF
    esc_check
    esc_done
}

@test "the host's /tmp and /dev/shm: files there are out of sight and out of reach" {
    local hf="/tmp/txbox-hostfile-$$-$RANDOM" sf="/dev/shm/txbox-hostfile-$$-$RANDOM"
    echo host >"$hf"
    echo host >"$sf"
    export ESC_HF="$hf" ESC_SF="$sf"
    attempt <<'EOF'
try see-host-tmp test -e "$ESC_HF"
try see-host-shm test -e "$ESC_SF"
echo pwned >>"$ESC_HF" 2>/dev/null
echo pwned >>"$ESC_SF" 2>/dev/null
rm -f /tmp/* /dev/shm/* 2>/dev/null
exit 3
EOF
    [ "$(cat "$hf")" = host ] || ESC_ERRS+=("ESCAPE: the host's $hf changed: $(cat "$hf")")
    [ "$(cat "$sf" 2>&1)" = host ] || ESC_ERRS+=("ESCAPE: the host's $sf changed: $(cat "$sf" 2>&1)")
    rm -f "$hf" "$sf"
    esc_check
    esc_done
}
