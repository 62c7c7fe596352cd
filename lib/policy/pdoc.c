/* libyaml's document to the compact form of pdoc.h; used by the policy
 * parser at run time and by gen_doc at build time. */
#include <stdlib.h>
#include <string.h>

#include "pdoc.h"

int pdoc_from_yaml(const yaml_document_t *d, pdoc *out)
{
    memset(out, 0, sizeof *out);
    size_t nn = (size_t)(d->nodes.top - d->nodes.start), ni = 0, np = 0, pool = 0;
    for (const yaml_node_t *n = d->nodes.start; n < d->nodes.top; n++) {
        if (n->type == YAML_SCALAR_NODE)
            pool += n->data.scalar.length + 1;
        else if (n->type == YAML_SEQUENCE_NODE)
            ni += (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
        else if (n->type == YAML_MAPPING_NODE)
            np += (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    }
    if (nn > INT32_MAX || ni > UINT32_MAX || np > UINT32_MAX / 2 || pool > UINT32_MAX)
        return -1;
    /* one allocation: nodes, items, pairs (32-bit aligned), pool */
    size_t sz = nn * sizeof(pnode) + (ni + 2 * np) * sizeof(int32_t) + pool + 1;
    char *mem = calloc(1, sz);
    if (!mem)
        return -1;
    /* calloc's block is aligned for any type; sizeof(pnode) keeps items
     * 32-bit aligned (void *: clang's -Wcast-align cannot see that) */
    pnode *nodes = (pnode *)(void *)mem;
    int32_t *items = (int32_t *)(void *)(mem + nn * sizeof(pnode)), *pairs = items + ni;
    char *pl = (char *)(pairs + 2 * np);
    size_t ai = 0, ap = 0, apool = 0;
    for (size_t i = 0; i < nn; i++) {
        const yaml_node_t *n = &d->nodes.start[i];
        pnode *o = &nodes[i];
        o->type = (uint32_t)n->type;
        o->line = (uint32_t)n->start_mark.line;
        if (n->type == YAML_SCALAR_NODE) {
            o->off = (uint32_t)apool;
            o->len = (uint32_t)n->data.scalar.length;
            memcpy(pl + apool, n->data.scalar.value, n->data.scalar.length);
            apool += n->data.scalar.length + 1; /* and its NUL (calloc) */
        } else if (n->type == YAML_SEQUENCE_NODE) {
            o->off = (uint32_t)ai;
            for (const yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
                 it++)
                items[ai++] = *it;
            o->len = (uint32_t)(ai - o->off);
        } else if (n->type == YAML_MAPPING_NODE) {
            o->off = (uint32_t)ap;
            for (const yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top;
                 p++) {
                pairs[2 * ap] = p->key;
                pairs[2 * ap + 1] = p->value;
                ap++;
            }
            o->len = (uint32_t)(ap - o->off);
        }
    }
    *out = (pdoc){.nodes = nodes,
                  .nnodes = nn,
                  .items = items,
                  .pairs = pairs,
                  .pool = pl,
                  .pool_len = pool,
                  .owned = mem};
    return 0;
}

void pdoc_free(pdoc *d)
{
    free(d->owned);
    memset(d, 0, sizeof *d);
}
