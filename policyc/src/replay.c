/* replay.c - logged destinations decided again, grouped (replay.h). */
#include "replay.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "diag_format-int.h"
#include "pinhole/diag.h"

void pc_replay_init(pc_replay *rp, size_t max_groups, const char *reference_id)
{
    memset(rp, 0, sizeof *rp);
    rp->max_groups = max_groups != 0 ? max_groups : PC_REPLAY_MAX_GROUPS_DEFAULT;
    if (reference_id != NULL) {
        snprintf(rp->reference_id, sizeof rp->reference_id, "%s", reference_id);
        rp->reference_fixed = true;
    }
}

static void group_free(pc_replay_group *g)
{
    free(g->logged_rule);
    free(g->then_rule);
    free(g->now_rule);
    free(g);
}

void pc_replay_free(pc_replay *rp)
{
    for (size_t i = 0; i < rp->nslots; i++)
        if (rp->slots[i] != NULL)
            group_free(rp->slots[i]);
    free(rp->slots);
    free(rp->sorted);
    memset(rp, 0, sizeof *rp);
}

/* FNV-1a over the group's key. */
static uint64_t key_hash(const pc_log_entry *e)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (const char *s = e->list; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3u;
    h = (h ^ 0xff) * 0x100000001b3u;
    for (const char *s = e->host; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3u;
    h = (h ^ (e->port & 0xff)) * 0x100000001b3u;
    h = (h ^ (e->port >> 8)) * 0x100000001b3u;
    return (h ^ e->allowed) * 0x100000001b3u;
}

static bool key_equal(const pc_replay_group *g, const pc_log_entry *e)
{
    return g->port == e->port && g->logged_allowed == e->allowed && strcmp(g->host, e->host) == 0 &&
           strcmp(g->list, e->list) == 0;
}

/* Doubles the slots (or makes the first 1024). */
static bool grow(pc_replay *rp)
{
    size_t n = rp->nslots ? rp->nslots * 2 : 1024;
    pc_replay_group **s = calloc(n, sizeof *s);
    if (s == NULL)
        return false;
    for (size_t i = 0; i < rp->nslots; i++) {
        pc_replay_group *g = rp->slots[i];
        if (g == NULL)
            continue;
        pc_log_entry k;
        snprintf(k.list, sizeof k.list, "%s", g->list);
        snprintf(k.host, sizeof k.host, "%s", g->host);
        k.port = g->port;
        k.allowed = g->logged_allowed;
        size_t j = key_hash(&k) & (n - 1);
        while (s[j] != NULL)
            j = (j + 1) & (n - 1);
        s[j] = g;
    }
    free(rp->slots);
    rp->slots = s;
    rp->nslots = n;
    return true;
}

static pc_replay_group *group_new(const pc_log_entry *e, const char *file, uint64_t line_no)
{
    size_t ln = strlen(e->list), hn = strlen(e->host);
    pc_replay_group *g = calloc(1, sizeof *g + ln + hn + 2);
    if (g == NULL)
        return NULL;
    char *p = (char *)(g + 1);
    memcpy(p, e->list, ln + 1);
    g->list = p;
    memcpy(p + ln + 1, e->host, hn + 1);
    g->host = p + ln + 1;
    g->port = e->port;
    g->logged_allowed = e->allowed;
    g->first_file = file;
    g->first_line = line_no;
    return g;
}

/* Keeps s as *dst (NULL-safe compare, reallocated only when it differs). */
static bool keep_string(char **dst, const char *s)
{
    if (*dst != NULL && strcmp(*dst, s) == 0)
        return true;
    char *c = strdup(s);
    if (c == NULL)
        return false;
    free(*dst);
    *dst = c;
    return true;
}

static void note_malformed(pc_replay *rp, const char *file, uint64_t line_no, const char *why)
{
    rp->kinds[PC_LOG_MALFORMED]++;
    if (rp->nmalformed < PC_REPLAY_MALFORMED_LISTED)
        rp->malformed[rp->nmalformed++] = (pc_replay_malformed){ file, line_no, why };
}

ph_status pc_replay_line(pc_replay *rp, const char *file, uint64_t line_no, const char *line,
                         size_t len, bool too_long)
{
    rp->read++;
    if (too_long) {
        rp->too_long++;
        note_malformed(rp, file, line_no, "line longer than 64 KiB");
        return PH_OK;
    }
    pc_log_entry e;
    const char *why = NULL;
    pc_log_kind k = pc_log_line_parse(line, len, &e, &why);
    if (k == PC_LOG_MALFORMED) {
        note_malformed(rp, file, line_no, why);
        return PH_OK;
    }
    rp->kinds[k]++;
    if (k != PC_LOG_DECIDED)
        return PH_OK;
    bool other = false;
    if (e.policy_id[0] != '\0') {
        if (rp->reference_id[0] == '\0' && !rp->reference_fixed)
            memcpy(rp->reference_id, e.policy_id, sizeof rp->reference_id);
        other = strcmp(e.policy_id, rp->reference_id) != 0;
    }
    rp->other_policy += other;

    if (rp->nslots == 0 && !grow(rp)) {
        rp->untracked++;
        return PH_E_NOMEM;
    }
    size_t mask = rp->nslots - 1, j = key_hash(&e) & mask;
    while (rp->slots[j] != NULL && !key_equal(rp->slots[j], &e))
        j = (j + 1) & mask;
    pc_replay_group *g = rp->slots[j];
    if (g == NULL) {
        if (rp->ngroups >= rp->max_groups) {
            rp->untracked++;
            return PH_OK;
        }
        g = group_new(&e, file, line_no);
        if (g == NULL) {
            rp->untracked++;
            return PH_E_NOMEM;
        }
        rp->slots[j] = g;
        rp->ngroups++;
        if (rp->ngroups * 2 > rp->nslots && !grow(rp)) {
            /* Still findable in the old slots: only the growth failed. */
            return PH_E_NOMEM;
        }
    }
    g->lines++;
    g->other_policy += other;
    g->logged_reason = e.reason;
    if (!keep_string(&g->logged_rule, e.rule))
        return PH_E_NOMEM;
    if (e.time[0] != '\0') {
        /* The proxy's times are fixed-width UTC (RFC 3339 with
         * milliseconds): text order is time order. */
        if (g->first[0] == '\0' || strcmp(e.time, g->first) < 0)
            memcpy(g->first, e.time, sizeof g->first);
        if (strcmp(e.time, g->last) > 0)
            memcpy(g->last, e.time, sizeof g->last);
    }
    return PH_OK;
}

ph_status pc_replay_read(pc_replay *rp, const char *file, pc_log_read_fn read, void *ctx,
                         ph_diag *diag)
{
    pc_log_reader r;
    ph_status st = pc_log_reader_init(&r, read, ctx, diag);
    if (st != PH_OK)
        return st;
    const char *line;
    size_t len;
    bool too_long;
    while ((st = pc_log_reader_next(&r, &line, &len, &too_long, diag)) == PH_OK) {
        if (pc_replay_line(rp, file, r.line_no, line, len, too_long) != PH_OK) {
            st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
            break;
        }
    }
    pc_log_reader_free(&r);
    return st == PH_E_NOT_FOUND ? PH_OK : st;
}

/* ---- deciding ------------------------------------------------------------- */

/* The decision on dc, and its rule as "file:line" (malloc'd; "" none). */
static char *decide_group(const pc_decider *dc, const pc_replay_group *g, bool *allowed,
                          ph_reason *reason)
{
    char authority[PH_HOST_MAX + 8];
    snprintf(authority, sizeof authority, "%s:%u", g->host, g->port);
    ph_decision d;
    pc_decide(dc, g->list, authority, &d);
    *allowed = d.allowed;
    *reason = d.reason;
    char rule[PC_LOG_RULE_MAX + 1] = "";
    if (d.verdict.has_rule)
        snprintf(rule, sizeof rule, "%s:%u", d.verdict.rule_file, d.verdict.rule_line);
    return strdup(rule);
}

static int cmp_group(const void *a, const void *b)
{
    const pc_replay_group *x = *(pc_replay_group *const *)a, *y = *(pc_replay_group *const *)b;
    int c = strcmp(x->list, y->list);
    if (c == 0)
        c = strcmp(x->host, y->host);
    if (c == 0)
        c = (int)x->port - (int)y->port;
    if (c == 0)
        c = (int)y->logged_allowed - (int)x->logged_allowed;
    return c;
}

ph_status pc_replay_decide(pc_replay *rp, const pc_decider *new_, const pc_decider *old)
{
    rp->sorted = malloc((rp->ngroups ? rp->ngroups : 1) * sizeof *rp->sorted);
    if (rp->sorted == NULL)
        return PH_E_NOMEM;
    size_t n = 0;
    for (size_t i = 0; i < rp->nslots; i++)
        if (rp->slots[i] != NULL)
            rp->sorted[n++] = rp->slots[i];
    qsort(rp->sorted, n, sizeof *rp->sorted, cmp_group);
    for (size_t i = 0; i < n; i++) {
        pc_replay_group *g = rp->sorted[i];
        g->now_rule = decide_group(new_, g, &g->now_allowed, &g->now_reason);
        if (old != NULL) {
            g->then_rule = decide_group(old, g, &g->then_allowed, &g->then_reason);
        } else {
            g->then_allowed = g->logged_allowed;
            g->then_reason = g->logged_allowed ? PH_REASON_ALLOWED : g->logged_reason;
            g->then_rule = strdup(g->logged_rule != NULL ? g->logged_rule : "");
        }
        if (g->now_rule == NULL || g->then_rule == NULL)
            return PH_E_NOMEM;
        g->change = g->then_allowed == g->now_allowed ? PC_REPLAY_UNCHANGED
                    : g->then_allowed                ? PC_REPLAY_NEWLY_REFUSED
                                                     : PC_REPLAY_NEWLY_ALLOWED;
        rp->changes[g->change]++;
        rp->change_lines[g->change] += g->lines;
    }
    return PH_OK;
}

/* ---- the report ----------------------------------------------------------- */

static const char *const change_title[] = {
    [PC_REPLAY_UNCHANGED] = "unchanged",
    [PC_REPLAY_NEWLY_REFUSED] = "newly refused",
    [PC_REPLAY_NEWLY_ALLOWED] = "newly allowed",
};
static const char *const change_key[] = {
    [PC_REPLAY_UNCHANGED] = "unchanged",
    [PC_REPLAY_NEWLY_REFUSED] = "newly_refused",
    [PC_REPLAY_NEWLY_ALLOWED] = "newly_allowed",
};
/* Breakage first, then widening, then the rest. */
static const pc_replay_change change_order[] = {
    PC_REPLAY_NEWLY_REFUSED, PC_REPLAY_NEWLY_ALLOWED, PC_REPLAY_UNCHANGED,
};

static const char *lines_word(uint64_t n) { return n == 1 ? "line" : "lines"; }

/* "allowed by FILE:LINE", "allowed", "refused (REASON), rule FILE:LINE"... */
static void verdict_text(char *buf, size_t cap, bool allowed, ph_reason reason, const char *rule)
{
    if (allowed)
        snprintf(buf, cap, "allowed%s%s", rule[0] ? " by " : "", rule);
    else
        snprintf(buf, cap, "refused (%s)%s%s", ph_reason_code(reason),
                 rule[0] ? ", nearest rule " : "", rule);
}

static void print_text(FILE *out, const pc_replay *rp, const char *new_id, const char *old_id)
{
    fprintf(out, "new policy id %s\n", new_id);
    if (old_id != NULL)
        fprintf(out, "old policy id %s (then: decided again on it)\n", old_id);
    fprintf(out,
            "lines: %" PRIu64 " read, %" PRIu64 " decided by the table, %" PRIu64 " malformed; "
            "skipped: %" PRIu64 " without a destination, %" PRIu64 " without a list, %" PRIu64
            " refused before the table, %" PRIu64 " other events\n",
            rp->read, rp->kinds[PC_LOG_DECIDED], rp->kinds[PC_LOG_MALFORMED],
            rp->kinds[PC_LOG_NO_DESTINATION], rp->kinds[PC_LOG_NO_LIST],
            rp->kinds[PC_LOG_UNDECIDED], rp->kinds[PC_LOG_OTHER_EVENT]);
    if (rp->other_policy)
        fprintf(out, "flagged: %" PRIu64 " decided %s logged under another policy id than %s\n",
                rp->other_policy, lines_word(rp->other_policy), rp->reference_id);
    if (rp->untracked)
        fprintf(out, "incomplete: %" PRIu64 " %s of destinations past the first %zu not tracked\n",
                rp->untracked, lines_word(rp->untracked), rp->max_groups);
    for (size_t c = 0; c < 3; c++) {
        pc_replay_change ch = change_order[c];
        fprintf(out, "%s: %" PRIu64 " destination(s), %" PRIu64 " %s\n", change_title[ch],
                rp->changes[ch], rp->change_lines[ch], lines_word(rp->change_lines[ch]));
        for (size_t i = 0; i < rp->ngroups; i++) {
            const pc_replay_group *g = rp->sorted[i];
            if (g->change != ch)
                continue;
            char then[PC_LOG_RULE_MAX + 64], now[PC_LOG_RULE_MAX + 64];
            verdict_text(then, sizeof then, g->then_allowed, g->then_reason, g->then_rule);
            verdict_text(now, sizeof now, g->now_allowed, g->now_reason, g->now_rule);
            fprintf(out, "  list %s %s:%u: %" PRIu64 " %s", g->list, g->host, g->port, g->lines,
                    lines_word(g->lines));
            if (g->first[0])
                fprintf(out, ", %s .. %s", g->first, g->last);
            fprintf(out, "\n    then: %s\n    now:  %s\n", then, now);
            if (old_id != NULL && g->logged_allowed != g->then_allowed)
                fprintf(out, "    logged: %s (%s): the log disagrees with the old table\n",
                        g->logged_allowed ? "allowed" : "refused",
                        ph_reason_code(g->logged_reason));
            if (g->other_policy)
                fprintf(out, "    flagged: %" PRIu64 " %s under another policy id\n",
                        g->other_policy, lines_word(g->other_policy));
        }
    }
    if (rp->kinds[PC_LOG_MALFORMED]) {
        fprintf(out, "malformed: %" PRIu64 " %s\n", rp->kinds[PC_LOG_MALFORMED],
                lines_word(rp->kinds[PC_LOG_MALFORMED]));
        for (size_t i = 0; i < rp->nmalformed; i++)
            fprintf(out, "  %s:%" PRIu64 ": %s\n", rp->malformed[i].file, rp->malformed[i].line,
                    rp->malformed[i].why);
        if (rp->kinds[PC_LOG_MALFORMED] > rp->nmalformed)
            fprintf(out, "  ... and %" PRIu64 " more\n",
                    rp->kinds[PC_LOG_MALFORMED] - rp->nmalformed);
    }
}

/* A string for JSON: file names may hold bytes that are not UTF-8, which
 * json_string refuses; they are carried with each such byte as \xHH. */
static json_t *jstr(const char *s)
{
    json_t *j = json_string(s);
    if (j != NULL)
        return j;
    char buf[4 * 256 + 1];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && n + 5 < sizeof buf; p++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, *p < 0x80 ? "%c" : "\\x%02x", *p);
    buf[n] = '\0';
    return json_string(buf);
}

