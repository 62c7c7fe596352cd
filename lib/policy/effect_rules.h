/* Rules on effects, the policy side (see effect_rules.c): the rules of a
 * policy file's `effects:`, compiled and checked when it loads, and the
 * judge that matches them against the entries of a write set. Walking a
 * transaction's write set, holding and approving: lib/tx/effects.h. */
#ifndef TXBOX_POLICY_EFFECT_RULES_H
#define TXBOX_POLICY_EFFECT_RULES_H

#include <regex.h>
#include <stdint.h>

#include <jansson.h>

#include "pol.h"

/* effect_rule.reader: the content readers (effect_read.c) */
enum {
    EFF_READ_NONE = 0,
    EFF_READ_VSCODE,
    EFF_READ_PTH,
    EFF_READ_PYVENV,
    EFF_READ_VENV_PYTHON,
    EFF_READ_TOML
};

/* EFF_ATTENTION: commits, and the result and the audit log say so;
 * EFF_ASK: holds when a person can answer now (txbox_run_opts.interactive),
 * else commits as EFF_ATTENTION does */
enum { EFF_ROLLBACK = 0, EFF_HOLD = 1, EFF_OFF = 2, EFF_ATTENTION = 3, EFF_ASK = 4 };
/* effect_rule.git: judged by git's reading (gitcfg.c), not by entries */
enum { EFF_GIT_NONE = 0, EFF_GIT_CONFIG = 1, EFF_GIT_HOOKS = 2 };

/* The kinds of loss a commit can cause (lib/tx/losses.h measures them;
 * docs/guarantees.md, "Losses"), in the order of effect_loss_kinds. */
enum {
    EFF_LOSS_UNCOMMITTED, /* a tracked file's changes, in neither HEAD nor the index */
    EFF_LOSS_UNTRACKED,   /* an untracked, not ignored file */
    EFF_LOSS_STAGED,      /* staged changes dropped from the index */
    EFF_LOSS_STASH,       /* stash entries dropped */
    EFF_LOSS_HISTORY,     /* commits no ref, reflog or stash reaches any more */
    EFF_LOSS_BRANCH,      /* a branch deleted or moved off commits no other ref has */
    EFF_LOSS_REPOSITORY,  /* a repository's .git removed */
    EFF_LOSS_DATABASE,    /* a database file rewritten or shrunk */
    EFF_LOSS_KINDS
};
extern const char *const effect_loss_kinds[EFF_LOSS_KINDS];
/* The kind named s, or -1. */
int effect_loss_kind(const char *s);
/* What a rule's `losses:` matcher counts when it does not say: the agent's
 * own work (see struct effect_loss) younger than this does not count. */
#define EFF_LOSS_GRACE_DEFAULT 3600

/* One example write set of an effect rule (checked at load). */
typedef struct effect_example {
    strlist written;  /* paths added */
    strlist deleted;  /* paths deleted */
    int64_t ndeleted; /* ... or this many files (-1: unset) */
    char *deleted_in; /* ... in this directory (NULL: deleted/) */
    int64_t bytes;    /* size of each written file (-1: its content's) */
    bool binary, executable;
    char *content;     /* content of each written file (NULL: empty) */
    unsigned lost;     /* losses: one item of each kind in this mask (a person's work) */
    unsigned own_lost; /* ... and of these kinds, the agent's own work of a minute ago */
    int line;
    bool must_match;
} effect_example;

