/* Rules on effects (issue 9): policy rules that judge what a transaction
 * actually wrote (its scanned write set), before its commit point, not the
 * command text. See effects.c and docs/policy.md ("Rules on effects"). */
#ifndef TXBOX_EFFECTS_H
#define TXBOX_EFFECTS_H

#include <regex.h>
#include <stdint.h>

#include <jansson.h>

#include "policy/pol.h"
#include "tx.h"

/* EFF_ATTENTION: commits, and the result and the audit log say so */
enum { EFF_ROLLBACK = 0, EFF_HOLD = 1, EFF_OFF = 2, EFF_ATTENTION = 3 };
/* effect_rule.git: judged by git's reading (gitcfg.c), not by entries */
enum { EFF_GIT_NONE = 0, EFF_GIT_CONFIG = 1, EFF_GIT_HOOKS = 2 };

struct gitcfg_ctx;

/* One example write set of an effect rule (checked at load). */
typedef struct effect_example {
    strlist written;   /* paths added */
    strlist deleted;   /* paths deleted */
    int64_t ndeleted;  /* ... or this many files (-1: unset) */
    char *deleted_in;  /* ... in this directory (NULL: deleted/) */
    int64_t bytes;     /* size of each written file (-1: its content's) */
    bool binary, executable;
    char *content;     /* content of each written file (NULL: empty) */
    int line;
    bool must_match;
} effect_example;

typedef struct effect_rule {
    bool borrowed; /* its strings are the built-in document's (rules.c) */
    char *id, *reason, *suggestion, *file;
    int line;
    int action; /* EFF_ROLLBACK, EFF_HOLD, EFF_OFF, EFF_ATTENTION */
    int git;    /* EFF_GIT_*: match {git: config|hooks}, alone */
    /* matchers: every one given must hold for an entry to count */
    strlist paths_any, paths_written, paths_deleted; /* globs (see effect_glob) */
    strlist paths_none;   /* ... and an entry matching one of these never counts */
    strlist content_any;  /* POSIX extended regular expressions */
    regex_t *re;          /* compiled content_any */
    /* one pass instead of one per pattern: the patterns without and with
     * (?i), each set joined as one alternation (REG_NOSUB); an entry no
     * set matches matches no pattern. has_pre[k]: set k was compiled (a set
     * with a back-reference, or one that does not compile joined, has none
     * and its patterns are always tried one by one) */
    regex_t pre[2];
    bool has_pre[2], pre_needed[2];
    bool multiline; /* a pattern holds a newline: it may match across lines */
    bool pre_done; /* prefilters compiled (at the first entry the literal
                    * filter lets through; the built-in rules' patterns one
                    * by one at the first entry a prefilter lets through) */
    /* The literal filter, before any regular expression (effect_lit_build):
     * strings of which every match of some content_any pattern holds one
     * (lit_icase[i]: compared ignoring ASCII case, stored in lower case).
     * An entry whose searched content holds none of them cannot match,
     * and no pattern is compiled or run for it. lit_ok: every pattern gave
     * such strings (else the filter is not used). */
    char **lit;
    unsigned char *lit_icase;
    size_t lit_n;
    bool lit_ok, lit_done;
    /* limits over the entries that count (-1: none) */
    int64_t max_files_deleted, max_bytes_written, max_binary_added, max_made_executable;
    effect_example *ex;
    size_t nex;
} effect_rule;

/* Build r's literal filter (lit, lit_icase, lit_n, lit_ok) from its
 * content_any patterns; idempotent. */
void effect_lit_build(effect_rule *r);
/* False only when no content_any pattern of r can match in d[0, n): the
 * literal filter's verdict (true when r has no usable filter). */
bool effect_lit_may_match(const effect_rule *r, const char *d, size_t n);

/* Does path (relative to the workspace, no leading "/") match glob? A
 * pattern without '/' matches the last component at any depth; with one it
 * is anchored at the workspace root. '*', '?' and '[...]' stay inside one
 * component; a component "**" matches any number of them (zero included). */
bool effect_glob(const char *glob, const char *path);

/* Compiles a rule's content_any (at load); the message names the pattern. */
int effect_rule_compile(effect_rule *r, char *msg, size_t msglen);
void effect_rule_free(effect_rule *r);
/* Checks every example of every effect rule of p. */
int effects_check_examples(const txbox_policy *p, txbox_error *err);

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
                             const struct gitcfg_ctx *gc, json_t **verdict, json_t **attention,
                             txbox_error *err);

/* Holds transaction id: its scanned upper stays in tx/ID/upper, and
 * tx/ID/held records what approve needs (base generation, write set,
 * audit info, verdict). The caller holds the workspace lock. */
MUST_CHECK int effects_hold(txbox_ws *ws, uint64_t id, int txfd, uint64_t base_gen,
                            const struct tx_ops *ops, const char *info, const json_t *verdict,
                            txbox_error *err);

/* run.c, after the conflict check of a single run: 0: commit it; 1:
 * decided, r's outcome rejected or held (the held record written, the
 * upper to be kept); <0: error. durable: the scan's entries still to be
 * made durable (scan_upper), synced before a hold; may be NULL. hctx: the
 * audit context (store_context). */
struct fs_syncset;
MUST_CHECK int effects_gate_run(txbox_ws *ws, const txbox_policy *p, struct txbox_result *r, int txfd,
                                int upperfd, uint64_t base_gen, const struct tx_ops *ops,
                                struct fs_syncset *durable, const char *hctx,
                                const struct gitcfg_ctx *gc, txbox_error *err);

/* txbox review / approve / reject. *json: the result object (caller frees);
 * *status: the CLI exit status. review with id NULL lists every held
 * transaction. */
MUST_CHECK int effects_review(txbox_ws *ws, const char *id, char **json, txbox_error *err);
MUST_CHECK int effects_approve(txbox_ws *ws, const char *id, char **json, int *status,
                               txbox_error *err);
MUST_CHECK int effects_reject(txbox_ws *ws, const char *id, char **json, txbox_error *err);

/* Is tx/ID (txfd) a held transaction, still waiting? */
bool effects_is_held(txbox_ws *ws, int txfd, const char *id);

#endif
