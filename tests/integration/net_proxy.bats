#!/usr/bin/env bats
# Network through txbox's allowlisting proxy (lib/sandbox/netproxy.c): a command
# granted network keeps its own network namespace, and reaches only the
# allowed names, through the proxy, never the host's loopback.
#
# The registry is a fake one, python3's http.server on the host's
# 127.0.0.1. Test builds let a name resolve to it for the proxy:
# TXBOX_TEST_RESOLVE=registry.txbox.test=127.0.0.1 (ignored in release
# builds); without that map the proxy refuses every loopback address, which
# the tests check too. The names are under .test and .example (reserved):
# even a txbox without the proxy (the old code) sends nothing beyond a DNS
# query for them.

bats_require_minimum_version 1.5.0
load ../lib/common

setup() {
    command -v curl >/dev/null || need "curl is needed inside the sandbox"
    new_ws ws
    REG="$BATS_TEST_TMPDIR/registry"
    mkdir -p "$REG/www/pkg"
    TOKEN="tarball-$RANDOM-$RANDOM"
    echo "$TOKEN" >"$REG/www/pkg/left-pad.tgz"
    python3 -u -m http.server 0 --bind 127.0.0.1 -d "$REG/www" </dev/null >"$REG/out" 2>"$REG/log" 3>&- &
    REG_PID=$!
    local i
    for i in $(seq 100); do
        grep -q 'port [0-9]' "$REG/out" 2>/dev/null && break
        sleep 0.05
    done
    REG_PORT="$(sed -n 's/.* port \([0-9][0-9]*\).*/\1/p' "$REG/out" | head -1)"
    [ -n "$REG_PORT" ] || fail "the fake registry did not start: $(cat "$REG/out" "$REG/log")"
    # the host's abstract unix socket, which no mode but --net=host reaches
    ABSTRACT="txbox-netproxy-$RANDOM-$$"
    python3 -u -c '
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind("\0" + sys.argv[1]); s.listen(4); print("ready", flush=True)
while True:
    c, _ = s.accept(); open(sys.argv[2], "a").write("abstract\n"); c.close()
' "$ABSTRACT" "$REG/abstract.log" </dev/null >"$REG/abstract.out" 2>&1 3>&- &
    ABS_PID=$!
    for i in $(seq 100); do
        grep -q ready "$REG/abstract.out" 2>/dev/null && break
        sleep 0.05
    done
    : >"$REG/abstract.log"
}

teardown() {
    kill "$REG_PID" "$ABS_PID" 2>/dev/null || true
    wait "$REG_PID" "$ABS_PID" 2>/dev/null || true
}

# Requests the fake registry served (its log), one a line.
registry_hits() {
    grep -c 'GET /pkg/left-pad.tgz' "$REG/log" || true
}

# A script that tries the host's loopback service and abstract socket
# directly (not through the proxy), and reports what it reached.
probe_script() {
    cat >"$WS/probe.py" <<'EOF'
import socket, sys
port, name = int(sys.argv[1]), sys.argv[2]
for what, fam, addr in (("tcp", socket.AF_INET, ("127.0.0.1", port)),
                        ("abstract", socket.AF_UNIX, "\0" + name)):
    s = socket.socket(fam)
    s.settimeout(3)
    try:
        s.connect(addr)
        if what == "tcp":
            s.sendall(b"GET /pkg/left-pad.tgz HTTP/1.0\r\n\r\n")
            s.recv(100)
        print("REACHED", what)
    except OSError as e:
        print("BLOCKED", what, e)
EOF
}

@test "a fake registry on 127.0.0.1 is reached through the proxy by its allowed name (HTTP and CONNECT)" {
    export TXBOX_TEST_RESOLVE="registry.txbox.test=127.0.0.1"
    txj --net --allow-domain registry.txbox.test -c "curl -sS -m 30 http://registry.txbox.test:$REG_PORT/pkg/left-pad.tgz && curl -sS -m 30 --proxytunnel http://registry.txbox.test:$REG_PORT/pkg/left-pad.tgz && env | grep -c '^[A-Za-z_]*[pP][rR][oO][xX][yY]=http://127.0.0.1:3128$'"
    assert_status 0
    [ "$(grep -c "^$TOKEN\$" <<<"$(jget stdout)")" = 2 ] || fail "the package did not come through the proxy twice: $(jget stdout) $(jget stderr)"
    grep -qx 6 <<<"$(jget stdout)" || fail "HTTP(S)_PROXY, http(s)_proxy and ALL_PROXY are not all set: $(jget stdout)"
    [ "$(registry_hits)" = 2 ] || fail "the registry saw $(registry_hits) requests, want 2: $(cat "$REG/log")"
    [ "$(jget protections.network)" = proxy ] || fail "protections.network: $(jget protections.network)"
    jget protections.namespaces | grep -qx net || fail "no network namespace of its own: $(jget protections.namespaces)"
    [ "$(jget network.mode)" = proxy ] || fail "network.mode: $(jget network.mode)"
    [ "$(jget network.contacted)" = registry.txbox.test ] || fail "network.contacted: $(jget network.contacted)"
    [ -z "$(jget network.refused)" ] || fail "network.refused: $(jget network.refused)"
    jget network.allowed | grep -qx pypi.org || fail "the default registries are not allowed: $(jget network.allowed)"
    # the audit record keeps it
    local id
    id="$(jget tx)"
    run --separate-stderr txbox_bin show -C "$WS" "$id"
    assert_status 0
    grep -q '^  network *proxy$' <<<"$output" || fail "txbox show: no network line: $output"
    grep -q 'contacted.*registry.txbox.test' <<<"$output" || fail "txbox show: contacted domains missing: $output"
}

