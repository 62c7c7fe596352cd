/* Compensations for external effects ("sagas", issue 9).
 *
 * A policy rule may say that the commands it decides have an effect outside
 * the machine (`external: true`) and how to undo it (`compensate:`, a
 * template, with `capture:`, a regex over the command's standard output).
 * txbox cannot roll such an effect back with the workspace; it records it,
 * and when the work it belongs to is undone (a failing `txbox run`, a
 * failing command of a multi-command transaction, `txbox rollback` past the
 * command, `txbox abort`) it runs the compensations, newest first.
 *
 * The template language (docs/policy.md, "Compensations") is policy work,
 * in policy/compensate.c, which also checks a rule's template when the
 * policy loads. A value that is unknown (a word only known at run time, a
 * missing operand or option, a capture that did not match) leaves the
 * effect without a compensation: irreversible, with the reason. Rendering
 * happens in two stages: the operands and options when the command is
 * classified (stage 1: the resolved words live in the policy's arena only
 * then), the captures after the command ran (stage 2).
 *
 * The effect list lives in the transaction's directory, .txbox/tx/ID/effects
 * (JSON, replaced atomically and fsync'd at each change): for a single run
 * its own, for a multi-command transaction the transaction's. Each entry has
 * a state:
 *
 *   started      recorded before the command runs (its compensation may
 *                still need the output)
 *   kept         a single run that committed: the effect stays
 *   pending      a staged command of an open multi-command transaction
 *   irreversible the same, with no compensation
 *   running      its compensation was started (written before it starts)
 *   compensated  its compensation exited 0
 *   failed       its compensation failed (exit status, output kept): needs attention
 *   interrupted  txbox stopped while the command or its compensation ran:
 *                whether it happened is unknown; never run again; needs attention
 *   not_undone   irreversible, and the work it belongs to was undone: needs attention
 *   resolved     one of the three above that a person dealt with (txbox resolve:
 *                resolved_from, resolved_at, note)
 *
 * Recovery marks `interrupted` what a dead single run left `started` or
 * `running` (saga_recovered).
 *
 * The marks make a compensation pass restartable without running anything
 * twice: an abort cut short by a crash is finished by `txbox abort ID`
 * again, which skips what is done and does not rerun what was `running`.
 *
 * Compensations run through txbox_run() (which the caller passes in, a
 * saga_runner: this file is below the one that runs commands) as read-only
 * commands (the workspace is mounted read-only, the sandbox otherwise as
 * for any command) with the host network shared: they reach the service,
 * and cannot write the workspace. Each is logged as its own transaction (outcome read_only)
 * and its exit status and output are kept in the effect's entry. */
#include <fcntl.h>
#include <regex.h>
#include <sys/file.h>

#include "fsops.h"
#include "netproxy.h"
#include "policy/compensate.h"
#include "policy/pol.h"
#include "result.h"
#include "saga.h"
#include "store.h"
#include "tx.h"

#define OUTPUT_KEEP 4096
#define COMP_TIMEOUT_S 120.0
#define EFFECTS_FILE "effects"
#define EFFECTS_CAP (16u << 20)

/* ---- the plan ---- */

static bool policy_has_effects(const txbox_policy *p)
{
    for (size_t i = 0; i < p->nrules; i++)
        if (p->rules[i].decision != DEC_OFF && (p->rules[i].external || p->rules[i].compensate))
            return true;
    return false;
}