typedef struct effect_rule {
    bool borrowed; /* its strings are the built-in document's (rules.c) */
    char *id, *reason, *suggestion, *file;
    int line;
    int action; /* EFF_ROLLBACK, EFF_HOLD, EFF_OFF, EFF_ATTENTION */
    int git;    /* EFF_GIT_*: match {git: config|hooks}, alone */
    /* match {losses: [kinds]}: the losses of the commit (lib/tx/losses.h)
     * of these kinds (a mask of 1 << EFF_LOSS_*; 0: not a losses rule),
     * with paths_any and paths_none over the items' paths; an item that is
     * the agent's own work younger than losses_grace seconds (0: every
     * item counts) does not count */
    unsigned losses;
    int64_t losses_grace;
    /* matchers: every one given must hold for an entry to count */
    strlist paths_any, paths_written, paths_deleted; /* globs (see effect_glob) */
    strlist paths_none;                              /* ... and an entry matching one of these never counts */
    strlist content_any;                             /* POSIX extended regular expressions */
    strlist home_written;                            /* globs relative to the home directory (anchored):
                                                      * the entry, added or modified, lies in it */
    int reader;                                      /* EFF_READ_*: what the new content means
                                                      * (effect_read.c); 0: none */
    bool files_only;                                 /* a directory entry never counts (its files do) */
    bool runner_scripts;                             /* the entry is a file the workspace's hook
                                                      * runners name (effect_judge.scripts) */
    strlist keys;                                    /* the reader's settings that name programs
                                                      * (globs over dotted names, ignoring case) */
    regex_t *re;                                     /* compiled content_any */
    /* one pass instead of one per pattern: the patterns without and with
     * (?i), each set joined as one alternation (REG_NOSUB); an entry no
     * set matches matches no pattern. has_pre[k]: set k was compiled (a set
     * with a back-reference, or one that does not compile joined, has none
     * and its patterns are always tried one by one) */
    regex_t pre[2];
    bool has_pre[2], pre_needed[2];
    bool multiline; /* a pattern holds a newline: it may match across lines */
    bool pre_done;  /* prefilters compiled (at the first entry the literal
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
    /* the search for all of them in one pass (effect_lit.c): the pairs of
     * bytes they hold in their first lit_min - 1 places, in both cases
     * where compared without (65536 bits; NULL: one memmem per string) */
    uint64_t *lit_pairs;
    size_t lit_min;
    bool lit_ok, lit_done;
    /* each glob's longest run of plain bytes (effect_rules.c), for
     * paths_any, paths_written, paths_deleted, paths_none; built with the
     * literal filter (effects_compile); NULL: found at each match */
    struct effect_run {
        unsigned short off, len;
        bool fold;        /* compared ignoring ASCII case (a (?i) glob) */
        uint64_t mask[2]; /* its bytes, in ASCII lower case, mod 128 */
    } * runs[4];
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

/* ---- the judge: entries in, verdict out (effect_rules.c) ---- */

/* an entry's kind */
enum { EFF_ADDED, EFF_MODIFIED, EFF_DELETED };

struct effect_entry {
    const char *path;
    int kind;
    bool dir, reg;
    uint64_t bytes;   /* added or modified regular file: its size */
    bool binary;      /* added regular file with a NUL byte in its first bytes */
    bool made_exec;   /* regular file executable now, and not before */
    const char *data; /* new content (first bytes), or NULL */
    size_t len;
    const char *old; /* modified: the old content (first bytes), or NULL */
    size_t oldlen;
    const char *link; /* a symbolic link added or modified: its target, or NULL */
    bool alias;       /* the same entry again, under the name of a root link to
                       * its place (lib/tx/effects.c): no limit counts it */
    /* windowed: a new match can only be in data[from, to) (content_window:
     * a modified file's lines that the old content does not share) */
    bool windowed;
    size_t from, to;
};

/* One loss of a commit (lib/tx/losses.h), for the rules with `losses:`.
 * own: the destroyed content is the agent's own work, written by txbox
 * transactions from a file that was absent or clean (as git has it) and
 * last age_s seconds ago. */
struct effect_loss {
    int kind; /* EFF_LOSS_* */
    const char *path;
    uint64_t bytes;
    bool own;
    double age_s;
};

/* what one rule counted (effect_judge.acc[i] for p->effects[i]) */
struct effect_acc {
    json_t *paths;
    size_t npaths;
    int64_t deleted, bytes, binary, exec;
    uint64_t lost_n, lost_bytes; /* a losses rule: the items it counted */
    unsigned lost_kinds;
    uint32_t lost_of[EFF_LOSS_KINDS]; /* ... by kind */
    bool hit;
    char *detail; /* a git rule: what git's reading found */
};

/* A judge over the effect rules of p: init, feed every entry, end. */
struct effect_judge {
    const txbox_policy *p;
    json_t *attention; /* effect_judge_end: the violated attention rules (NULL: none) */
    struct effect_acc *acc;
    bool need_content;
    /* where the workspace lies (effect_judge_places): its absolute path,
     * and the home directory's place relative to it (home_in_ws: the home
     * directory inside the workspace, "" when it is the workspace; or
     * ws_in_home: the workspace inside the home directory); NULL: unknown
     * or unrelated */
    const char *ws_path;
    char *home_in_ws, *ws_in_home;
    /* the files the workspace's hook runners name as programs (borrowed;
     * NULL: none): runner_scripts */
    const strlist *scripts;
};

/* Builds the literal filters of p's rules that have none yet (the built-in
 * ones, at their first use); thread-safe. */
void effects_compile(const txbox_policy *p);
void effect_judge_init(struct effect_judge *j, const txbox_policy *p);
/* Where the workspace lies (ws: its absolute path, home: the user's home
 * directory, both resolved; either may be NULL): for home_written and the
 * readers that tell inside from outside. Before the first feed. */
void effect_judge_places(struct effect_judge *j, const char *ws, const char *home);
/* Counts e for every rule whose matchers it passes (not the git rules, not
 * the losses rules). */
void effect_judge_feed(struct effect_judge *j, const struct effect_entry *e);
/* Counts l for every rule with `losses:` whose matchers it passes. */
void effect_judge_loss(struct effect_judge *j, const struct effect_loss *l);
/* Does p have a rule with `losses:` that is not off? */
bool effects_want_losses(const txbox_policy *p);
/* The verdict (NULL: no rule violated): the first violated rollback rule,
 * else the first violated hold rule, else the first violated ask rule
 * (action "ask": the caller holds or commits); j->attention gets the
 * violated attention rules (the caller owns it). Frees the accumulators. */
json_t *effect_judge_end(struct effect_judge *j);
/* effect_judge_end, the verdict and the attention list dropped. */
void effect_judge_end_free(struct effect_judge *j);

/* ---- the content readers (effect_read.c) ---- */

/* The reader named name (EFF_READ_*), or -1. */
int effect_reader_id(const char *name);
/* Does e's change make a host program run something it did not before
 * (the reader's meaning of the file: docs/policy.md)? true, with what in
 * why (a setting's name, a line: never a value); also true when the new
 * content cannot be read whole or parsed (fail closed). ws: the workspace's
 * absolute path (NULL: unknown: every absolute path counts as inside). */
bool effect_read_judge(int reader, const strlist *keys, const struct effect_entry *e, const char *ws,
                       char *why, size_t whylen);
/* what a runner's configuration is (effect_runner_paths) */
enum { EFF_RUNNER_YAML = 1, EFF_RUNNER_SHELL, EFF_RUNNER_TASKS, EFF_RUNNER_AGENT };
/* The workspace files that a hook runner's configuration (d, n bytes)
 * names as programs to run, relative to the workspace root, added to out
 * (capped): words of its commands that are paths (with a '/' or a
 * script's extension). EFF_RUNNER_YAML: pre-commit's and lefthook's
 * configuration (entry, args, run, command, script); EFF_RUNNER_SHELL: a
 * script (husky's hooks); EFF_RUNNER_TASKS: VS Code's tasks.json, when a
 * task runs at folder open (every task's command and args);
 * EFF_RUNNER_AGENT: an agent CLI's settings or MCP configuration (JSON:
 * every command and args, the credential helpers). A word that starts
 * with the project's directory (${workspaceFolder}, $CLAUDE_PROJECT_DIR,
 * $GEMINI_PROJECT_DIR) is the path after it. */
void effect_runner_paths(int kind, const char *d, size_t n, strlist *out);
/* JSON with comments (VS Code's JSONC: line and block comments, trailing
 * commas) into jansson; NULL when it is not that. Whitespace alone is {}. */
json_t *effect_jsonc_load(const char *d, size_t n);

#endif
