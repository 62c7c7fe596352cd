/* Internals of the policy engine (lib/policy/).
 *
 *   shell.c     walks the tree-sitter-bash syntax tree of a command and
 *               produces every simple command that can run (struct pcmd),
 *               with words resolved as bash would resolve them, and recurses
 *               into wrappers, nested shells, eval, substitutions and
 *               inline interpreter code (its state: walk.h).
 *   beval.c     what bash evaluates besides commands (arithmetic,
 *               subscripts, names, prompts) and whether the engine can
 *               vouch for it; the variables a string assigns.
 *   hidden.c    secrets: the paths the sandbox hides (`hide:`), by
 *               components, and the `secrets:` globs.
 *   rules.c     the policy file (YAML, libyaml): programs, rules, examples.
 *   classify.c  matches rules against the simple commands and combines
 *               their verdicts; the public txbox_policy_check* API.
 *   load.c      loading: the built-in document, --policy, the workspace's
 *               file (read safely, as a tightening layer unless trusted).
 *   arena.c     the per-check bump allocator and small string helpers.
 *
 * Nothing the walker cannot resolve statically is ever reported as plain
 * text: such words carry W_DYN, such commands a detector bit (D_*), and the
 * default policy maps every detector to `uncertain` or `unsafe`. */
#ifndef TXBOX_POL_H
#define TXBOX_POL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "txbox_policy.h"
#include "util.h"

/* ---- arena: one per check, reset between checks ---- */
#define POLICY_ARENA_CAP (64u << 20)
typedef struct arena_chunk arena_chunk;
typedef struct arena {
    arena_chunk *head;
    size_t used_total;
    size_t cap; /* bytes at most; past it allocations fail (walk stops) */
    bool exhausted;
} arena;
void arena_init(arena *a, size_t cap);
void arena_reset(arena *a); /* keeps the first chunk */
void arena_free(arena *a);
/* NULL (and a->exhausted) once the cap is reached. */
void *ar_alloc(arena *a, size_t n);
char *ar_strndup(arena *a, const char *s, size_t n);
char *ar_strdup(arena *a, const char *s);
/* Make room for one more element in the arena array `arr` (n used, `alloc`
 * allocated); false when the arena is exhausted. */
void *ar_grow_copy(arena *a, const void *old, size_t n, size_t elem, size_t *alloc, size_t initial);
#define AR_GROW(ar, arr, alloc, n, initial)                                                        \
    ((n) < (alloc) || ({                                                                           \
         __typeof__(arr) nv_ = ar_grow_copy((ar), (arr), (n), sizeof *(arr), &(alloc), (initial)); \
         if (nv_)                                                                                  \
             (arr) = nv_;                                                                          \
         nv_ != NULL;                                                                              \
     }))

/* ---- limits of a policy file (rules.c) ---- */
#define POLICY_MAX_VALUE 65536u  /* bytes in one string */
#define POLICY_MAX_LIST 4096u    /* entries of one list */
#define POLICY_MAX_DEPTH 32u     /* nesting of the YAML */
#define POLICY_MAX_NODES 200000u /* YAML nodes, an alias counted as what it stands for */
#define POLICY_MAX_ANCHORS 256u
#define POLICY_MAX_RULES 2000u /* command rules, rules on effects, programs: each */
#define POLICY_MAX_EXAMPLES 8192u

/* ---- lists of strings (policy side, malloc'd) ---- */
typedef struct strlist {
    char **v;
    unsigned char *glob; /* glob[i]: STRLIST_GLOB, STRLIST_BORROWED */
    size_t n;
    bool any_glob;
} strlist;
enum {
    STRLIST_GLOB = 1,     /* v[i] has *, ? or [ (else matched with strcmp) */
    STRLIST_BORROWED = 2, /* v[i] is the built-in document's, not freed */
};
void strlist_add(strlist *l, const char *s);
/* The same without a copy: s outlives the list (static data). */
void strlist_add_borrowed(strlist *l, const char *s);
void strlist_free(strlist *l);
bool strlist_has(const strlist *l, const char *s);
/* Does any glob pattern in l match s (fnmatch)? */
bool strlist_glob(const strlist *l, const char *s);