json_t *saga_plan(const txbox_policy *p, const char *shell, char *const *argv, bool *net)
{
    if (!p || !policy_has_effects(p))
        return NULL;
    void *parser = shell_parser_new();
    if (!parser)
        return NULL;
    arena ar;
    arena_init(&ar, 64u << 20);
    pcmds cmds;
    if (shell)
        shell_walk(p, parser, &ar, shell, strlen(shell), &cmds);
    else
        shell_walk_argv(p, parser, &ar, argv, &cmds);
    json_t *list = json_array();
    for (size_t i = 0; i < cmds.n; i++) {
        /* the first rule in file order that declares an effect and matches
         * (whichever rule decided the verdict: the caller ran the command
         * because nothing in it is unsafe) */
        const pcmd *c = &cmds.v[i];
        const rule *r = NULL;
        for (size_t k = 0; k < p->nrules && !r; k++)
            if (p->rules[k].decision != DEC_OFF && (p->rules[k].external || p->rules[k].compensate) &&
                rule_matches(p, &p->rules[k], c))
                r = &p->rules[k];
        if (!r)
            continue;
        if (r->network)
            *net = true;
        dbuf d;
        dbuf_init(&d, 4096);
        for (size_t k = 0; k < c->argc; k++) {
            if (k)
                dbuf_add(&d, " ", 1);
            dbuf_add(&d, c->argv[k].s, c->argv[k].len);
        }
        json_t *e = json_pack("{s:s,s:o}", "rule", r->id, "command", json_text(dbuf_str(&d), d.len, false));
        dbuf_free(&d);
        if (r->domains.n) { /* what its compensation's proxy lets through, beside the defaults */
            json_t *doms = json_array();
            for (size_t k = 0; k < r->domains.n; k++)
                json_array_append_new(doms, json_string(r->domains.v[k]));
            json_object_set_new(e, "domains", doms);
        }
        if (r->compensate) {
            struct comp_ctx t = {.stage = COMP_WORDS, .p = p, .c = c};
            dbuf b;
            dbuf_init(&b, COMP_MAX_RENDERED);
            char why[300] = "";
            if (comp_render(&t, r->compensate, &b, why, sizeof why) == 0)
                json_object_set_new(e, "template", json_text(dbuf_str(&b), b.len, false));
            else
                json_object_set_new(e, "why", json_string(why));
            dbuf_free(&b);
            if (r->capture)
                json_object_set_new(e, "capture", json_string(r->capture));
        } else {
            json_object_set_new(e, "why", json_string("the rule declares no compensation"));
        }
        json_array_append_new(list, e);
    }
    arena_free(&ar);
    shell_parser_free(parser);
    if (!json_array_size(list)) {
        json_decref(list);
        return NULL;
    }
    return json_pack("{s:o}", "effects", list);
}

void saga_plan_network(json_t *plan, int net, const char *const *allow_domains)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(plan, "effects"), i, e)
    {
        if (net == TXBOX_NET_HOST)
            json_object_set_new(e, "net", json_string("host"));
        json_t *doms = json_object_get(e, "domains");
        for (size_t k = 0; allow_domains && allow_domains[k]; k++) {
            if (!doms) {
                doms = json_array();
                json_object_set_new(e, "domains", doms);
            }
            json_array_append_new(doms, json_string(allow_domains[k]));
        }
    }
}

bool saga_plan_needs_output(const json_t *plan)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(plan, "effects"), i,
                       e) if (json_object_get(e, "capture") && json_object_get(e, "template")) return true;
    return false;
}

/* ---- the effect list of a transaction directory ---- */

static json_t *load(int effd)
{
    _cleanup_free_ char *s = NULL;
    json_t *o = NULL;
    if (read_file_at(effd, EFFECTS_FILE, EFFECTS_CAP, &s, NULL, NULL) == 0)
        o = json_loads(s, 0, NULL);
    if (!json_is_array(json_object_get(o, "effects"))) {
        json_decref(o);
        o = json_pack("{s:[]}", "effects");
    }
    return o;
}

static int save(int effd, json_t *o, txbox_error *err)
{
    _cleanup_free_ char *s = json_dumps(o, JSON_COMPACT);
    int fd = openat(effd, EFFECTS_FILE ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return tx_errno(err, errno, "cannot record the external effects");
    int rc = s ? fs_write(fd, s, strlen(s)) : -1;
    if (rc == 0)
        rc = fs_fsync(fd);
    int e = errno;
    close(fd);
    if (rc < 0 || fs_renameat(effd, EFFECTS_FILE ".tmp", effd, EFFECTS_FILE, 0) < 0 || fs_fsync(effd) < 0)
        return tx_errno(err, rc < 0 ? e : errno, "cannot record the external effects");
    return 0;
}

int saga_started(int effd, json_t *plan, const char *run_tx, txbox_error *err)
{
    json_t *o = load(effd), *list = json_object_get(o, "effects");
    json_t *again = json_object_get(plan, "first"); /* a retry on the copy backend */
    while (again && json_array_size(list) > (size_t)json_integer_value(again))
        json_array_remove(list, json_array_size(list) - 1);
    json_object_set_new(plan, "first", json_integer((json_int_t)json_array_size(list)));
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(plan, "effects"), i, e)
    {
        json_t *n = json_deep_copy(e);
        json_object_set_new(n, "n", json_integer((json_int_t)json_array_size(list)));
        json_object_set_new(n, "run", json_string(run_tx));
        json_object_set_new(n, "state", json_string("started"));
        json_array_append_new(list, n);
    }
    int rc = save(effd, o, err);
    json_decref(o);
    return rc;
}

