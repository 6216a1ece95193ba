/*
 * fuzz/table.c - the table reader (pinhole/table.h): bytes in, the bytes are
 * opened twice with ph_table_open_buffer, once as they are and once with the
 * header's file size and checksum recomputed (random bytes almost
 * never carry a valid checksum; fixing it lets the fuzzer reach the
 * structural verification behind it). Invariants:
 *   - open never reads out of bounds and either refuses (no table, a
 *     message) or returns a table;
 *   - on an opened table every enumeration and lookup stays in bounds
 *     (ASan), every rule's strings are NUL-terminated and canonical, and
 *     every answer is a valid ph_reason with a rule exactly when allowed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/host.h"
#include "pinhole/table.h"
#include "table_format.h"

#define CHECK(cond)  \
    do {             \
        if (!(cond)) \
            abort(); \
    } while (0)

static void check_answer(const ph_table_explanation *ex)
{
    CHECK((unsigned)ex->result.reason < PH_REASON_COUNT_);
    CHECK(ex->result.allowed == (ex->result.reason == PH_REASON_ALLOWED));
    CHECK(ex->result.has_rule == ex->result.allowed);
    if (ex->result.has_rule)
        CHECK(ex->result.rule.host && ex->result.rule.file && ex->result.rule.line >= 1);
    if (ex->has_near_rule)
        CHECK(ex->near_rule.host && ex->near_rule.list);
}

static void ask(const ph_table *t, const char *list, const char *host, size_t len, uint16_t port)
{
    ph_table_explanation ex;
    ph_status st = ph_table_explain(t, list, host, len, port, &ex);
    CHECK(st == PH_OK || st == PH_E_INVAL);
    check_answer(&ex);
    ph_table_result r;
    st = ph_table_lookup(t, list, host, len, port, &r);
    CHECK(st == PH_OK || st == PH_E_INVAL);
    CHECK(r.allowed == ex.result.allowed && r.reason == ex.result.reason);
}

static void exercise(const ph_table *t)
{
    CHECK(strlen(ph_table_policy_id_hex(t)) == 64);
    size_t nrules = ph_table_rule_count(t);
    for (size_t i = 0; i < nrules && i < 4096; i++) {
        ph_table_rule r;
        CHECK(ph_table_rule_at(t, i, &r) == PH_OK);
        CHECK(strlen(r.host) == r.host_len && r.file[0] != '\0');
        const char *base = r.host[0] == '*' ? r.host + 2 : r.host;
        CHECK(ph_host_check(base, strlen(base), NULL) == PH_HOST_OK);
        char q[260];
        size_t ql = (size_t)snprintf(q, sizeof q, "%s%s", r.host[0] == '*' ? "x." : "", base);
        uint16_t lo, hi;
        for (size_t k = 0; ph_table_rule_port(t, i, k, &lo, &hi) == PH_OK && k < 64; k++) {
            CHECK(lo >= 1 && lo <= hi);
            ask(t, r.list, q, ql, lo);
            ask(t, r.list, q, ql, hi);
            ask(t, r.list, q, ql, (uint16_t)(hi + 1));
        }
        ask(t, r.list, base, strlen(base), 443);
        ask(t, "no-such-list", q, ql, 443);
        ask(t, r.list, "a.b.c.d.e.example.com", 21, 443);
    }
    for (size_t l = 0; l < ph_table_list_count(t) && l < 64; l++) {
        char host[256];
        size_t n;
        uint16_t lo[16], hi[16];
        for (size_t d = 0; ph_table_destination_at(t, l, d, host, &n) == PH_OK && d < 256; d++) {
            size_t got;
            ph_status st = ph_table_destination_ranges(t, l, d, lo, hi, 16, &got);
            CHECK(got == n && (st == PH_OK) == (n <= 16));
        }
    }
}

static void try_open(const uint8_t *data, size_t size)
{
    ph_table *t = NULL;
    ph_diag diag = {0};
    ph_status st = ph_table_open_buffer(data, size, &t, &diag);
    if (st != PH_OK) {
        CHECK(t == NULL && diag.message[0] != '\0');
        return;
    }
    exercise(t);
    ph_table_close(&t);
    CHECK(t == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    try_open(data, size);
    if (size < PH_TAB_FIRST_SECTION || size > ((size_t)16 << 20))
        return 0;
    uint8_t *b = malloc(size);
    if (b == NULL)
        return 0;
    memcpy(b, data, size);
    ph_tab_put64(b + PH_TAB_OFF_FILE_SIZE, size);
    ph_tab_put32(b + PH_TAB_OFF_CHECKSUM, ph_tab_checksum(b, size));
    try_open(b, size);
    free(b);
    return 0;
}
