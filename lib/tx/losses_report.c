/* The losses report: its items, as JSON, for the judge (losses.h); the
 * lowest of the losses parts (losses.c and losses_git.c add to it). */
#include "losses_int.h"
#include "result.h"

/* ---- the report ---- */

struct loss_item *losses_add(struct losses *l, int kind, const char *path, uint64_t bytes, const char *detail)
{
    l->count++;
    l->bytes += bytes;
    if (l->n >= LOSSES_ITEMS_KEPT) {
        l->truncated = true;
        l->dropped_kinds |= 1u << kind;
        return NULL;
    }
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    struct loss_item *it = &l->v[l->n++];
    *it = (struct loss_item){.kind = kind, .path = xstrdup(path), .bytes = bytes};
    it->detail = detail ? xstrdup(detail) : NULL;
    return it;
}

void losses_free(struct losses *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].path);
        free(l->v[i].detail);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

json_t *losses_json(const struct losses *l)
{
    json_t *items = json_array();
    for (size_t i = 0; l && i < l->n && i < LOSSES_ITEMS_SHOWN; i++) {
        const struct loss_item *it = &l->v[i];
        json_t *o = json_pack("{s:s,s:o,s:I,s:s}", "kind", effect_loss_kinds[it->kind], "path",
                              json_text(it->path, strlen(it->path), true), "bytes", (json_int_t)it->bytes,
                              "detail", it->detail ? it->detail : "");
        if (it->unverified)
            json_object_set_new(o, "unverified", json_true());
        if (it->commits)
            json_object_set_new(o, "commits", json_integer((json_int_t)it->commits));
        if (it->written_by)
            json_object_set_new(o, "written_by", json_sprintf("%llu", (unsigned long long)it->written_by));
        if (it->own) {
            json_object_set_new(o, "own", json_true());
            json_object_set_new(o, "age_s", json_integer((json_int_t)it->age_s));
        }
        json_array_append_new(items, o);
    }
    return json_pack("{s:I,s:I,s:b,s:o}", "count", (json_int_t)(l ? l->count : 0), "bytes",
                     (json_int_t)(l ? l->bytes : 0), "truncated",
                     l && (l->truncated || l->n > LOSSES_ITEMS_SHOWN), "items", items);
}

void losses_feed(const struct losses *l, struct effect_judge *j)
{
    for (size_t i = 0; l && i < l->n; i++) {
        const struct loss_item *it = &l->v[i];
        struct effect_loss e = {
            .kind = it->kind, .path = it->path, .bytes = it->bytes, .own = it->own, .age_s = it->age_s};
        effect_judge_loss(j, &e);
    }
    for (int k = 0; l && k < EFF_LOSS_KINDS; k++) /* the items not kept count as a person's work */
        if (l->dropped_kinds & (1u << k)) {
            struct effect_loss e = {.kind = k, .path = "..."};
            effect_judge_loss(j, &e);
        }
}

char *losses_index_path(const struct lrepo *r, const char *p)
{
    if (r->wt && *r->wt) {
        size_t wl = strlen(r->wt);
        if (!strncmp(p, r->wt, wl) && p[wl] == '/')
            p += wl + 1;
    }
    return xasprintf("%s%s", r->prefix, p);
}
