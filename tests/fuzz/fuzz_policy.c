/* libFuzzer target for the policy engine: the tree-sitter-bash reader and
 * the classifier over any bytes (up to a cap a little above
 * TXBOX_POLICY_MAX_COMMAND, so the too-large path is reached too).
 * Replayed over tests/fuzz/corpus/policy by the meson test
 * policy-fuzz-replay (tests/policy/meson.build).
 *
 * Input: byte 0 picks the mode: even = a shell string (txbox_policy_check),
 * odd = an argv split at NUL bytes (txbox_policy_check_argv). Invariants,
 * checked with abort():
 *   - every input gets a verdict (no error for any byte string);
 *   - the verdict is one of the three, with a rule id and a one-line reason;
 *   - an unsafe verdict carries a suggestion;
 *   - the same input gets the same verdict twice (no hidden state), unless
 *     one of the two ran into the parse-time cap (rule too-large);
 *   - an input with a NUL byte in shell mode is never safe. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "txbox_policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CAP (TXBOX_POLICY_MAX_COMMAND + 64)

static txbox_policy *policy;

static void release(void) { txbox_policy_free(policy); }

static void check_verdict(const txbox_verdict *v)
{
    if (v->verdict != TXBOX_VERDICT_SAFE && v->verdict != TXBOX_VERDICT_UNCERTAIN &&
        v->verdict != TXBOX_VERDICT_UNSAFE)
        abort();
    if (!v->rule[0] || memchr(v->rule, 0, sizeof v->rule) == NULL)
        abort();
    if (!v->reason[0] || strchr(v->reason, '\n') || !memchr(v->reason, 0, sizeof v->reason))
        abort();
    if (v->verdict == TXBOX_VERDICT_UNSAFE && !v->suggestion[0])
        abort();
    if (v->verdict != TXBOX_VERDICT_UNSAFE && v->suggestion[0])
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!policy) {
        txbox_error err = {0};
        if (txbox_policy_load(NULL, NULL, &policy, &err) < 0)
            abort();
        atexit(release);
    }
    if (size < 1 || size > FUZZ_CAP)
        return 0;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    txbox_verdict v1, v2;
    txbox_error err = {0};
    if (!(data[0] & 1)) {
        if (txbox_policy_check(policy, s, n, &v1, &err) < 0)
            abort();
        check_verdict(&v1);
        if (memchr(s, 0, n) && v1.verdict == TXBOX_VERDICT_SAFE)
            abort();
        if (txbox_policy_check(policy, s, n, &v2, &err) < 0)
            abort();
    } else {
        /* argv: words separated by NUL bytes */
        size_t words = 1;
        for (size_t i = 0; i < n; i++)
            words += s[i] == 0;
        char *buf = malloc(n + 1);
        char **argv = calloc(words + 1, sizeof *argv);
        if (!buf || !argv)
            abort();
        memcpy(buf, s, n);
        buf[n] = 0;
        size_t k = 0;
        argv[k++] = buf;
        for (size_t i = 0; i < n; i++)
            if (buf[i] == 0)
                argv[k++] = buf + i + 1;
        argv[k] = NULL;
        if (txbox_policy_check_argv(policy, argv, &v1, &err) < 0)
            abort();
        check_verdict(&v1);
        if (txbox_policy_check_argv(policy, argv, &v2, &err) < 0)
            abort();
        free(argv);
        free(buf);
    }
    check_verdict(&v2);
    if ((v1.verdict != v2.verdict || strcmp(v1.rule, v2.rule)) && strcmp(v1.rule, "too-large") &&
        strcmp(v2.rule, "too-large"))
        abort();
    return 0;
}
