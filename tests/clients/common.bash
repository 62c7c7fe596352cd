# Shared by tests/clients/*.bats (after ../lib/common).

# clients_home: the test's own HOME, temporary directory and caches, in
# its bats directory (removed with the run): what the CLIs it starts write
# for themselves stays there, never in the host's /tmp or the caller's
# home. TMPDIR (and TMP, TEMP) is the CLIs' temporary directory: Claude
# Code's claude-UID/ (a directory per workspace, never removed), cc-socks/
# and cwd files, opencode's opencode/, Gemini CLI's gemini-shell-*, the
# hook's mktemp. BUN_TMPDIR, before TMPDIR, is where a Bun-built CLI
# extracts its embedded native libraries (opencode: a 5.5 MB
# .HASH-00000000.so at each start, never removed). The XDG directories: a
# caller may have set them elsewhere (opencode's cache and state, the
# opencode config txbox setup writes).
clients_home() {
    export HOME="$BATS_TEST_TMPDIR/home"
    export TMPDIR="$BATS_TEST_TMPDIR/tmp"
    export TMP="$TMPDIR" TEMP="$TMPDIR" BUN_TMPDIR="$TMPDIR"
    export XDG_CONFIG_HOME="$HOME/.config" XDG_CACHE_HOME="$HOME/.cache" \
        XDG_DATA_HOME="$HOME/.local/share" XDG_STATE_HOME="$HOME/.local/state"
    mkdir -p "$HOME" "$TMPDIR"
}
