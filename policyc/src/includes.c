/*
 * includes.c - list names and the include graph: unknown
 * includes (with did-you-mean), cycles, depth; and the flattening every
 * consumer of a policy uses (pc_policy_effective_rules).
 */
#include <stdlib.h>
#include <string.h>

#include "load-int.h"
#include "suggest.h"

typedef struct name_ref {
    const char *name;
    size_t index;
} name_ref;

static int compare_names(const void *pa, const void *pb)
{
    const name_ref *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    return c ? c : (a->index > b->index) - (a->index < b->index);
}

static long lookup(const name_ref *refs, size_t n, const char *name)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(refs[mid].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && strcmp(refs[lo].name, name) == 0 ? (long)refs[lo].index : -1;
}

enum { WHITE, GREY, BLACK };

typedef struct graph {
    pc_loader *L;
    unsigned char *colour;
    size_t *stack; /* the current DFS path, for the cycle message */
    size_t depth;
    unsigned *height; /* longest include chain below each list */
    bool cycle;
} graph;

static void report_cycle(graph *g, size_t from, size_t include, size_t to)
{
    pc_policy *p = g->L->policy;
    char path[512];
    size_t o = 0, start = 0;
    while (start < g->depth && g->stack[start] != to)
        start++;
    for (size_t k = start; k < g->depth && o < sizeof path; k++)
        o += (size_t)snprintf(path + o, sizeof path - o, "%s -> ", p->lists[g->stack[k]].name);
    if (o < sizeof path)
        snprintf(path + o, sizeof path - o, "%s", p->lists[to].name);
    pc_report(g->L, PC_E_INCLUDE_CYCLE, p->lists[from].include_pos[include],
              "remove one include of the cycle", "include cycle: %s", path);
    g->cycle = true;
}

/* Depth-first walk: recursion depth is bounded by the lists limit. */
static void visit(graph *g, size_t v)
{
    pc_list *l = &g->L->policy->lists[v];
    g->colour[v] = GREY;
    g->stack[g->depth++] = v;
    unsigned h = 0;
    for (size_t i = 0; i < l->nincludes; i++) {
        size_t t = l->include_index[i];
        if (t == SIZE_MAX)
            continue;
        if (g->colour[t] == GREY) {
            report_cycle(g, v, i, t);
            continue;
        }
        if (g->colour[t] == WHITE)
            visit(g, t);
        if (g->height[t] + 1 > h)
            h = g->height[t] + 1;
    }
    g->height[v] = h;
    g->depth--;
    g->colour[v] = BLACK;
}

static void report_depth(graph *g)
{
    pc_policy *p = g->L->policy;
    /* Report only where the chain first crosses the limit, not at every list above it. */
    for (size_t v = 0; v < p->nlists; v++) {
        if (g->height[v] != g->L->limits.max_include_depth + 1)
            continue;
        pc_list *l = &p->lists[v];
        for (size_t i = 0; i < l->nincludes; i++) {
            size_t t = l->include_index[i];
            if (t != SIZE_MAX && g->height[t] == g->L->limits.max_include_depth) {
                pc_report(g->L, PC_E_INCLUDE_DEPTH, l->include_pos[i], "flatten the include chain",
                          "includes from list '%s' nest %u levels deep (limit %u)", l->name,
                          g->height[v], g->L->limits.max_include_depth);
                break;
            }
        }
    }
}

static void resolve_names(pc_loader *L, const name_ref *refs, const char **names)
{
    pc_policy *p = L->policy;
    for (size_t v = 0; v < p->nlists; v++) {
        pc_list *l = &p->lists[v];
        for (size_t i = 0; i < l->nincludes; i++) {
            long t = lookup(refs, p->nlists, l->includes[i]);
            l->include_index[i] = t < 0 ? SIZE_MAX : (size_t)t;
            if (t < 0) {
                char help[PC_MAX_LIST_NAME + 32];
                const char *guess = pc_suggest(l->includes[i], names, p->nlists);
                if (guess)
                    snprintf(help, sizeof help, "did you mean '%s'?", guess);
                pc_report(L, PC_E_UNKNOWN_INCLUDE, l->include_pos[i], guess ? help : NULL,
                          "list '%s' includes '%s', which is not defined", l->name, l->includes[i]);
                continue;
            }
            for (size_t j = 0; j < i; j++) {
                if (strcmp(l->includes[j], l->includes[i]) == 0) {
                    pc_report(L, PC_E_DUPLICATE_INCLUDE, l->include_pos[i], "remove one of them",
                              "list '%s' includes '%s' twice (first at line %u)", l->name,
                              l->includes[i], l->include_pos[j].line);
                    l->include_index[i] = SIZE_MAX;
                    break;
                }
            }
        }
    }
}

