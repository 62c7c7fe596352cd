#!/usr/bin/env bats
# Escape attempts, secrets: the files txbox hides by default (every entry of
# the built-in policy's hide: list (policy/default.yaml), each holding a "TXBOX-SECRET-..." line),
# --hide, and environment variables that look like credentials. No secret
# may show in the command's output, in the workspace after a commit, or
# anywhere the command can write.

bats_require_minimum_version 1.5.0
load ../lib/common
load ../lib/escape_helpers

# No secret in the attempt's output; $1 labels the message.
no_secret_in_output() {
    local hits
    hits="$(printf '%s\n%s\n' "$ATT_OUT" "$ATT_ERR" | grep -o 'TXBOX-SECRET-[^ ]*' | sort -u)"
    [ -n "$hits" ] || return 0
    ESC_ERRS+=("${1:+[$1] }ESCAPE: secrets read inside the sandbox: $hits")
}

@test "every default secret under HOME is hidden: cat, grep -r, find, tar, and a copy committed into the workspace (control)" {
    local s hidden missing=""
    attempt <<'EOF'
cd "$ESC_HOME"
for f in $(find . -type f 2>/dev/null); do cat "$f" 2>/dev/null; done
grep -r TXBOX-SECRET . 2>/dev/null
tar cf - . 2>/dev/null | strings 2>/dev/null | grep TXBOX-SECRET
cat .ssh/id_ed25519 .aws/secret .netrc .git-credentials .docker/config.json 2>/dev/null
python3 -c 'import glob, os; [print(open(p).read()) for p in glob.glob(os.environ["HOME"] + "/**/*", recursive=True) + glob.glob(os.environ["HOME"] + "/.*/**/*", recursive=True) + glob.glob(os.environ["HOME"] + "/.*", recursive=True) if os.path.isfile(p) and os.access(p, os.R_OK)]' 2>/dev/null
mkdir -p "$ESC_WS/stolen"
cp -r . "$ESC_WS/stolen/" 2>/dev/null
# (the hidden directories are copied with their mode 0: make them readable,
# or the commit of an unreadable directory fails on its own)
chmod -R u+rwX "$ESC_WS/stolen"
# ordinary dotfiles stay readable: the hiding is targeted
grep -q 'not a secret' notes.txt && grep -q 'name = Test' .gitconfig && echo ORDINARY-FILES-READABLE
exit 0
EOF
    no_secret_in_output
    grep -q '^ORDINARY-FILES-READABLE$' <<<"$ATT_OUT" ||
        ESC_ERRS+=("ordinary files in HOME (notes.txt, .gitconfig) are not readable inside: $(clip "$ATT_ERR")")
    [ "$ATT_OUTCOME" = committed ] ||
        ESC_ERRS+=("the copy into the workspace did not commit: '$ATT_OUTCOME' $(clip "$ATT_ERR")")
    if grep -rq TXBOX-SECRET "$WS/stolen" 2>/dev/null; then
        ESC_ERRS+=("ESCAPE: secrets committed into the workspace: $(grep -rl TXBOX-SECRET "$WS/stolen" | head -5)")
    fi
    # protections.secrets_hidden names every default entry
    hidden="$(jget protections.secrets_hidden 2>/dev/null)"
    while read -r s; do
        grep -qxF "$FHOME/$s" <<<"$hidden" || missing+=" $s"
    done < <(esc_default_hidden)
    [ -z "$missing" ] || ESC_ERRS+=("protections.secrets_hidden lacks:$missing")
    local msg
    msg="$(esc_host_diff)" || ESC_ERRS+=("ESCAPE: the host changed: $msg")
    esc_done
    # the control: without txbox the same script reads them
    control_run
    grep -q TXBOX-SECRET <<<"$CONTROL_OUT" ||
        fail "control: the script reads no secret even without txbox, so the check proves nothing"
}

