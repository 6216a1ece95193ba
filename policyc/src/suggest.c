/* suggest.c - closest-candidate search for did-you-mean help lines. */
#include "suggest.h"

#include <string.h>

#define WORD_MAX 64

/* Optimal string alignment distance (Levenshtein + adjacent transposition),
 * three rolling rows; both strings at most WORD_MAX bytes. */
static size_t distance(const char *a, size_t la, const char *b, size_t lb)
{
    size_t rows[3][WORD_MAX + 1];
    size_t *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            size_t best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (prev[j - 1] + cost < best)
                best = prev[j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                prev2[j - 2] + 1 < best)
                best = prev2[j - 2] + 1;
            cur[j] = best;
        }
        size_t *t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    return prev[lb];
}

const char *pc_suggest(const char *word, const char *const *candidates, size_t ncandidates)
{
    size_t lw = strlen(word);
    if (lw == 0 || lw > WORD_MAX)
        return NULL;
    size_t limit = lw / 3 < 2 ? (lw >= 3 ? 2 : 1) : 2;
    const char *best = NULL;
    size_t best_d = limit + 1;
    for (size_t i = 0; i < ncandidates; i++) {
        size_t lc = strlen(candidates[i]);
        if (lc > WORD_MAX || strcmp(word, candidates[i]) == 0)
            continue;
        size_t d = distance(word, lw, candidates[i], lc);
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    /* Too far to be a typo, but an elaboration of a candidate: host_name,
     * hostname and port_list mean host and ports. */
    for (size_t i = 0; !best && i < ncandidates; i++) {
        size_t lc = strlen(candidates[i]);
        if (lc >= 4 && lw > lc && strncmp(word, candidates[i], lc) == 0)
            best = candidates[i];
    }
    return best;
}