@test "a name outside the allowlist gets a 403 from txbox that says how to allow it, and is reported" {
    export TXBOX_TEST_RESOLVE="registry.txbox.test=127.0.0.1,pkgs.not-allowed.example=127.0.0.1"
    txj --net -c "curl -sS -i -m 30 http://pkgs.not-allowed.example:$REG_PORT/pkg/left-pad.tgz; curl -sS -m 30 --proxytunnel https://pkgs.not-allowed.example:$REG_PORT/ 2>&1; exit 0"
    assert_status 0
    local out
    out="$(jget stdout)"
    grep -q '^HTTP/1.1 403' <<<"$out" || fail "no 403: $out"
    grep -q 'txbox refused pkgs.not-allowed.example: .*--allow-domain pkgs.not-allowed.example' <<<"$out" ||
        fail "the refusal does not name the domain and how to allow it: $out"
    grep -q 'CONNECT.*403\|403.*CONNECT\|returned 403\|response 403' <<<"$out" || fail "CONNECT was not refused with 403: $out"
    [ "$(registry_hits)" = 0 ] || fail "the registry was reached: $(cat "$REG/log")"
    [ "$(jget network.refused)" = pkgs.not-allowed.example ] || fail "network.refused: $(jget network.refused)"
    [ -z "$(jget network.contacted)" ] || fail "network.contacted: $(jget network.contacted)"
    # and --allow-domain lets it through (a *. pattern: its subdomains)
    txj --net --allow-domain '*.not-allowed.example' -c "curl -sS -m 30 http://pkgs.not-allowed.example:$REG_PORT/pkg/left-pad.tgz"
    assert_status 0
    grep -qx "$TOKEN" <<<"$(jget stdout)" || fail "--allow-domain did not let it through: $(jget stdout) $(jget stderr)"
}

@test "the proxy never connects to the host's loopback or private addresses, whatever is allowed" {
    # no test map here: names and literals as the proxy resolves them
    cat >"$WS/try.sh" <<EOF
for u in http://localhost:$REG_PORT/pkg/left-pad.tgz http://127.0.0.1:$REG_PORT/pkg/left-pad.tgz \
         http://127.1.2.3:$REG_PORT/pkg/left-pad.tgz 'http://[::1]:$REG_PORT/pkg/left-pad.tgz' \
         'http://[::ffff:127.0.0.1]:$REG_PORT/pkg/left-pad.tgz' http://169.254.169.254/latest/meta-data/ \
         http://10.0.0.1:$REG_PORT/ http://0.0.0.0:$REG_PORT/pkg/left-pad.tgz; do
    curl -sS -m 30 --noproxy '' -x http://127.0.0.1:3128 "\$u"
    curl -sS -m 30 --noproxy '' -x http://127.0.0.1:3128 --proxytunnel "\$u" 2>&1
done
exit 0
EOF
    txj --net --allow-domain localhost --allow-domain 127.0.0.1 --allow-domain 127.1.2.3 --allow-domain ::1 \
        --allow-domain ::ffff:127.0.0.1 --allow-domain 169.254.169.254 --allow-domain 10.0.0.1 \
        --allow-domain 0.0.0.0 -- /bin/sh try.sh
    assert_status 0
    local out
    out="$(jget stdout)"
    ! grep -q "$TOKEN" <<<"$out" || fail "ESCAPE: the proxy fetched from the host's loopback: $out"
    [ "$(registry_hits)" = 0 ] || fail "ESCAPE: the host's loopback service was reached: $(cat "$REG/log")"
    [ "$(grep -c 'txbox refused .*loopback, link-local or private address' <<<"$out")" = 8 ] ||
        fail "want 8 plain-HTTP refusals naming the address class: $out"
    jget network.refused | grep -qx localhost || fail "network.refused: $(jget network.refused)"
    [ -z "$(jget network.contacted)" ] || fail "network.contacted: $(jget network.contacted)"
}