/* ---- the paths the sandbox hides, as the policy reads them (hidden.c) ---- */
#define HIDDEN_MAX_DEPTH 8
typedef struct hidden_ent {
    const char *comp[HIDDEN_MAX_DEPTH]; /* its components (~ and the leading / dropped), in hide's text */
    uint16_t len[HIDDEN_MAX_DEPTH];
    bool glob[HIDDEN_MAX_DEPTH];
    size_t n;
} hidden_ent;
typedef struct hidden_set {
    hidden_ent *v; /* sorted by first component; those with a glob there last */
    size_t n, nlit;
} hidden_set;
void hidden_build(hidden_set *h, const strlist *hide);
void hidden_free(hidden_set *h);
/* Does text s (a path, or a word holding one) name a hidden path or one
 * below it? */
bool hidden_text(const hidden_set *h, const char *s);

/* ---- resolved words ---- */
enum {
    W_DYN = 1 << 0,     /* part of the text is not known statically */
    W_GLOB = 1 << 1,    /* unquoted *, ? or [ (pathname expansion) */
    W_TILDE = 1 << 2,   /* starts with the home directory (~, $HOME) */
    W_FETCH = 1 << 3,   /* made by a substitution that runs a network fetcher */
    W_SUBST = 1 << 4,   /* made (partly) by a command/process substitution */
    W_SYNTH = 1 << 5,   /* dynamic tail cannot escape the static prefix (find's {}) */
    W_SECRETV = 1 << 6, /* expands a variable whose name looks secret */
    W_NUM = 1 << 7,     /* every unknown part is an integer ($#, $((...)), ...) */
    W_UNQDYN = 1 << 8,  /* an unknown part is unquoted: it may split into words and glob */
};
typedef struct pword {
    const char *s; /* resolved text; unknown parts show their source text */
    size_t len;
    unsigned flags;
    size_t dynpos; /* offset of the first unknown byte (len when none) */
} pword;

enum { RD_IN, RD_OUT, RD_APPEND, RD_INOUT, RD_DUP, RD_HEREDOC, RD_HERESTR };
typedef struct predir {
    int op;
    int fd; /* -1: default for op */
    pword target;
} predir;

/* Detector bits: facts the walker found that rules can match (`detector:`). */
enum {
    D_PARSE_ERROR = 1 << 0, /* the syntax tree has errors */
    D_DYN_PROGRAM = 1 << 1, /* the program name is made at run time */
    D_DYN_CODE = 1 << 2,    /* sh -c / eval / source of code not known statically */
    D_REMOTE_CODE = 1 << 3, /* code that comes from a network download */
    D_FORK_BOMB = 1 << 4,
    D_TOO_DEEP = 1 << 5,      /* nesting past TXBOX_POLICY_MAX_DEPTH */
    D_TOO_LARGE = 1 << 6,     /* input or work past the caps */
    D_BAD_INPUT = 1 << 7,     /* NUL byte */
    D_INLINE_CODE = 1 << 8,   /* interpreter given code inline (python -c ...) */
    D_WRAPPER = 1 << 9,       /* this is a wrapper around a command reported apart */
    D_EXEC_ENV = 1 << 10,     /* leading assignment of a variable that changes execution */
    D_PATH_CHANGED = 1 << 11, /* PATH, an alias or a function shadows program lookup */
    D_SCRIPT = 1 << 12,       /* runs a script file or reads commands from stdin */
    D_EMPTY = 1 << 13,        /* nothing runs */
    D_DYN_ARGS = 1 << 14,     /* arguments added at run time (xargs, parallel) */
    D_REMOTE = 1 << 15,       /* runs on another host (ssh host CMD) */
    D_SECRET_IN = 1 << 16,    /* stdin comes from a secret (file or environment) */
    D_FETCH_IN = 1 << 17,     /* stdin comes from a network fetcher */
    D_SECRET_READ = 1 << 18,  /* reads a secret: a secret path, the environment */
    D_DYN_EVAL = 1 << 19,     /* bash evaluates text not known statically (arithmetic,
                               * a subscript, a variable name, a prompt): it can run commands */
};
#define D_COUNT 20
/* What the engine did not understand: never `safe` (rules.c refuses a safe
 * rule on them, classify.c demotes a safe verdict). */
