/* suggest.h - "did you mean ...?" for misspelt keys and list names. */
#ifndef POLICYC_SUGGEST_H
#define POLICYC_SUGGEST_H

#include <stddef.h>

/* The candidate closest to word (optimal string alignment distance: typos,
 * a missing or extra letter, two swapped letters), or NULL when none is close
 * enough to be a plausible typo (distance > 2, or > a third of word's length).
 * Words longer than 64 bytes get no suggestion. */
const char *pc_suggest(const char *word, const char *const *candidates, size_t ncandidates);

#endif