bool pc_resolve_includes(pc_loader *L)
{
    pc_policy *p = L->policy;
    size_t n = p->nlists;
    name_ref *refs = malloc((n ? n : 1) * sizeof *refs);
    const char **names = malloc((n ? n : 1) * sizeof *names);
    graph g = {.L = L,
               .colour = calloc(n ? n : 1, 1),
               .stack = malloc((n ? n : 1) * sizeof(size_t)),
               .height = calloc(n ? n : 1, sizeof(unsigned))};
    bool ok = refs && names && g.colour && g.stack && g.height;
    for (size_t v = 0; ok && v < n; v++) {
        refs[v] = (name_ref){p->lists[v].name, v};
        names[v] = p->lists[v].name;
        if (p->lists[v].nincludes &&
            !(p->lists[v].include_index = malloc(p->lists[v].nincludes * sizeof(size_t))))
            ok = false;
    }
    if (!ok) {
        L->nomem = true;
        goto out;
    }
    /* A list name twice is a duplicate key, refused by the YAML reader
     * (parse.c words it "duplicate list"). */
    qsort(refs, n, sizeof *refs, compare_names);
    resolve_names(L, refs, names);
    for (size_t v = 0; v < n; v++)
        if (g.colour[v] == WHITE)
            visit(&g, v);
    if (!g.cycle)
        report_depth(&g);
    ok = !g.cycle;
out:
    free(refs);
    free(names);
    free(g.colour);
    free(g.stack);
    free(g.height);
    return ok;
}

/* Appends list v and, depth-first, the lists it includes, each once. */
static void collect(const pc_policy *p, size_t v, bool *seen, size_t *order, size_t *n)
{
    seen[v] = true;
    order[(*n)++] = v;
    const pc_list *l = &p->lists[v];
    for (size_t i = 0; i < l->nincludes; i++) {
        long t = l->include_index ? (l->include_index[i] == SIZE_MAX ? -1 : (long)l->include_index[i])
                                  : pc_policy_find_list(p, l->includes[i]);
        if (t >= 0 && !seen[t])
            collect(p, (size_t)t, seen, order, n);
    }
}

ph_status pc_effective_lists(const pc_policy *policy, size_t list_index, size_t *order,
                             size_t *count)
{
    if (list_index >= policy->nlists)
        return PH_E_INVAL;
    bool *seen = calloc(policy->nlists, sizeof *seen);
    if (!seen)
        return PH_E_NOMEM;
    *count = 0;
    collect(policy, list_index, seen, order, count);
    free(seen);
    return PH_OK;
}

ph_status pc_policy_effective_rules(const pc_policy *policy, size_t list_index,
                                    const pc_rule ***rules, size_t *count)
{
    *rules = NULL;
    *count = 0;
    if (list_index >= policy->nlists)
        return PH_E_INVAL;
    size_t *order = malloc(policy->nlists * sizeof *order);
    if (!order)
        return PH_E_NOMEM;
    size_t nl = 0;
    ph_status st = pc_effective_lists(policy, list_index, order, &nl);
    size_t total = 0;
    for (size_t k = 0; st == PH_OK && k < nl; k++)
        total += policy->lists[order[k]].nrules;
    if (st == PH_OK && total > 0) {
        const pc_rule **r = malloc(total * sizeof *r);
        if (!r) {
            st = PH_E_NOMEM;
        } else {
            size_t o = 0;
            for (size_t k = 0; k < nl; k++) {
                const pc_list *l = &policy->lists[order[k]];
                for (size_t j = 0; j < l->nrules; j++)
                    r[o++] = &l->rules[j];
            }
            *rules = r;
            *count = total;
        }
    }
    free(order);
    return st;
}
