/* libFuzzer target for the content readers of the rules on effects
 * (lib/policy/effect_read.c): VS Code's JSONC, TOML, .pth and pyvenv.cfg
 * files are workspace content a command wrote. Replayed over
 * tests/fuzz/corpus/effect_read by the meson test effect-read-fuzz-replay.
 *
 * Input: one byte choosing the reader, the new content, a NUL byte, the
 * old content (no NUL: an added file). Invariants, checked with abort():
 *   - each reader ends, within its bounds, on any content (ASan, UBSan);
 *   - plain JSON (what jansson reads as it is) reads as the same value
 *     through the JSONC reader: comments and commas are only removed
 *     outside strings;
 *   - a reader that counts says why;
 *   - the paths a runner's configuration names (YAML, a script, a tasks
 *     file) are relative, never above the workspace root, at most 256. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "effects.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const paths[] = {".vscode/settings.json", ".vscode/tasks.json",
                                        "a.code-workspace",      "lib/site-packages/a.pth",
                                        ".venv/pyvenv.cfg",      ".cargo/config.toml"};
    static const int readers[] = {EFF_READ_VSCODE, EFF_READ_VSCODE, EFF_READ_VSCODE,
                                  EFF_READ_PTH,    EFF_READ_PYVENV, EFF_READ_TOML};
    if (size < 1 || size > (1u << 20))
        return 0;
    unsigned which = data[0] % 6;
    const char *d = (const char *)data + 1;
    size_t n = size - 1;
    const char *nul = memchr(d, 0, n);
    size_t nl = nul ? (size_t)(nul - d) : n;
    char *nw = malloc(nl + 1);
    size_t ol = nul ? n - nl - 1 : 0;
    char *old = malloc(ol + 1);
    if (!nw || !old) {
        free(nw);
        free(old);
        return 0;
    }
    memcpy(nw, d, nl);
    nw[nl] = 0;
    if (ol)
        memcpy(old, nul + 1, ol);
    old[ol] = 0;

    strlist keys = {0};
    strlist_add(&keys, "*path");
    strlist_add(&keys, "chat.*");
    strlist_add(&keys, "target.*.linker");
    strlist_add(&keys, "toolchain.path");
    struct effect_entry e = {.path = paths[which],
                             .kind = nul ? EFF_MODIFIED : EFF_ADDED,
                             .reg = true,
                             .bytes = nl,
                             .data = nw,
                             .len = nl,
                             .old = nul ? old : NULL,
                             .oldlen = ol};
    char why[300];
    if (effect_read_judge(readers[which], &keys, &e, "/w", why, sizeof why) && !*why)
        abort();
    e.link = nw;
    e.reg = false;
    if (effect_read_judge(EFF_READ_VENV_PYTHON, &keys, &e, "/w", why, sizeof why) && !*why)
        abort();
    strlist_free(&keys);

    /* what a runner's configuration names: relative paths, never above
     * the root, capped */
    strlist named = {0};
    effect_runner_paths(EFF_RUNNER_YAML + (int)(data[0] % 4), nw, nl, &named);
    if (named.n > 256)
        abort();
    for (size_t i = 0; i < named.n; i++) {
        const char *p = named.v[i];
        if (!*p || *p == '/' || !strcmp(p, "..") || !strncmp(p, "../", 3) || strstr(p, "/../") ||
            strstr(p, "//"))
            abort();
    }
    strlist_free(&named);

    json_error_t je;
    json_t *plain = json_loadb(nw, nl, 0, &je);
    if (plain) {
        json_t *c = effect_jsonc_load(nw, nl);
        if (!c || !json_equal(plain, c))
            abort();
        json_decref(c);
        json_decref(plain);
    }
    free(nw);
    free(old);
    return 0;
}