static json_t *verdict_json(bool allowed, ph_reason reason, const char *rule)
{
    return json_pack("{s:s, s:s, s:o}", "verdict", allowed ? "allowed" : "refused", "reason",
                     ph_reason_code(reason), "rule", rule[0] ? jstr(rule) : json_null());
}

static ph_status print_json(FILE *out, const pc_replay *rp, const char *new_id, const char *old_id)
{
    json_t *doc = json_pack(
        "{s:s, s:o, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, s:o}", "new_policy_id", new_id,
        "old_policy_id", old_id != NULL ? json_string(old_id) : json_null(), "lines", "read",
        (json_int_t)rp->read, "decided", (json_int_t)rp->kinds[PC_LOG_DECIDED], "malformed",
        (json_int_t)rp->kinds[PC_LOG_MALFORMED], "no_destination",
        (json_int_t)rp->kinds[PC_LOG_NO_DESTINATION], "no_list",
        (json_int_t)rp->kinds[PC_LOG_NO_LIST], "undecided", (json_int_t)rp->kinds[PC_LOG_UNDECIDED],
        "other_events", (json_int_t)rp->kinds[PC_LOG_OTHER_EVENT], "other_policy",
        (json_int_t)rp->other_policy, "untracked", (json_int_t)rp->untracked, "reference_policy_id",
        rp->reference_id[0] ? json_string(rp->reference_id) : json_null());
    if (doc == NULL)
        return PH_E_NOMEM;
    for (size_t c = 0; c < 3; c++) {
        pc_replay_change ch = change_order[c];
        json_t *arr = json_array();
        json_object_set_new(doc, change_key[ch], arr);
        for (size_t i = 0; arr != NULL && i < rp->ngroups; i++) {
            const pc_replay_group *g = rp->sorted[i];
            if (g->change != ch)
                continue;
            json_t *o = json_pack(
                "{s:s, s:s, s:i, s:I, s:I, s:o, s:o, s:o, s:o, s:{s:s, s:s, s:o}}", "list", g->list,
                "host", g->host, "port", (int)g->port, "lines", (json_int_t)g->lines,
                "other_policy_lines", (json_int_t)g->other_policy, "first",
                g->first[0] ? json_string(g->first) : json_null(), "last",
                g->last[0] ? json_string(g->last) : json_null(), "then",
                verdict_json(g->then_allowed, g->then_reason, g->then_rule), "now",
                verdict_json(g->now_allowed, g->now_reason, g->now_rule), "logged", "verdict",
                g->logged_allowed ? "allowed" : "refused", "reason",
                ph_reason_code(g->logged_reason), "rule",
                g->logged_rule[0] ? jstr(g->logged_rule) : json_null());
            if (o == NULL || json_array_append_new(arr, o) != 0) {
                json_decref(doc);
                return PH_E_NOMEM;
            }
        }
    }
    json_t *mal = json_array();
    json_object_set_new(doc, "malformed", mal);
    for (size_t i = 0; mal != NULL && i < rp->nmalformed; i++)
        json_array_append_new(mal, json_pack("{s:o, s:I, s:s}", "file",
                                             jstr(rp->malformed[i].file), "line",
                                             (json_int_t)rp->malformed[i].line, "why",
                                             rp->malformed[i].why));
    int rc = json_dumpf(doc, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(doc);
    fputc('\n', out);
    return rc == 0 ? PH_OK : PH_E_IO;
}

static void print_github(FILE *out, const pc_replay *rp)
{
    for (size_t i = 0; i < rp->ngroups; i++) {
        const pc_replay_group *g = rp->sorted[i];
        if (g->change == PC_REPLAY_UNCHANGED)
            continue;
        char then[PC_LOG_RULE_MAX + 64], now[PC_LOG_RULE_MAX + 64], msg[1024];
        verdict_text(then, sizeof then, g->then_allowed, g->then_reason, g->then_rule);
        verdict_text(now, sizeof now, g->now_allowed, g->now_reason, g->now_rule);
        snprintf(msg, sizeof msg, "list %s %s:%u: %" PRIu64 " %s; then %s; now %s", g->list,
                 g->host, g->port, g->lines, lines_word(g->lines), then, now);
        fprintf(out, "::%s file=", g->change == PC_REPLAY_NEWLY_REFUSED ? "error" : "warning");
        pc_github_escape(out, g->first_file, true);
        fprintf(out, ",line=%" PRIu64 ",title=%s::", g->first_line, change_title[g->change]);
        pc_github_escape(out, msg, false);
        fputc('\n', out);
    }
    for (size_t i = 0; i < rp->nmalformed; i++) {
        fputs("::warning file=", out);
        pc_github_escape(out, rp->malformed[i].file, true);
        fprintf(out, ",line=%" PRIu64 ",title=malformed log line::", rp->malformed[i].line);
        pc_github_escape(out, rp->malformed[i].why, false);
        fputc('\n', out);
    }
    fprintf(out,
            "::notice title=policyc replay::%" PRIu64 " newly refused, %" PRIu64
            " newly allowed, %" PRIu64 " unchanged destination(s); %" PRIu64
            " malformed line(s)\n",
            rp->changes[PC_REPLAY_NEWLY_REFUSED], rp->changes[PC_REPLAY_NEWLY_ALLOWED],
            rp->changes[PC_REPLAY_UNCHANGED], rp->kinds[PC_LOG_MALFORMED]);
}

ph_status pc_replay_print(FILE *out, const pc_replay *rp, pc_replay_format format,
                          const char *new_id, const char *old_id)
{
    ph_status st = PH_OK;
    switch (format) {
    case PC_REPLAY_TEXT: print_text(out, rp, new_id, old_id); break;
    case PC_REPLAY_JSON: st = print_json(out, rp, new_id, old_id); break;
    case PC_REPLAY_GITHUB: print_github(out, rp); break;
    }
    return st != PH_OK ? st : ferror(out) ? PH_E_IO : PH_OK;
}