static bool attention_state(const char *s)
{
    return s && (!strcmp(s, "failed") || !strcmp(s, "interrupted") || !strcmp(s, "not_undone"));
}

/* An effect found `started` or `running` by a process that is not the one
 * that wrote it: txbox stopped there. Marked `interrupted` (needs
 * attention, never run again); false for any other state. */
static bool mark_interrupted(json_t *e)
{
    const char *st = json_string_value(json_object_get(e, "state"));
    if (!st || (strcmp(st, "running") && strcmp(st, "started")))
        return false;
    bool ran = !strcmp(st, "running"); /* st dies with the old state */
    json_object_set_new(e, "state", json_string("interrupted"));
    json_object_set_new(
        e, "why",
        json_string(ran ? "txbox stopped while the compensation ran: whether it took effect is unknown"
                        : "txbox stopped while the command ran: whether its effect happened is unknown"));
    return true;
}

/* One compensation, through the sandbox: read-only workspace, the network
 * its effect's command had (saga_plan_network): the host's, or the proxy
 * with the domains the rule and the caller allowed. */
static void run_one(txbox_ws *ws, saga_runner run, json_t *e)
{
    const char *cmd = json_string_value(json_object_get(e, "compensate"));
    const char *doms[NP_MAX_DOMAINS + 1] = {0};
    json_t *dl = json_object_get(e, "domains");
    for (size_t i = 0; i < json_array_size(dl) && i < NP_MAX_DOMAINS; i++)
        doms[i] = json_string_value(json_array_get(dl, i));
    const char *net = json_string_value(json_object_get(e, "net"));
    bool net_host = net && !strcmp(net, "host");
    txbox_run_opts o = {.shell = cmd,
                        .allow_domains = doms,
                        .cwd = ws->path,
                        .read_only = 1,
                        .net = net_host ? TXBOX_NET_HOST : TXBOX_NET_PROXY,
                        .capture = 1,
                        .output_cap = OUTPUT_KEEP,
                        .timeout_s = COMP_TIMEOUT_S,
                        .allow_degraded = getenv("TXBOX_ALLOW_DEGRADED") != NULL};
    txbox_result *r = NULL;
    txbox_error err = {0};
    if (run(ws, &o, &r, &err) < 0) {
        json_object_set_new(e, "state", json_string("failed"));
        json_object_set_new(e, "error", json_string(err.msg));
        return;
    }
    int code = txbox_result_exit_code(r);
    bool ok = txbox_result_outcome(r) == TXBOX_OUTCOME_READ_ONLY && code == 0;
    json_object_set_new(e, "state", json_string(ok ? "compensated" : "failed"));
    json_object_set_new(e, "exit_code", json_integer(code));
    json_object_set_new(e, "compensation_tx", json_string(txbox_result_tx(r)));
    json_object_set_new(e, "stdout", json_text(dbuf_str(&r->out), r->out.len, false));
    json_object_set_new(e, "stderr", json_text(dbuf_str(&r->err), r->err.len, false));
    if (txbox_result_outcome(r) == TXBOX_OUTCOME_TIMED_OUT)
        json_object_set_new(e, "error", json_string("timed out"));
    txbox_result_free(r);
}