@test "a sub-command granted network by a rule does not give the whole string the host's network" {
    probe_script
    txj -c "python3 probe.py $REG_PORT $ABSTRACT; exit 0; npm install"
    assert_status 0
    # npm install, not the probe, is what grants network here
    [ "$(jget protections.network)" = proxy ] || fail "protections.network: $(jget protections.network)"
    jget protections.namespaces | grep -qx net || fail "no network namespace of its own: $(jget protections.namespaces)"
    ! grep -q REACHED <<<"$(jget stdout)" || fail "ESCAPE: $(jget stdout)"
    [ "$(grep -c BLOCKED <<<"$(jget stdout)")" = 2 ] || fail "the probe did not run: $(jget stdout) $(jget stderr)"
    [ "$(registry_hits)" = 0 ] || fail "ESCAPE: the host's loopback service was reached: $(cat "$REG/log")"
    [ ! -s "$REG/abstract.log" ] || fail "ESCAPE: the host's abstract socket was reached"
}

@test "--net: the host's loopback services and abstract sockets stay out of reach; --net=host reaches them, reported" {
    probe_script
    txj --net -- python3 probe.py "$REG_PORT" "$ABSTRACT"
    assert_status 0
    ! grep -q REACHED <<<"$(jget stdout)" || fail "ESCAPE with --net: $(jget stdout)"
    [ "$(grep -c BLOCKED <<<"$(jget stdout)")" = 2 ] || fail "the probe did not run: $(jget stdout) $(jget stderr)"
    [ "$(registry_hits)" = 0 ] || fail "ESCAPE: the host's loopback service was reached: $(cat "$REG/log")"
    [ ! -s "$REG/abstract.log" ] || fail "ESCAPE: the host's abstract socket was reached"
    [ "$(jget protections.network)" = proxy ] || fail "protections.network: $(jget protections.network)"
    # the explicit opt-in: the host's namespace, and it says so
    txj --net=host -- python3 probe.py "$REG_PORT" "$ABSTRACT"
    assert_status 0
    grep -q "REACHED tcp" <<<"$(jget stdout)" || fail "--net=host did not reach the host: $(jget stdout) $(jget stderr)"
    # the host's abstract sockets stay behind Landlock's scope where the
    # kernel has it (ABI 6), even in the host's namespace
    if grep -q "BLOCKED abstract" <<<"$(jget stdout)"; then
        [ "$(jget protections.host_sockets.abstract)" = "Landlock scope" ] || fail "abstract blocked by what? $(jget protections.host_sockets)"
    fi
    [ "$(jget protections.network)" = host ] || fail "protections.network: $(jget protections.network)"
    [ "$(jget network.mode)" = host ] || fail "network.mode: $(jget network.mode)"
    ! jget protections.namespaces | grep -qx net || fail "--net=host reported a network namespace"
}

@test "network options: bad values are refused with one line" {
    tx --net=bogus -c true
    assert_status 125
    grep -q "^txbox: run: --net is --net (the proxy), --net=proxy or --net=host" <<<"$stderr" || fail "$stderr"
    for d in '*.org' '*' 'a..b' 'bad/name' ''; do
        tx --net --allow-domain "$d" -c true
        [ "$status" != 0 ] || fail "--allow-domain '$d' was accepted"
        grep -q "is not a domain to allow" <<<"$stderr" || fail "--allow-domain '$d': $stderr"
        [ "$(wc -l <<<"$stderr")" = 1 ] || fail "more than one line: $stderr"
    done
}