@test "hidden secrets by other routes: /proc/self/root, .., symlinks made before and during, /proc/1/root, path spellings" {
    local b
    ln -s "$FHOME/.ssh/id_ed25519" "$WS/key_link"
    ln -s "$FHOME/.aws" "$WS/aws_link"
    ln -s ../home "$WS/home_link"
    esc_snap pre
    for b in overlay copy; do
        attempt --backend "$b" <<'EOF'
H="$ESC_HOME"
cat "/proc/self/root$H/.ssh/id_ed25519" "/proc/thread-self/root$H/.netrc" 2>/dev/null
cat "../home/.ssh/secret" "src/../../home/.aws/secret" 2>/dev/null
cat key_link aws_link/secret home_link/.git-credentials 2>/dev/null
ln -s "$H/.gnupg" gpg_link 2>/dev/null && cat gpg_link/secret 2>/dev/null
ln -s "$H/.npmrc" npm_link 2>/dev/null && cat npm_link 2>/dev/null
cat "/proc/1/root$H/.ssh/secret" "/proc/1/cwd/../home/.ssh/secret" 2>/dev/null
cat "$H//.ssh//secret" "$H/./.ssh/./secret" "$H/.ssh/../.ssh/secret" "$H/.config/../.kube/secret" 2>/dev/null
cd "$H/.ssh" 2>/dev/null && cat secret id_ed25519 2>/dev/null
cd "$H" && cat .docker/config.json .pypirc 2>/dev/null
ls -la "$H/.ssh" "$H/.aws" 2>/dev/null | sed 's/^/INFO /'
exit 3
EOF
        no_secret_in_output "$b"
        esc_check "$b"
    done
    esc_done
}

@test "hidden secrets: mount tricks to uncover them (umount, bind the parent elsewhere, a new mount namespace)" {
    attempt <<'EOF'
H="$ESC_HOME"
umount -l "$H/.ssh" 2>/dev/null; cat "$H/.ssh/secret" 2>/dev/null
umount "$H/.netrc" 2>/dev/null; cat "$H/.netrc" 2>/dev/null
mkdir -p m; mount --bind "$H" m 2>/dev/null && cat m/.ssh/secret 2>/dev/null
unshare -Urm sh -c "umount -l '$H/.aws' && cat '$H/.aws/secret'" 2>/dev/null
nsenter -t 1 -m cat "$H/.aws/secret" 2>/dev/null
exit 3
EOF
    no_secret_in_output
    esc_check
    esc_done
}

