/* Rules on effects (issue 9): policy rules that judge what a transaction
 * actually wrote (its scanned write set), before its commit point, not the
 * command text. See docs/policy.md ("Rules on effects"). The rules and the
 * judge are policy work (policy/effect_rules.h); here the transaction
 * side: the write set walked (effects.c), and held transactions with
 * review, approve and reject (held.c). */
#ifndef TXBOX_EFFECTS_H
#define TXBOX_EFFECTS_H

#include <stdint.h>

#include <jansson.h>

#include "policy/effect_rules.h"
#include "policy/pol.h"
#include "tx.h"

struct gitcfg_ctx;
struct losses;

/* The verdict on a write set: NULL, or a JSON object {effect_rule, action
 * ("rollback"|"hold"), reason, suggestion, paths, violations:[...]}.
 * upperfd: the scanned upper (the new contents); wsfd: the workspace (the
 * old ones); gc: where git can read the after state, for the rules with
 * `git:` (NULL: those rules count as violated whenever the write set
 * holds a file git may read as configuration: fail closed). The rule that
 * decides is the first violated rollback rule, else the first violated
 * hold rule. *attention (when not NULL): NULL, or an array of
 * {effect_rule, reason, paths} of the violated attention rules, which
 * never stop a commit. */
MUST_CHECK int effects_judge(const txbox_policy *p, int upperfd, int wsfd, const struct tx_ops *ops,
                             const struct gitcfg_ctx *gc, const struct losses *ls, json_t **verdict,
                             json_t **attention, txbox_error *err);
/* A verdict whose action is `ask` where no person can answer: not a stop;
 * added to *attention (made when NULL) with the rule's reason and paths,
 * and freed. false (verdict untouched) for any other action. */
bool effects_ask_unanswered(json_t *verdict, json_t **attention);

/* Holds transaction id: its scanned upper stays in tx/ID/upper, and
 * tx/ID/held records what approve needs (base generation, write set,
 * audit info, verdict). The caller holds the workspace lock. */
MUST_CHECK int effects_hold(txbox_ws *ws, uint64_t id, int txfd, uint64_t base_gen, const struct tx_ops *ops,
                            const char *info, const json_t *verdict, txbox_error *err);

/* run.c, after the conflict check of a single run: 0: commit it; 1:
 * decided, r's outcome rejected or held (the held record written, the
 * upper to be kept); <0: error. durable: the scan's entries still to be
 * made durable (scan_upper), synced before a hold; may be NULL. hctx: the
 * audit context (store_context). ls: the commit's losses (losses.h), for
 * the rules with `losses:` (NULL: none measured). A violated rule with
 * action ask holds when interactive (a person can answer now), else the
 * commit goes on and the rule is listed in r->attention. */
struct fs_syncset;
struct losses;
MUST_CHECK int effects_gate_run(txbox_ws *ws, const txbox_policy *p, struct txbox_result *r, int txfd,
                                int upperfd, uint64_t base_gen, const struct tx_ops *ops,
                                struct fs_syncset *durable, const char *hctx, const struct gitcfg_ctx *gc,
                                const struct losses *ls, bool interactive, txbox_error *err);

/* txbox_review, txbox_approve, txbox_reject: include/txbox.h (held.c). */

/* Is tx/ID (txfd) a held transaction, still waiting? */
bool effects_is_held(txbox_ws *ws, int txfd, const char *id);

#endif
