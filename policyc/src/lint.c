/*
 * lint.c - warnings over each list's effective (flattened) rules:
 *   PC100 an exact rule already covered by a wildcard rule on the same ports,
 *   PC101 a duplicate rule (same host, same ports),
 *   PC102 rules for the same host whose ports overlap.
 * Each rule gets at most one warning of each kind, even when several lists
 * include it. Work is O(n) per list: a hash table groups rules by host, and
 * a wildcard is found by looking up "*." + parent.
 */
#include <stdlib.h>
#include <string.h>

#include "load-int.h"
#include "pinhole/host.h"

/* How many earlier same-host rules one rule is compared with for overlaps:
 * bounds the work on hostile input; real policies have a handful. */
#define OVERLAP_WINDOW 16

typedef struct port_set {
    const pc_port_range *r; /* sorted and merged */
    size_t n;
    pc_port_range *owned;   /* r when it is a copy this file must free */
} port_set;

typedef struct entry {
    const pc_rule *rule;
    size_t gid;       /* global rule id: warning flags and port sets */
    size_t prev_same; /* index of the previous entry with the same host, or NONE */
} entry;

#define NONE SIZE_MAX
#define EMPTY UINT32_MAX /* entries per list are < PC_MAX_EFFECTIVE_RULES < 2^32 */

typedef struct lint {
    pc_loader *L;
    port_set *sets;        /* by gid */
    unsigned char *warned; /* by gid: bit per warning kind */
    const char *list_name;
    struct slot {
        uint32_t index;    /* the last entry with that host, or EMPTY */
        uint32_t hash;     /* its host's hash: most probes never touch the entry */
    } *slots;              /* open-addressing hash table keyed by host; 8 bytes a
                              slot keeps a million-rule table small in cache */
    size_t nslots;         /* power of two, at least twice the entries */
} lint;

enum { WARN_COVERED = 1, WARN_DUP = 2, WARN_OVERLAP = 4 };

static bool sets_equal(const port_set *a, const port_set *b)
{
    return a->n == b->n && memcmp(a->r, b->r, a->n * sizeof *a->r) == 0;
}

static bool sets_overlap(const port_set *a, const port_set *b)
{
    size_t i = 0, j = 0;
    while (i < a->n && j < b->n) {
        if (a->r[i].hi < b->r[j].lo)
            i++;
        else if (b->r[j].hi < a->r[i].lo)
            j++;
        else
            return true;
    }
    return false;
}

/* Every port of a is in b (both merged, so each range of a lies in one of b). */
static bool set_covered(const port_set *a, const port_set *b)
{
    size_t j = 0;
    for (size_t i = 0; i < a->n; i++) {
        while (j < b->n && b->r[j].hi < a->r[i].lo)
            j++;
        if (j == b->n || b->r[j].lo > a->r[i].lo || b->r[j].hi < a->r[i].hi)
            return false;
    }
    return true;
}

static void warn(lint *t, const entry *e, unsigned kind, pc_code code, const entry *other,
                 const char *what)
{
    if (t->warned[e->gid] & kind)
        return;
    t->warned[e->gid] |= kind;
    const pc_rule *o = other->rule;
    pc_report(t->L, code, e->rule->pos, kind == WARN_OVERLAP ? "merge the rules" : "remove this rule",
              "%s '%s' (%s:%u) in list '%s'", what, o->host, o->source_file, o->source_line,
              t->list_name);
}