#define D_NOT_UNDERSTOOD                                                                                   \
    (D_PARSE_ERROR | D_DYN_PROGRAM | D_DYN_CODE | D_REMOTE_CODE | D_FORK_BOMB | D_TOO_DEEP | D_TOO_LARGE | \
     D_BAD_INPUT | D_DYN_EVAL)
extern const char *const detector_names[D_COUNT];

enum { CWD_INSIDE, CWD_OUTSIDE, CWD_UNKNOWN };

typedef struct pcmd {
    pword *argv;
    size_t argc;
    predir *redir;
    size_t nredir;
    unsigned det;
    int cwd_kind;    /* where relative paths point */
    const char *cwd; /* CWD_INSIDE: path relative to the workspace ("" = root) */
    const char *via; /* wrappers and shells it was found in ("sudo sh -c"), or "" */
    int depth;
} pcmd;

/* ---- the policy ---- */
enum { PC_INSIDE = 1, PC_OUTSIDE = 2, PC_DEVICE = 4, PC_SCRATCH = 8, PC_NULL = 16, PC_DYNAMIC = 32 };

/* Where a program stops reading options (programs: options_end). */
enum {
    OPTEND_DASHDASH, /* at `--` only: getopt_long permutes, options come anywhere before it */
    OPTEND_OPERAND,  /* at the first operand or `--` (POSIX getopt, awk's program) */
    OPTEND_NEVER,    /* every argument may be one (find's expressions) */
    OPTEND_NONE,     /* it reads no options */
};

typedef struct progspec {
    bool borrowed; /* its strings are the built-in document's (rules.c) */
    char *name;    /* may be a glob */
    strlist options_with_value;
    strlist options_optional_value; /* their value only in the same word (-I[FMT]) */
    strlist options_two_values;     /* the next two words are theirs (jq --arg NAME VALUE) */
    int options_end;                /* OPTEND_* */
    bool leading_operands_only;     /* operands stop at the first option (find) */
    strlist script_operand_unless;  /* first operand is a script unless one of these */
    /* files the program writes, judged as output redirections */
    strlist output_options;    /* their value (sort -o FILE) */
    int output_operand;        /* this operand, from 1 (uniq IN OUT: 2); a number is a descriptor */
    strlist output_assignment; /* NAME=FILE arguments (dd of=FILE) */
    char *output_file;         /* written in the current directory unless stdout is redirected (nohup) */
    uint64_t value_letters[2]; /* short options taking a value, as a bitmap (policy_index_programs) */
    /* wrappers */
    bool wrapper;
    int skip;               /* operands to skip before the command */
    bool assignments;       /* NAME=VALUE operands are skipped (env) */
    strlist stop_flags;     /* with one of these it runs nothing (command -v) */
    strlist command_option; /* option whose value is a shell string (su -c) */
    strlist chdir_option;   /* option whose value is the new cwd (env -C) */
    strlist split_option;   /* option whose value is split into words (env -S) */
    bool join;              /* the command is its words joined by spaces, as shell */
    bool remote;            /* the command runs on another host */
    bool append_args;       /* the command gets more arguments at run time */
    char *until;            /* the command ends at this word (parallel :::) */
    /* shells and interpreters */
    bool shell;
    strlist code_option; /* interpreter: option whose value is code */
    bool code_operand;   /* interpreter: first operand is code (awk) unless -f */
    bool interpreter;
} progspec;

enum { DEC_SAFE = 0, DEC_UNCERTAIN = 1, DEC_UNSAFE = 2, DEC_OFF = 3 };

typedef struct example {
    char *cmd;
    int line;
    bool must_match;
} example;

