/* The shell reader's state (shell.c), shared with what it asks of bash's
 * own evaluation (beval.c): the variables a string assigns, their
 * attributes, where the current directory is, the context of a command. */
#ifndef TXBOX_WALK_H
#define TXBOX_WALK_H

#include <tree_sitter/api.h>

#include "pol.h"

/* Attributes a string gives a variable (declare -i, -n, -A). */
enum { VA_INT = 1, VA_REF = 2, VA_ASSOC = 4 };

typedef struct var {
    const char *name;
    const char *val; /* NULL: unknown */
    size_t len;
    bool fetch;
    bool num;     /* unknown, but an integer (an arithmetic result, $#...) */
    uint8_t attr; /* VA_* */
} var;

typedef struct func {
    const char *name;
    const char *body; /* source text, re-parsed at each call */
    bool alias;
} func;

typedef struct wstate {
    var *vars;
    size_t nvars, avars;
    int cwd_kind;
    const char *cwd;
    int old_kind;    /* OLDPWD, where `cd -` and ~- go (CWD_UNKNOWN until a cd) */
    const char *old; /* as cwd */
    bool path_changed;
    bool env_changed; /* an exported variable that changes how programs run was set */
    pword *pos;       /* positional parameters $1.. (NULL: unknown) */
    size_t npos;
} wstate;

typedef struct ctx {
    const char *stdin_text; /* static stdin, or NULL */
    size_t stdin_len;
    unsigned stdin_det; /* D_FETCH_IN | D_SECRET_IN */
    bool concurrent;    /* in a pipeline or in the background */
    const predir *redir;
    size_t nredir;
    const char *via;
    bool remote;
} ctx;

typedef struct W {
    const txbox_policy *p;
    TSParser *parser;
    arena *ar;
    pcmds *out;
    wstate st;
    func *funcs;
    size_t nfuncs, afuncs;
    const char **inlining; /* function names being expanded */
    size_t ninlining;
    const char **dl; /* basenames of files downloaded earlier */
    size_t ndl;
    size_t nodes, parsed;
    int depth;      /* nesting of sources (sh -c, eval, functions, substitutions) */
    int node_depth; /* recursion depth within one syntax tree */
    uint64_t deadline;
    uint64_t ticks; /* progress callbacks of tree-sitter, all parses of one check */
    bool stopped;
    bool ifs_changed; /* IFS assigned: field splitting is not known */
    bool parse_error_seen;
    const char *src; /* source of the tree being walked */
} W;

#define MAX_VALUE (64u * 1024u) /* a variable's value the walker keeps */

/* beval.c: the variables a string assigns */
const var *get_var(W *w, const char *name, size_t n);
/* Assigns name: val (len bytes), or unknown (val NULL; num: an integer).
 * The attributes stay. */
void set_var(W *w, const char *name, const char *val, size_t len, bool fetch, bool num);
/* Adds attributes (VA_*) to name, keeping its value. */
void var_attr(W *w, const char *name, size_t n, uint8_t attr);

/* beval.c: is name (n bytes) a variable bash keeps an integer, whatever
 * the environment holds ($#, $?, RANDOM, LINENO...)? */
bool int_special(const char *name, size_t n);
/* beval.c: what bash evaluates, and whether the engine knows it is
 * harmless. Each returns true when evaluating the text runs nothing and
 * reads nothing the engine does not know. */
/* s is shell source ($x, $(...), quotes still in it) when src, else a
 * value (text bash evaluates as it is); assignments in it (x=1, x++) leave
 * an integer in x. */
bool arith_ok(W *w, const char *s, size_t n, bool src, int depth);
/* A variable name bash takes as one (read NAME, printf -v NAME, test -v):
 * NAME or NAME[SUBSCRIPT] with a harmless subscript. */
bool name_ok(W *w, const char *s, size_t n);
bool word_name_ok(W *w, const pword *pw);
/* The text between ${ and } (its substring offsets, subscripts, ${!x},
 * ${x@P}). */
bool expansion_ok(W *w, const char *s, size_t n);
/* Does builtin prog (read, printf -v, test -v, wait -p, getopts, mapfile,
 * let, unset, set -k) evaluate a word the engine cannot vouch for? Names
 * it assigns become unknown (read x: x's value is input). */
bool builtin_evaluates(W *w, const char *prog, const pword *argv, size_t argc);
/* Could word a be an option of a builtin (a glob, or an unknown part at
 * its start or unquoted)? A literal option is seen as such. */
bool may_be_option(const pword *a);
/* A declaration (declare, typeset, local, export, readonly) with its
 * words: the attributes and names it gives. */
bool declaration_ok(W *w, const pword *argv, size_t argc);

#endif