int saga_compensate(txbox_ws *ws, int effd, size_t from, json_t **report, saga_runner run, txbox_error *err)
{
    if (report)
        *report = NULL;
    json_t *o = load(effd), *list = json_object_get(o, "effects");
    int rc = 0;
    fs_fault_arm(); /* crash tests: TXBOX_FAULT counts the writes of the marks (fsops.h) */
    for (size_t i = json_array_size(list); rc == 0 && i-- > from;) {
        json_t *e = json_array_get(list, i);
        const char *st = json_string_value(json_object_get(e, "state")); /* until it is replaced */
        bool has = json_is_string(json_object_get(e, "compensate"));
        if (!st)
            continue;
        if (mark_interrupted(e)) {
            rc = save(effd, o, err);
        } else if ((!strcmp(st, "pending") && !has) || !strcmp(st, "irreversible")) {
            json_object_set_new(e, "state", json_string("not_undone"));
            rc = save(effd, o, err);
        } else if (!strcmp(st, "pending")) {
            json_object_set_new(e, "state", json_string("running"));
            if ((rc = save(effd, o, err)) < 0)
                break;
            run_one(ws, run, e);
            rc = save(effd, o, err);
        }
    }
    fs_fault_disarm();
    if (rc == 0 && report) {
        json_t *sub = json_array();
        size_t att = 0;
        for (size_t i = from; i < json_array_size(list); i++) {
            json_t *e = json_array_get(list, i);
            att += attention_state(json_string_value(json_object_get(e, "state")));
            json_array_append(sub, e);
        }
        *report = json_pack("{s:o,s:I}", "effects", sub, "needs_attention", (json_int_t)att);
    }
    json_decref(o);
    return rc;
}

int saga_after(txbox_ws *ws, int effd, json_t *plan, struct txbox_result *r, bool ok, bool multi,
               saga_runner run, txbox_error *err)
{
    json_t *o = load(effd), *list = json_object_get(o, "effects");
    size_t first = (size_t)json_integer_value(json_object_get(plan, "first"));
    json_t *pl = json_object_get(plan, "effects");
    regmatch_t m[10];
    const char *out = dbuf_str(&r->out);
    for (size_t i = 0; i < json_array_size(pl); i++) {
        json_t *e = json_array_get(list, first + i);
        if (!e || strcmp(json_string_value(json_object_get(e, "run")) ?: "", r->txs)) {
            json_decref(o);
            return tx_err(err, EIO, "the effect list of the transaction changed under this command");
        }
        const char *tpl = json_string_value(json_object_get(e, "template"));
        const char *cap = json_string_value(json_object_get(e, "capture"));
        if (tpl) {
            struct comp_ctx t = {.stage = COMP_CAPTURE, .out = out, .m = m};
            if (cap) {
                regex_t re;
                if (regcomp(&re, cap, REG_EXTENDED) == 0) {
                    t.nm = regexec(&re, out, ARRAY_SIZE(m), m, 0) == 0 ? ARRAY_SIZE(m) : 0;
                    regfree(&re);
                }
            }
            dbuf b;
            dbuf_init(&b, COMP_MAX_RENDERED);
            char why[300] = "";
            if (comp_render(&t, tpl, &b, why, sizeof why) == 0)
                json_object_set_new(e, "compensate", json_text(dbuf_str(&b), b.len, false));
            else
                json_object_set_new(e, "why", json_string(why));
            dbuf_free(&b);
        }
        json_object_del(e, "template");
        bool irr = !json_is_string(json_object_get(e, "compensate"));
        json_object_set_new(e, "irreversible", json_boolean(irr));
        json_object_set_new(e, "state",
                            json_string(!ok      ? "pending"
                                        : !multi ? "kept"
                                        : irr    ? "irreversible"
                                                 : "pending"));
    }
    int rc = save(effd, o, err);
    json_decref(o);
    if (rc < 0)
        return -1;
    json_t *rep = NULL;
    if (!ok) {
        /* the command failed: its own effects are undone with it */
        if (saga_compensate(ws, effd, first, &rep, run, err) < 0)
            return -1;
    } else {
        json_t *l2 = load(effd);
        json_t *sub = json_array();
        for (size_t i = 0; i < json_array_size(pl); i++)
            json_array_append(sub, json_array_get(json_object_get(l2, "effects"), first + i));
        rep = json_pack("{s:o,s:I}", "effects", sub, "needs_attention", (json_int_t)0);
        json_decref(l2);
    }
    json_decref(r->effects);
    r->effects = rep;
    return 0;
}

