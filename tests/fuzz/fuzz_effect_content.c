/* libFuzzer target for the effect rules' literal filter (lib/policy/effect_lit.c,
 * effect_lit_build): a content_any pattern comes from a policy file, and a
 * workspace's .txbox-policy.yaml is a file a command can write. Replayed
 * over tests/fuzz/corpus/effect_content by the meson test
 * effect-content-fuzz-replay.
 *
 * Input: a pattern, a NUL byte, a text (no NUL: the pattern alone, and an
 * empty text). Invariants, checked with abort():
 *   - the reader ends, within its bounds, on any pattern (ASan, UBSan);
 *   - wherever glibc's regexec (as effect_rules.c compiles the pattern) finds a
 *     match in the text, the literal filter does not say "cannot match".
 *   - with too many strings or any part the reader refuses, the pattern has
 *     no filter (lit_ok false; checked by tests/unit/test_effects.c). */
#include <regex.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "effects.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PATTERN_CAP 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t plen = nul ? (size_t)(nul - data) : size;
    if (plen > PATTERN_CAP)
        return 0;
    size_t tlen = nul ? size - plen - 1 : 0;
    /* both NUL-terminated: the sanitizers' regexec reads a C string */
    char *pat = malloc(plen + 1), *text = malloc(tlen + 1);
    if (!pat || !text) {
        free(pat);
        free(text);
        return 0;
    }
    memcpy(pat, data, plen);
    pat[plen] = 0;
    if (tlen)
        memcpy(text, nul + 1, tlen);
    text[tlen] = 0;

    effect_rule r;
    memset(&r, 0, sizeof r);
    strlist_add(&r.content_any, pat);
    effect_lit_build(&r);
    int icase = !strncmp(pat, "(?i)", 4);
    regex_t re;
    /* without a filter every text "may match": nothing to check (and
     * glibc's regcomp is left alone with the patterns that take it
     * seconds, stacked repetitions, which the reader refuses) */
    if (r.lit_ok &&
        regcomp(&re, icase ? pat + 4 : pat, REG_EXTENDED | REG_NEWLINE | (icase ? REG_ICASE : 0)) == 0) {
        regmatch_t m = {.rm_so = 0, .rm_eo = (regoff_t)tlen};
        if (regexec(&re, text, 1, &m, REG_STARTEND) == 0 && !effect_lit_may_match(&r, text, tlen))
            abort();
        regfree(&re);
    }
    effect_rule_free(&r);
    free(pat);
    free(text);
    return 0;
}