typedef struct rule {
    bool borrowed; /* its strings are the built-in document's (rules.c) */
    char *id;
    int decision;
    char *reason, *suggestion;
    bool network;
    strlist domains; /* network: the hosts its proxy lets through (empty: the defaults) */
    bool fallback;   /* uncertain, but only when no safe rule matches */
    char *file;
    int line;
    /* matchers: every one given must hold */
    strlist program, subcommand, args_any, args_none, args_all, flags_any, flags_none, operands_any,
        operands_none, via_any, global_args_none, global_args_any, script_none;
    unsigned operand_class_any, last_operand_class, redirect_class_any;
    unsigned detector;
    int max_operands; /* -1: no limit */
    int min_operands;
    bool allow_dynamic_args;
    int secret_args, secret_input; /* -1 unset, 0/1 */
    example *ex;
    size_t nex;
    /* an external effect and its compensation (lib/tx/saga.c) */
    bool external;
    char *compensate, *capture;
} rule;

/* Exact program name -> the rules that name it (built after loading). */
typedef struct progidx {
    const char *name;
    uint32_t *rules;
    size_t n;
} progidx;

struct txbox_policy {
    rule *rules;
    size_t nrules, arules; /* arules: allocated */
    progidx *pidx;         /* a hash table of npidx slots (a power of two); name NULL: empty */
    size_t npidx;
    uint32_t *pidx_rules; /* the slots' rules, one array */
    progspec *progs;
    size_t nprogs, aprogs;
    uint32_t *prog_order; /* progs' indices: literal names sorted, then globs (policy_index_programs) */
    size_t nprog_lit, nprog_order;
    strlist fetchers, secrets, secret_programs, harmless_env, null_paths, scratch_paths;
    strlist not_secrets;         /* `secrets:` entries given as !GLOB: exceptions */
    hidden_set hidden;           /* hide, indexed (hidden.c) */
    strlist hide;                /* paths hidden from every command (absolute, or ~/ for $HOME) */
    struct effect_rule *effects; /* rules on effects (effect_rules.h), in file order */
    size_t neffects;
    char *workspace; /* absolute, no trailing slash; NULL: unknown */
    char *ws_alias;  /* the workspace as spelled under $HOME when $HOME is a symlink, or NULL */
    char *home;      /* $HOME as commands see it (absolute, normalized); NULL: unknown */
    char *home_real; /* its real path, when it differs */
    /* The workspace's own policy file (load.c). Untrusted, it is read as a
     * layer: a second policy (the user's, plus what the workspace adds
     * within the limits of policy_parse_layer) whose verdict can only
     * raise this one's (txbox_policy_check takes the worse of the two). */
    int ws_mode;                /* TXBOX_WS_POLICY_* */
    bool ws_trusted;            /* `workspace_policy: trusted` in the user's file */
    struct txbox_policy *layer; /* NULL: none */
    strlist notes;              /* what the workspace policy was refused, one line each */
    /* $PATH (at load) has an entry that is relative or in the workspace:
     * a program name may run a workspace file */
    bool path_in_workspace;
    /* per-check scratch reused when free (trylock): parser + arena */
    pthread_mutex_t lock;
    void *parser;
    arena ar;
};

/* rules.c */
int policy_parse_yaml(txbox_policy *p, const char *text, size_t len, const char *file, txbox_error *err);
/* The same for a workspace's untrusted policy, read on top of p (the
 * user's policy): only what can raise a verdict or hold more is taken
 * (uncertain and unsafe rules and effect rules that hold or roll back,
 * with new ids; more fetchers, secrets and secret programs; specs of
 * programs p does not describe); everything else is left out and noted
 * in refused, one line each ("policy FILE:LINE: ..."). */
int policy_parse_layer(txbox_policy *p, const char *text, size_t len, const char *file, strlist *refused,
                       txbox_error *err);
/* The id of the built-in effect rule that holds every change to a
 * workspace policy file (policy/default.yaml); no policy file can
 * replace it or switch it off. */
#define POLICY_FILE_EFFECT "workspace-policy-changed"
/* The same, from the built-in document (pdoc.h; static data); its
 * content regexes are compiled at first use (effects_compile). The
 * policy borrows the document's strings, and file: both must outlive it
 * (static data). */
struct pdoc;
int policy_parse_doc(txbox_policy *p, const struct pdoc *doc, const char *file, txbox_error *err);
void policy_clear(txbox_policy *p);
/* examples.c: the examples of every rule (command rules, effect rules). */
int policy_check_examples(const txbox_policy *p, txbox_error *err);
void policy_build_index(txbox_policy *p);
/* Has search path `path` an empty, relative or in-workspace entry? */
bool path_reaches_workspace(const char *path, const char *ws);
/* examples.c: checks every example; with f, reports every failure there
 * (and goes on). */