@test "other users' homes and the shadow files are hidden (as root the identity-mapped namespace reads them otherwise); the caller's HOME stays (control)" {
    local other="" shadow_line=""
    if is_root; then
        # another user's home, mode 0700 as adduser makes it, and one 0755
        # as older adduser did: root reads both without the hiding
        other="/home/txbox-other-${ESC_BASE##*.}"
        mkdir -p "$other/.ssh" "$other/project"
        printf 'TXBOX-SECRET-other-home-key\n' >"$other/.ssh/id_rsa"
        printf 'TXBOX-SECRET-other-home-file\n' >"$other/project/notes"
        chmod 0700 "$other" "$other/.ssh"
        shadow_line="$(head -n1 /etc/shadow)"
    fi
    export ESC_OTHER="$other"
    esc_snap pre
    attempt <<'EOF'
cat /etc/shadow /etc/gshadow /etc/shadow- /etc/gshadow- 2>/dev/null | sed 's/^/SHADOW /'
for h in /home/*; do
    [ "$h" = "$ESC_HOME" ] && continue
    ls -A "$h" 2>/dev/null | sed "s|^|LISTED $h/|"
done
[ -n "$ESC_OTHER" ] && cat "$ESC_OTHER/.ssh/id_rsa" "$ESC_OTHER/project/notes" "/proc/self/root$ESC_OTHER/.ssh/id_rsa" 2>/dev/null
grep -q 'not a secret' "$ESC_HOME/notes.txt" && echo OWN-HOME-READABLE
exit 3
EOF
    [ -z "$other" ] || rm -rf "$other"
    no_secret_in_output
    grep -q '^OWN-HOME-READABLE$' <<<"$ATT_OUT" || ESC_ERRS+=("the caller's own HOME is not readable inside")
    if [ -n "$shadow_line" ] && grep -qxF "SHADOW $shadow_line" <<<"$ATT_OUT"; then
        ESC_ERRS+=("ESCAPE: /etc/shadow read inside the sandbox")
    fi
    if grep '^LISTED ' <<<"$ATT_OUT" | grep -q .; then
        ESC_ERRS+=("ESCAPE: other homes listed inside: $(grep '^LISTED ' <<<"$ATT_OUT" | head -5 | tr '\n' ' ')")
    fi
    local h
    h="$(jget protections.secrets_hidden 2>/dev/null)"
    grep -qxF /etc/shadow <<<"$h" || ESC_ERRS+=("protections.secrets_hidden does not name /etc/shadow")
    [ -z "$other" ] || grep -qxF "$other" <<<"$h" || ESC_ERRS+=("protections.secrets_hidden does not name $other")
    esc_check
    esc_done
}

@test "a home made after a command ran is hidden from the next one: the homes txbox keeps are looked up again (control)" {
    is_root || skip "only root makes a home in /home"
    attempt <<'EOF'
exit 3
EOF
    esc_check first
    [ -f "$WS/.txbox/homes" ] || ESC_ERRS+=("no list of the host's homes kept in .txbox: the next command does not test it")
    local other="/home/txbox-late-${ESC_BASE##*.}"
    mkdir -p "$other/.ssh"
    printf 'TXBOX-SECRET-late-home\n' >"$other/.ssh/id_rsa"
    chmod 0755 "$other" "$other/.ssh"
    export ESC_OTHER="$other"
    attempt <<'EOF'
cat "$ESC_OTHER/.ssh/id_rsa" 2>/dev/null
ls -A "$ESC_OTHER" 2>/dev/null | sed 's/^/LISTED /'
exit 3
EOF
    control_run
    rm -rf "$other"
    no_secret_in_output
    if grep '^LISTED ' <<<"$ATT_OUT" | grep -q .; then
        ESC_ERRS+=("ESCAPE: a home made after the first command is listed inside: $(grep '^LISTED ' <<<"$ATT_OUT" | tr '\n' ' ')")
    fi
    jget protections.secrets_hidden | grep -qxF "$other" ||
        ESC_ERRS+=("protections.secrets_hidden does not name $other")
    esc_check second
    esc_done
    grep -q TXBOX-SECRET-late-home <<<"$CONTROL_OUT" ||
        fail "control: the script reads no secret even without txbox, so the check proves nothing"
}

@test "--hide adds paths: a file and a directory outside HOME, and the ~/ form" {
    mkdir -p "$OUT/vault"
    printf 'TXBOX-SECRET-hide-dir\n' >"$OUT/vault/key"
    printf 'TXBOX-SECRET-hide-file\n' >"$OUT/prod.env"
    printf 'TXBOX-SECRET-hide-tilde\n' >"$FHOME/my-token.txt"
    esc_snap pre
    attempt --hide "$OUT/vault" --hide "$OUT/prod.env" --hide "~/my-token.txt" <<'EOF'
cat "$ESC_OUT/vault/key" "$ESC_OUT/prod.env" "$ESC_HOME/my-token.txt" 2>/dev/null
cat ../outside/vault/key "/proc/self/root$ESC_OUT/prod.env" 2>/dev/null
grep -r TXBOX-SECRET "$ESC_OUT" "$ESC_HOME" 2>/dev/null
grep -q 'outside a' "$ESC_OUT/a.txt" && echo OTHER-FILES-READABLE
exit 3
EOF
    no_secret_in_output
    grep -q '^OTHER-FILES-READABLE$' <<<"$ATT_OUT" || ESC_ERRS+=("--hide hid more than it was asked to")
    local h
    h="$(jget protections.secrets_hidden 2>/dev/null)"
    grep -qxF "$OUT/vault" <<<"$h" && grep -qxF "$OUT/prod.env" <<<"$h" && grep -qxF "$FHOME/my-token.txt" <<<"$h" ||
        ESC_ERRS+=("protections.secrets_hidden does not name the --hide paths: $h")
    esc_check
    esc_done
}

@test "the environment passes through an allowlist: secrets by any name, credentials in allowed names' values, env, /proc/*/environ, ps; --keep-env keeps only what it names (control)" {
    local v
    local -A secret=(
        [GITHUB_TOKEN]=ghp_x [GH_PAT]=pat_x [NPM_TOKEN]=npm_x [AWS_SECRET_ACCESS_KEY]=aws_x
        [AWS_ACCESS_KEY_ID]=akid_x [AWS_SESSION_TOKEN]=sess_x [OPENAI_API_KEY]=sk_x
        [ANTHROPIC_API_KEY]=ant_x [DB_PASSWORD]=pw_x [PGPASSWORD]=pg_x [MY_PASSWD]=pwd_x
        [SSH_PRIVATE_KEY]=priv_x [GOOGLE_APPLICATION_CREDENTIALS]=cred_x [STRIPE_KEY]=stripe_x
        [deploy_key]=lower_x [HF_TOKEN]=hf_x [AZURE_CLIENT_SECRET]=az_x [VAULT_TOKEN]=vault_x
        [SIGNING_KEYS]=keys_x
        # names that look like nothing in particular (issue 21)
        [MYSQL_PWD]=mysql_x [DB_PASS]=dbpass_x [SMTP_PASS]=smtp_x [CI_JOB_JWT]=jwt_x
        [STRIPE_SK]=sk_live_x [SLACK_WEBHOOK_URL]=https://hooks.slack.com/services/T0/B0/slack_x
        [DOCKER_AUTH_CONFIG]=docker_x [BASIC_AUTH]=basic_x [KEYBOARD]=kb_x [MY_SETTING]=ms_x
        [DATABASE_URL]=postgres://app:db_x@db.internal/app [REDIS_URL]=redis://:redis_x@cache:6379/0
        [AZURE_STORAGE_CONNECTION_STRING]='DefaultEndpointsProtocol=https;AccountName=a;AccountKey=azkey_x'
        # allowed names whose value embeds a credential
        [HTTPS_PROXY]=http://user:proxy_x@proxy.example:3128 [PIP_INDEX_URL]=https://__token__:pip_x@pypi.example/simple
        [GOPROXY]=https://gotok_x@goproxy.example [npm_config__authToken]=npmauth_x
    )
    # the toolchain's variables, which carry no credential, pass
    local -A plain=([LIBRARY_PATH]=/lp [CFLAGS]=-O2 [GOPATH]=/gp [CARGO_HOME]=/ch [JAVA_HOME]=/jh
        [VIRTUAL_ENV]=/venv [NODE_ENV]=production [LC_ALL]=C.UTF-8 [npm_config_cache]=/nc)
    for v in "${!secret[@]}"; do
        case "${secret[$v]}" in
        *://* | *=*) export "$v=${secret[$v]/_x/_x-TXBOX-SECRET-env}" ;;
        *) export "$v=TXBOX-SECRET-env-${secret[$v]}" ;;
        esac
    done
    for v in "${!plain[@]}"; do export "$v=${plain[$v]}"; done
    attempt <<'EOF'
