# Sourced by the attack scripts of tests/integration/escape_*.bats, which
# run them as `txbox run -- /bin/sh SCRIPT` (and, for the control runs,
# without txbox).
#
# try NAME CMD...: run CMD (output discarded) and print "OK NAME" if it
# succeeded, "FAIL NAME" if not. The tests treat every OK line of an
# attempt as an escape, so only calls that must fail go through try.
try() {
    _n="$1"
    shift
    if "$@" >/dev/null 2>&1 </dev/null; then
        echo "OK $_n"
    else
        echo "FAIL $_n"
    fi
}

# trysh NAME 'SHELL TEXT': the same for a shell snippet.
trysh() {
    _n="$1"
    if sh -c "$2" >/dev/null 2>&1 </dev/null; then
        echo "OK $_n"
    else
        echo "FAIL $_n"
    fi
}

PROBE="$ESC_TOOLS/probe"
echo TXBOX-ATTEMPT-RAN