static uint32_t hash_host(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

/* The slot holding host, or the empty slot where it belongs (hash set). */
static struct slot *find_slot(lint *t, const entry *v, const char *host)
{
    uint32_t h = hash_host(host);
    size_t i = h & (t->nslots - 1);
    while (t->slots[i].index != EMPTY &&
           (t->slots[i].hash != h || strcmp(v[t->slots[i].index].rule->host, host) != 0))
        i = (i + 1) & (t->nslots - 1);
    t->slots[i].hash = h;
    return &t->slots[i];
}

static void lint_entries(lint *t, entry *v, size_t n)
{
    for (size_t i = 0; i < t->nslots; i++)
        t->slots[i].index = EMPTY;
    size_t wildcards = 0;
    /* Pass 1, in flattening order: duplicates and overlaps with earlier
     * same-host rules (the later rule gets the warning). */
    for (size_t k = 0; k < n; k++) {
        struct slot *slot = find_slot(t, v, v[k].rule->host);
        v[k].prev_same = slot->index == EMPTY ? NONE : slot->index;
        slot->index = (uint32_t)k;
        wildcards += v[k].rule->wildcard;
        const port_set *ps = &t->sets[v[k].gid];
        size_t seen = 0;
        for (size_t j = v[k].prev_same; j != NONE && seen < OVERLAP_WINDOW;
             j = v[j].prev_same, seen++) {
            const port_set *other = &t->sets[v[j].gid];
            /* The same ports with another protocol: not a duplicate (the
             * strictest protocol wins them), still an overlap to merge. */
            if (sets_equal(other, ps) && v[j].rule->protocol == v[k].rule->protocol) {
                warn(t, &v[k], WARN_DUP, PC_W_DUPLICATE_RULE, &v[j], "duplicate of rule");
                break;
            }
            if (sets_overlap(other, ps)) {
                warn(t, &v[k], WARN_OVERLAP, PC_W_PORT_OVERLAP, &v[j],
                     "ports overlap those of rule");
                break;
            }
        }
    }
    /* Pass 2: exact rules whose ports a wildcard over their parent covers. */
    for (size_t k = 0; wildcards > 0 && k < n; k++) {
        const pc_rule *r = v[k].rule;
        if (r->wildcard)
            continue;
        const char *dot = strchr(r->host, '.');
        if (!dot || !strchr(dot + 1, '.'))
            continue; /* "*.parent" needs a parent of two labels */
        char wild[PH_HOST_MAX + 3];
        size_t rest = strlen(dot) + 1;
        if (rest + 1 > sizeof wild)
            continue;
        wild[0] = '*';
        memcpy(wild + 1, dot, rest);
        uint32_t head = find_slot(t, v, wild)->index;
        size_t seen = 0;
        for (size_t j = head == EMPTY ? NONE : head; j != NONE && seen < OVERLAP_WINDOW;
             j = v[j].prev_same, seen++) {
            /* An exact rule is matched before a wildcard: with another
             * protocol it decides what its tunnels carry, so it is not
             * redundant. */
            if (v[j].rule->protocol == r->protocol &&
                set_covered(&t->sets[v[k].gid], &t->sets[v[j].gid])) {
                warn(t, &v[k], WARN_COVERED, PC_W_COVERED, &v[j], "already allowed by wildcard rule");
                break;
            }
        }
    }
}

static bool build_sets(lint *t, size_t total)
{
    pc_policy *p = t->L->policy;
    size_t gid = 0;
    for (size_t i = 0; i < p->nlists; i++) {
        for (size_t j = 0; j < p->lists[i].nrules; j++, gid++) {
            const pc_rule *r = &p->lists[i].rules[j];
            port_set *s = &t->sets[gid];
            if (r->nports == 1) { /* already sorted and merged: no copy */
                *s = (port_set){r->ports, 1, NULL};
                continue;
            }
            pc_port_range *m = pc_ports_normalize(r->ports, r->nports, &s->n);
            if (!m)
                return false;
            s->r = m;
            s->owned = m;
        }
    }
    return gid == total;
}

void pc_lint_policy(pc_loader *L)
{
    pc_policy *p = L->policy;
    size_t total = 0;
    size_t *first_gid = malloc((p->nlists ? p->nlists : 1) * sizeof *first_gid);
    size_t *order = malloc((p->nlists ? p->nlists : 1) * sizeof *order);
    for (size_t i = 0; first_gid && i < p->nlists; i++) {
        first_gid[i] = total;
        total += p->lists[i].nrules;
    }
    lint t = {.L = L,
              .sets = calloc(total ? total : 1, sizeof(port_set)),
              .warned = calloc(total ? total : 1, 1)};
    entry *v = NULL;
    if (!first_gid || !order || !t.sets || !t.warned || !build_sets(&t, total)) {
        L->nomem = true;
        goto out;
    }
    size_t effective = 0;
    for (size_t i = 0; i < p->nlists; i++) {
        size_t nl = 0, n = 0;
        if (pc_effective_lists(p, i, order, &nl) != PH_OK) {
            L->nomem = true;
            goto out;
        }
        for (size_t k = 0; k < nl; k++)
            n += p->lists[order[k]].nrules;
        effective += n;
        if (effective > L->limits.max_effective_rules) {
            pc_report(L, PC_E_EFFECTIVE_TOO_LARGE, p->lists[i].pos, "include fewer lists",
                      "list '%s' brings the flattened rules of all lists over %u", p->lists[i].name,
                      L->limits.max_effective_rules);
            goto out;
        }
        entry *nv = realloc(v, (n ? n : 1) * sizeof *v);
        if (nv)
            v = nv;
        size_t want = 16;
        while (want < 2 * n)
            want *= 2;
        if (nv && want > t.nslots) {
            struct slot *ns = realloc(t.slots, want * sizeof *ns);
            if (ns) {
                t.slots = ns;
                t.nslots = want;
            } else {
                nv = NULL;
            }
        }
        if (!nv) {
            L->nomem = true;
            goto out;
        }
        size_t o = 0;
        for (size_t k = 0; k < nl; k++) {
            const pc_list *l = &p->lists[order[k]];
            for (size_t j = 0; j < l->nrules; j++, o++)
                v[o] = (entry){&l->rules[j], first_gid[order[k]] + j, NONE};
        }
        t.list_name = p->lists[i].name;
        lint_entries(&t, v, n);
    }
out:
    for (size_t g = 0; t.sets && g < total; g++)
        free(t.sets[g].owned);
    free(t.sets);
    free(t.warned);
    free(t.slots);
    free(first_gid);
    free(order);
    free(v);
}