env
tr '\0' '\n' </proc/self/environ
tr '\0' '\n' <"/proc/$$/environ"
tr '\0' '\n' </proc/1/environ 2>/dev/null
cat "/proc/$PPID/environ" 2>/dev/null | tr '\0' '\n'
ps eww -A 2>/dev/null
python3 -c 'import os; print(dict(os.environ))'
exit 3
EOF
    no_secret_in_output
    for v in "${!plain[@]}"; do
        grep -qx "$v=${plain[$v]}" <<<"$ATT_OUT" || ESC_ERRS+=("the toolchain variable $v was removed too")
    done
    local removed missing=""
    removed="$(jget protections.env_removed 2>/dev/null)"
    for v in "${!secret[@]}"; do grep -qx "$v" <<<"$removed" || missing+=" $v"; done
    [ -z "$missing" ] || ESC_ERRS+=("protections.env_removed does not name:$missing")
    esc_check
    # --keep-env keeps exactly what it names
    attempt --keep-env GH_PAT --keep-env 'NPM_*' <<'EOF'
env
exit 3
EOF
    grep -qx 'GH_PAT=TXBOX-SECRET-env-pat_x' <<<"$ATT_OUT" && grep -qx 'NPM_TOKEN=TXBOX-SECRET-env-npm_x' <<<"$ATT_OUT" ||
        ESC_ERRS+=("--keep-env GH_PAT --keep-env 'NPM_*' did not keep them")
    ATT_OUT="$(grep -v -e '^GH_PAT=' -e '^NPM_TOKEN=' <<<"$ATT_OUT")"
    no_secret_in_output keep-env
    esc_check keep-env
    esc_done
    control_run
    grep -q TXBOX-SECRET-env <<<"$CONTROL_OUT" ||
        fail "control: without txbox the script shows no secret variable, so the check proves nothing"
}

@test "the workspace is HOME: the secrets in it are still hidden" {
    # An agent started in the home directory: the workspace contains ~/.ssh.
    WS="$FHOME"
    export ESC_WS="$WS"
    txbox_bin run -C "$WS" -- true >/dev/null 2>&1 # creates .txbox first
    esc_snap pre
    attempt <<'EOF'
cat .ssh/secret .ssh/id_ed25519 .aws/secret .netrc .git-credentials .docker/config.json 2>/dev/null
grep -r TXBOX-SECRET . 2>/dev/null | head -20
exit 3
EOF
    no_secret_in_output
    esc_check
    esc_done
}