size_t saga_count(int effd)
{
    json_t *o = load(effd);
    size_t n = json_array_size(json_object_get(o, "effects"));
    json_decref(o);
    return n;
}

json_t *saga_kept(int effd, bool keep)
{
    json_t *o = load(effd), *l = json_object_get(o, "effects"), *e;
    size_t i;
    json_array_foreach(l, i, e) if (!strcmp(json_string_value(json_object_get(e, "state")) ?: "", "pending"))
        json_object_set_new(e, "state", json_string("kept"));
    txbox_error err = {0};
    if (keep && json_array_size(l))
        (void)save(effd, o, &err); /* else "pending" in a committed transaction reads the same */
    if (!json_array_size(l)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

void saga_attention_add(json_t *arr, int txfd, const char *tx)
{
    if (faccessat(txfd, EFFECTS_FILE, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
        return;
    json_t *o = load(txfd);
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(o, "effects"), i, e)
    {
        if (!attention_state(json_string_value(json_object_get(e, "state"))))
            continue;
        json_t *a = json_deep_copy(e);
        json_object_set_new(a, "tx", json_string(tx));
        json_object_del(a, "stdout");
        json_array_append_new(arr, a);
    }
    json_decref(o);
}

int saga_recovered(int txfd, txbox_error *err)
{
    if (faccessat(txfd, EFFECTS_FILE, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    json_t *o = load(txfd), *e;
    size_t i, n = 0;
    json_array_foreach(json_object_get(o, "effects"), i, e) n += mark_interrupted(e);
    int rc = n ? save(txfd, o, err) : 0;
    json_decref(o);
    return rc < 0 ? -1 : (int)n;
}

int txbox_resolve(txbox_ws *ws, const char *id, long which, const char *note, char **json, txbox_error *err)
{
    *json = NULL;
    uint64_t n;
    if (parse_txid(id, &n, err) < 0)
        return -1;
    if (note && strlen(note) > 4096)
        return tx_err(err, E2BIG, "the note is longer than 4096 bytes");
    char idn[32];
    snprintf(idn, sizeof idn, "%llu", (unsigned long long)n);
    _cleanup_close_ int txfd = openat(ws->txd, idn, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (txfd < 0)
        return tx_err(err, ENOENT, "no transaction %s", idn);
    /* a multi-command transaction: one process at a time works on it (an
     * abort may be writing its effects); a single run: not while it runs */
    _cleanup_close_ int lk = openat(txfd, "lock", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (lk >= 0 ? flock(lk, LOCK_EX) < 0 : !ws_tx_owner_dead(ws, n))
        return tx_err(err, EBUSY, "transaction %s is running; resolve its effects after it ends", idn);
    json_t *o = load(txfd), *e, *done = json_array();
    size_t i;
    int rc = 0;
    json_array_foreach(json_object_get(o, "effects"), i, e)
    {
        const char *st = json_string_value(json_object_get(e, "state"));
        if (which >= 0 && json_integer_value(json_object_get(e, "n")) != which)
            continue;
        if (!attention_state(st)) {
            if (which >= 0)
                rc = tx_err(err, EINVAL, "effect %ld of transaction %s does not need attention (%s)", which,
                            idn, st ? st : "no state");
            continue;
        }
        json_object_set_new(e, "resolved_from", json_string(st));
        json_object_set_new(e, "state", json_string("resolved"));
        json_object_set_new(e, "resolved_at", json_real(wall_time()));
        if (note)
            json_object_set_new(e, "note", json_text(note, strlen(note), false));
        json_array_append(done, e);
    }
    if (rc == 0 && !json_array_size(done))
        rc = which >= 0 ? tx_err(err, ENOENT, "transaction %s has no effect %ld", idn, which)
                        : tx_err(err, ENOENT, "no effect of transaction %s needs attention", idn);
    if (rc == 0)
        rc = save(txfd, o, err);
    if (rc == 0) {
        json_t *res = json_pack("{s:s,s:O}", "tx", idn, "resolved", done);
        *json = json_dumps(res, JSON_COMPACT);
        json_decref(res);
    }
    json_decref(done);
    json_decref(o);
    return rc;
}