@test "the rules that grant network decide the domains: npm install reaches npm's registry, not the other defaults" {
    export TXBOX_TEST_RESOLVE="registry.txbox.test=127.0.0.1,pypi.org=127.0.0.1"
    cat >"$BATS_TEST_TMPDIR/policy.yaml" <<'YAML'
rules:
  - id: fake-registry
    decision: uncertain
    reason: fetches from the fake registry
    network: true
    domains: [registry.txbox.test]
    match: {program: [curl], operands_any: ['http://registry.txbox.test:*']}
    examples: {match: ['curl http://registry.txbox.test:1/x'], no_match: ['curl http://pypi.org/']}
YAML
    # a fetch that matches no network rule of its own (a script)
    cat >"$WS/get.py" <<'PY'
import sys, urllib.error, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=30).read().decode().strip())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
PY
    # the rule's own domain only: pypi.org, a default, is refused here
    txj --policy "$BATS_TEST_TMPDIR/policy.yaml" -c "curl -sS -m 30 http://registry.txbox.test:$REG_PORT/pkg/left-pad.tgz; curl -sS -m 30 http://registry.txbox.test:$REG_PORT/pkg/left-pad.tgz -H 'Host: pypi.org' -o /dev/null; python3 get.py http://pypi.org:$REG_PORT/pkg/left-pad.tgz"
    assert_status 0
    [ "$(jget rule)" = fake-registry ] || fail "rule: $(jget rule)"
    [ "$(jget network.allowed)" = registry.txbox.test ] || fail "network.allowed: $(jget network.allowed)"
    grep -qx "$TOKEN" <<<"$(jget stdout)" || fail "the rule's domain was not reached: $(jget stdout) $(jget stderr)"
    grep -q 'txbox refused pypi.org' <<<"$(jget stdout)" || fail "pypi.org was not refused: $(jget stdout)"
    [ "$(registry_hits)" = 2 ] || fail "the registry saw $(registry_hits) requests, want 2: $(cat "$REG/log")"
    # the built-in npm rule: npm's hosts, not PyPI's
    txj -c "python3 get.py http://pypi.org:$REG_PORT/pkg/left-pad.tgz; exit 0; npm install"
    jget network.allowed | grep -qx registry.npmjs.org || fail "network.allowed: $(jget network.allowed)"
    ! jget network.allowed | grep -qx pypi.org || fail "npm install allowed pypi.org: $(jget network.allowed)"
    grep -q 'txbox refused pypi.org' <<<"$(jget stdout)" || fail "pypi.org was not refused: $(jget stdout)"
    # and --net adds the defaults
    txj --net -c "python3 get.py http://pypi.org:$REG_PORT/pkg/left-pad.tgz; exit 0; npm install"
    grep -qx "$TOKEN" <<<"$(jget stdout)" || fail "--net did not add the defaults: $(jget stdout) $(jget stderr)"
}

@test "the workspace's own policy file cannot widen the network allowlist" {
    cat >"$WS/.txbox-policy.yaml" <<'YAML'
rules:
  - id: exfiltrate
    decision: uncertain
    reason: looks harmless
    network: true
    domains: ['*.attacker.example']
    match: {program: [curl]}
    examples: {match: ['curl x'], no_match: ['ls']}
YAML
    # the rule is kept (it can only tighten) without its network and
    # domains, and each refusal is said
    run "$TXBOX" check -C "$WS" --json -c "curl -sS http://a.attacker.example/"
    [ "$status" = 0 ] || fail "$output"
    grep -q 'domains: refused' <<<"$output" || fail "domains not refused: $output"
    grep -q 'network: refused' <<<"$output" || fail "network not refused: $output"
    # curl still gets the built-in network rule's proxy, whose allowlist
    # holds nothing the workspace named
    txj -c "curl -sS http://a.attacker.example/; exit 0"
    [ "$(jget network.mode)" = proxy ] || fail "$output"
    ! grep -q attacker <<<"$(jget network.allowed)" || fail "widened: $(jget network.allowed)"
    grep -q attacker <<<"$(jget network.refused)" || fail "not refused: $(jget network)"
}

@test "over MCP the proxy's refusal tells the model who can allow the name, not a CLI option" {
    # The model cannot pass --allow-domain: the refusal it reads in the
    # command's output names the person who can, in MCP's words.
    export TXBOX_TEST_RESOLVE="registry.txbox.test=127.0.0.1,pkgs.not-allowed.example=127.0.0.1"
    run --separate-stderr timeout 120 python3 - "$TXBOX" "$WS" "$REG_PORT" <<'PY'
import json, subprocess, sys
txbox, ws, port = sys.argv[1:]
reqs = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
     "params": {"name": "run", "arguments": {"network": True,
                "command": f"curl -sS -m 30 http://pkgs.not-allowed.example:{port}/pkg/left-pad.tgz"}}},
]
p = subprocess.run([txbox, "mcp", "-C", ws], input="".join(json.dumps(r) + "\n" for r in reqs),
                   capture_output=True, text=True, timeout=110)
ans = {m.get("id"): m for m in map(json.loads, p.stdout.splitlines())}
print(ans[2]["result"]["content"][0]["text"])
PY
    [ "$status" = 0 ] || fail "the MCP session failed ($status)" "$output" "$stderr"
    grep -q 'txbox refused pkgs.not-allowed.example: .*only the user can allow pkgs.not-allowed.example' <<<"$output" ||
        fail "the refusal does not say who can allow it: $output"
    ! grep -q -- '--allow-domain\|txbox run' <<<"$output" || fail "a CLI option told to the model: $output"
}