int policy_examples_report(const txbox_policy *p, FILE *f, txbox_error *err);
/* The examples of the rules from index `from` on (a layer's own rules). */
int policy_check_examples_from(const txbox_policy *p, size_t from, txbox_error *err);
/* The `effects:` list of a policy file (rules.c); freeing them. */
void policy_effects_clear(txbox_policy *p);
/* txbox_policy_load with a choice of which examples to check: none, all
 * (the built-in rules' too), or all when a policy file was read besides the
 * built-in one (txbox_policy_load's choice). */
enum policy_examples { POLICY_EXAMPLES_NONE, POLICY_EXAMPLES_IF_FILES, POLICY_EXAMPLES_ALWAYS };
int policy_load(const char *user_file, const char *workspace_dir, enum policy_examples examples,
                txbox_policy **out, txbox_error *err);

/* hidden.c: is text s a secret: a `secrets:` glob (not an exception) or a
 * hidden path? */
bool policy_secret_text(const txbox_policy *p, const char *s);
/* Is path (absolute, normalized) in another user's home (hidden whole)? */
bool in_other_home(const txbox_policy *p, const char *path);
/* After the last file: the exceptions apart, the hidden paths indexed. */
void policy_finish_secrets(txbox_policy *p);
/* words.c: the programs' value letters indexed (progspec.value_letters). */
void policy_index_programs(txbox_policy *p);
/* Does short option letter ch of program ps take a value (the rest of its
 * word, or the next)? */
bool takes_value(const progspec *ps, char ch);
/* words.c: the rest of path (absolute, normalized) below the workspace
 * ("" for the workspace itself), under its real path or as spelled
 * through $HOME; NULL when it is not there. */
const char *ws_rel(const txbox_policy *p, const char *path);

/* shell.c: fills *cmds (arena) with every simple command of src. */
typedef struct pcmds {
    pcmd *v;
    size_t n, alloc;
} pcmds;
void shell_walk(const txbox_policy *p, void *parser, arena *ar, const char *src, size_t len, pcmds *out);
void shell_walk_argv(const txbox_policy *p, void *parser, arena *ar, char *const *argv, pcmds *out);
void *shell_parser_new(void);
void shell_parser_free(void *parser);

/* sed.c: what a sed script does besides printing. */
enum { SED_EXEC, SED_WRITE, SED_READ };
typedef struct sed_effect {
    int kind;
    const char *arg; /* in the script: the command (empty: the pattern space) or file */
    size_t len;
} sed_effect;
/* The effects of script s (at most max in out): their number, or -1 when
 * the script is not understood (or has more than max). */
int sed_effects(const char *s, size_t n, sed_effect *out, size_t max);

/* words.c: what the reader and the classifier both know of words */
/* The spec of program name (exact, else the first glob that matches), or
 * NULL. */
const progspec *policy_prog(const txbox_policy *p, const char *name);
/* getopt_long's reading of arg ("--name" or "--name=value") against opts
 * (NULL-terminated, each "--name", "--name=" when it takes a value): the
 * option it names (its exact spelling, else the only one it is a prefix
 * of), or NULL when it is unknown or ambiguous. */
const char *long_option(const char *arg, const char *const *opts);
/* Lexically normalize an absolute path into out (size >= strlen(in)+2). */
void norm_abs(const char *in, char *out);
/* Is name a shell builtin (never looked up in $PATH)? Those the default
 * rules name. */
bool shell_builtin(const char *name);

/* classify.c */
unsigned path_class(const txbox_policy *p, const pcmd *c, const pword *w);
int classify_cmds(const txbox_policy *p, const pcmds *cmds, txbox_verdict *out, const rule **winner_out);
/* Does rule r match simple command c? */
bool rule_matches(const txbox_policy *p, const rule *r, const pcmd *c);
const char *basename_of(const char *s);
void policy_dump(const txbox_policy *p, const char *cmd, size_t len, FILE *f);

#endif
