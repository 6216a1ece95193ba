/*
 * source_map.h - positions in an allowlist's text, counted the way libyaml
 * counts them, so a position computed from a byte offset (libyaml reader
 * errors give only that) and one from a libyaml mark agree.
 *
 * Lines end at "\r\n", "\r", "\n", NEL (U+0085), LS (U+2028) or PS (U+2029),
 * as in libyaml's scanner. Columns count characters: a valid UTF-8 sequence
 * is one column, and so is each byte of an invalid sequence.
 */
#ifndef POLICYC_SOURCE_MAP_H
#define POLICYC_SOURCE_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/utf8.h"
#include "policy.h"

typedef struct pc_source {
    const char *data; /* borrowed */
    size_t len;
    size_t *line_starts; /* built on first use: a file without errors never pays */
    size_t nlines;
    int index_failed;
} pc_source;

void pc_source_init(pc_source *src, const char *data, size_t len);
void pc_source_free(pc_source *src);

/* Characters are decoded with ph_utf8_decode (pinhole/utf8.h): an invalid
 * byte counts as a character of length 1. */

/* A character a reader cannot see or that changes how the text around it is
 * displayed: C1 controls (NEL included) and every invisible code point
 * (ph_unicode_is_invisible: LS, PS, bidirectional marks, embeddings,
 * overrides and isolates, zero-width characters, the soft hyphen, the byte
 * order mark, interlinear annotations, variation selectors, tags, ...).
 * Such characters are escaped in messages, shown as '?' in source lines and
 * refused in reasons. */
bool pc_code_point_hidden(uint32_t cp);

/* The subset of pc_code_point_hidden refused anywhere in a file, comments
 * included: the line breaks libyaml honours but editors do not (NEL, LS, PS),
 * bidirectional embeddings, overrides and isolates (CVE-2021-42574, "Trojan
 * Source"), and U+FEFF past the start. Each can make the text a reviewer sees
 * differ from what libyaml parses. */
bool pc_code_point_deceptive(uint32_t cp);

/* The 1-based position of byte `offset` (clamped to len), as the YAML
 * reader counts (ph_yaml_pos_of_offset). O(offset). */
pc_pos pc_source_pos_of_offset(const pc_source *src, size_t offset);

/* The text of 1-based `line`, without its line break, made printable: every
 * invalid UTF-8 byte, every control character but tab and every hidden
 * character (pc_code_point_hidden) becomes '?', so the
 * column count is unchanged. Truncated after PC_SOURCE_LINE_MAX characters.
 * Returns a malloc'd string, or NULL (no such line, or out of memory). */
#define PC_SOURCE_LINE_MAX 512u
char *pc_source_line_text(pc_source *src, uint32_t line);

#endif
