# The unprivileged test user of the runners (tests/run-integration,
# tests/crash/run, tests/crash/powerloss), made for the run and removed
# after it, so that the machine is left as it was found.
# Load with:  . "$REPO/tests/lib/testuser.bash"

# test_user_ensure NAME: makes the system account NAME (no home, no login
# shell, a group of its own) when it is missing; TEST_USER_MADE=NAME then.
# 0, or 1 when useradd failed.
test_user_ensure() {
    id "$1" >/dev/null 2>&1 && return 0
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
        --user-group "$1" || return 1
    TEST_USER_MADE="$1"
}

# test_user_drop: removes the account test_user_ensure made (none: nothing),
# its processes first (a test that left one running has failed already).
test_user_drop() {
    local u="${TEST_USER_MADE:-}" i
    [ -n "$u" ] || return 0
    TEST_USER_MADE=""
    pkill -KILL -u "$u" 2>/dev/null || true
    for i in $(seq 1 50); do
        pgrep -u "$u" >/dev/null || break
        sleep 0.1
    done
    userdel "$u" 2>/dev/null || echo "warning: cannot remove the test user $u" >&2
}
