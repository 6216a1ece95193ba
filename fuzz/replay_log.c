/* replay_log.c - fuzzer for policyc replay's log reader and line parser
 * (policyc/src/replay_log.c). Invariants beyond "no crash":
 *   - the reader returns exactly the input's lines: each at most
 *     PC_LOG_LINE_MAX bytes, none holding '\n', in order, and the lines
 *     (each followed by '\n') rebuild the input, a line over the limit
 *     standing for itself; whatever size the reads come in;
 *   - one line is one kind; a decided line has a canonical host, a port, a
 *     list of 1..64 bytes and a policy id of 0 or 64 lowercase hex digits;
 *   - parsing is deterministic: the same line gives the same entry;
 *   - replay's counts add up: every line read has exactly one kind.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

#define CHECK(cond)      \
    do {                 \
        if (!(cond))     \
            abort();     \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_entry(const pc_log_entry *e)
{
    size_t hn = strnlen(e->host, sizeof e->host);
    CHECK(hn > 0 && hn <= PH_HOST_MAX && ph_host_check(e->host, hn, NULL) == PH_HOST_OK);
    CHECK(e->port >= 1);
    size_t ln = strnlen(e->list, sizeof e->list);
    CHECK(ln >= 1 && ln <= PC_LOG_LIST_MAX);
    size_t pn = strnlen(e->policy_id, sizeof e->policy_id);
    CHECK(pn == 0 || pn == PH_TABLE_ID_HEX_LEN);
    for (size_t i = 0; i < pn; i++)
        CHECK((e->policy_id[i] >= '0' && e->policy_id[i] <= '9') ||
              (e->policy_id[i] >= 'a' && e->policy_id[i] <= 'f'));
    CHECK(strnlen(e->rule, sizeof e->rule) < sizeof e->rule);
    CHECK(strnlen(e->time, sizeof e->time) < sizeof e->time);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    /* The first byte picks the read size (0: as much as fits). */
    pc_log_mem s = { (const char *)data + 1, size - 1, 0, data[0] % 17 };
    pc_log_reader r;
    if (pc_log_reader_init(&r, pc_log_mem_read, &s, NULL) != PH_OK)
        return 0;
    pc_replay rp;
    pc_replay_init(&rp, 64, NULL);
    size_t at = 0; /* where the next line starts in the input */
    const char *line;
    size_t len;
    bool too_long;
    ph_status st;
    while ((st = pc_log_reader_next(&r, &line, &len, &too_long, NULL)) == PH_OK) {
        const char *in = s.p + at;
        const char *nl = memchr(in, '\n', s.len - at);
        size_t real = nl != NULL ? (size_t)(nl - in) : s.len - at;
        if (too_long) {
            CHECK(len == 0 && real > PC_LOG_LINE_MAX);
        } else {
            CHECK(len == real && len <= PC_LOG_LINE_MAX);
            CHECK(memcmp(line, in, len) == 0);
        }
        at += real + (nl != NULL);
        if (!too_long) {
            pc_log_entry a, b;
            const char *wa = NULL, *wb = NULL;
            pc_log_kind ka = pc_log_line_parse(line, len, &a, &wa);
            pc_log_kind kb = pc_log_line_parse(line, len, &b, &wb);
            CHECK(ka == kb && ka <= PC_LOG_MALFORMED);
            CHECK(ka != PC_LOG_MALFORMED || (wa != NULL && wa == wb));
            if (ka == PC_LOG_DECIDED) {
                check_entry(&a);
                CHECK(strcmp(a.host, b.host) == 0 && a.port == b.port &&
                      strcmp(a.list, b.list) == 0 && a.allowed == b.allowed &&
                      strcmp(a.rule, b.rule) == 0 && strcmp(a.policy_id, b.policy_id) == 0);
            }
        }
        CHECK(pc_replay_line(&rp, "fuzz", r.line_no, line, len, too_long) == PH_OK);
    }
    CHECK(st == PH_E_NOT_FOUND);
    CHECK(at == s.len);
    uint64_t sum = 0;
    for (size_t k = 0; k <= PC_LOG_MALFORMED; k++)
        sum += rp.kinds[k];
    CHECK(sum == rp.read && rp.read == r.line_no);
    CHECK(rp.ngroups <= 64);
    pc_replay_free(&rp);
    pc_log_reader_free(&r);
    return 0;
}
