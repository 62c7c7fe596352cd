/* The examples of a policy's rules, checked when it loads: each command
 * example is read (shell.c) and matched (classify.c) against its rule;
 * the effect rules' examples are judged (effect_rules.c). */
#include <stdio.h>
#include <string.h>

#include "effect_rules.h"
#include "pol.h"

int policy_check_examples(const txbox_policy *p, txbox_error *err)
{
    if (policy_examples_report(p, NULL, err) < 0)
        return -1;
    return effects_check_examples(p, err);
}

static int examples_report(const txbox_policy *p, size_t from, FILE *f, txbox_error *err);

int policy_check_examples_from(const txbox_policy *p, size_t from, txbox_error *err)
{
    return examples_report(p, from, NULL, err);
}

int policy_examples_report(const txbox_policy *p, FILE *f, txbox_error *err)
{
    return examples_report(p, 0, f, err);
}

/* Examples say what a rule matches wherever txbox runs: they are read in
 * a neutral place, whatever the workspace, $HOME and $PATH are here (rm -rf
 * ../x is outside the workspace, unless the workspace's parent were /tmp). */
static int examples_report(const txbox_policy *real, size_t from, FILE *f, txbox_error *err)
{
    txbox_policy neutral = *real;
    neutral.workspace = neutral.ws_alias = neutral.home_real = NULL;
    neutral.home = (char *)"/home/user";
    neutral.path_in_workspace = false;
    const txbox_policy *p = &neutral;
    void *parser = shell_parser_new();
    if (!parser)
        return tx_err(err, EINVAL, "tree-sitter-bash: language version mismatch");
    arena ar;
    arena_init(&ar, 64u << 20);
    int rc = 0;
    for (size_t i = from; i < p->nrules && (rc == 0 || f); i++) {
        const rule *r = &p->rules[i];
        if (r->decision == DEC_OFF)
            continue;
        for (size_t j = 0; j < r->nex && (rc == 0 || f); j++) {
            const example *e = &r->ex[j];
            pcmds cmds;
            arena_reset(&ar);
            shell_walk(p, parser, &ar, e->cmd, strlen(e->cmd), &cmds);
            bool hit = false;
            for (size_t k = 0; k < cmds.n && !hit; k++)
                hit = rule_matches(p, r, &cmds.v[k]);
            if (hit != e->must_match && f) {
                fprintf(f, "policy %s:%d: rule %s: example '%s' %s\n", r->file, e->line, r->id, e->cmd,
                        e->must_match ? "must match but does not" : "must not match but does");
                policy_dump(real, e->cmd, strlen(e->cmd), f);
                rc = -1;
            } else if (hit != e->must_match)
                rc = tx_err(err, EINVAL, "policy %s:%d: rule %s: example '%s' %s", r->file, e->line, r->id,
                            e->cmd, e->must_match ? "must match but does not" : "must not match but does");
        }
    }
    arena_free(&ar);
    shell_parser_free(parser);
    return rc;
}
