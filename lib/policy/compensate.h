/* The template language of a rule's `compensate:` (see compensate.c):
 * checked when a policy loads, rendered in two stages by the sagas
 * (saga.c): the operands and options when the command is classified, the
 * captures after it ran. */
#ifndef TXBOX_POLICY_COMPENSATE_H
#define TXBOX_POLICY_COMPENSATE_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>

#include "pol.h"

#define COMP_MAX_RENDERED (64u << 10) /* bytes of a rendered compensation */

/* COMP_CHECK: the template alone (load); COMP_WORDS: the operands and
 * options of a classified command (stage 1); COMP_CAPTURE: the captures in
 * its output (stage 2). */
enum { COMP_CHECK, COMP_WORDS, COMP_CAPTURE };

struct comp_ctx {
    int stage;
    size_t ngroups;        /* COMP_CHECK: groups of the capture regex */
    bool has_capture;      /* COMP_CHECK: the rule has a capture regex */
    const txbox_policy *p; /* COMP_WORDS */
    const pcmd *c;
    const char *out; /* COMP_CAPTURE: the command's standard output */
    regmatch_t *m;
    size_t nm;
};

/* Renders tpl into b (a dbuf capped at COMP_MAX_RENDERED) for t->stage;
 * -1 with why on an unknown value or a malformed template. Literal braces:
 * written doubled at COMP_WORDS (stage 2 reads the template again), single
 * at COMP_CAPTURE. */
int comp_render(struct comp_ctx *t, const char *tpl, dbuf *b, char *why, size_t wn);

/* Checks a rule's compensate template and capture regex (either may be
 * NULL) when the policy loads; on error writes one line into why. */
int comp_rule_check(const char *compensate, const char *capture, char *why, size_t n);

#endif
