/* source_map.c - byte offsets to (line, column) and line texts; see source_map.h. */
#include "source_map.h"

#include "pinhole/utf8.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/yaml_reader.h"

void pc_source_init(pc_source *src, const char *data, size_t len)
{
    memset(src, 0, sizeof *src);
    src->data = data;
    src->len = len;
}

void pc_source_free(pc_source *src)
{
    free(src->line_starts);
    src->line_starts = NULL;
    src->nlines = 0;
}

bool pc_code_point_deceptive(uint32_t cp)
{
    return cp == 0x85 || cp == 0x2028 || cp == 0x2029 || /* line breaks to libyaml only */
           ph_unicode_is_bidi_override(cp) ||             /* LRE RLE PDF LRO RLO LRI RLI FSI PDI */
           cp == 0xFEFF;
}

bool pc_code_point_hidden(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9F) || ph_unicode_is_invisible(cp);
}

pc_pos pc_source_pos_of_offset(const pc_source *src, size_t offset)
{
    /* The reader's own count: a position from an offset and one from the
     * reader always agree. */
    ph_yaml_pos p = ph_yaml_pos_of_offset(src->data, src->len, offset);
    return (pc_pos){p.line, p.col};
}

static int build_index(pc_source *src)
{
    if (src->line_starts || src->index_failed)
        return src->line_starts ? 0 : -1;
    size_t cap = 1024, n = 0;
    size_t *starts = malloc(cap * sizeof *starts);
    if (!starts)
        goto fail;
    starts[n++] = 0;
    for (size_t i = 0; i < src->len;) {
        size_t br = ph_yaml_line_break_len(src->data, src->len, i);
        if (!br) {
            i++;
            continue;
        }
        i += br;
        if (n == cap) {
            size_t *g = realloc(starts, cap * 2 * sizeof *g);
            if (!g)
                goto fail;
            starts = g;
            cap *= 2;
        }
        starts[n++] = i;
    }
    src->line_starts = starts;
    src->nlines = n;
    return 0;
fail:
    free(starts);
    src->index_failed = 1;
    return -1;
}

char *pc_source_line_text(pc_source *src, uint32_t line)
{
    if (line == 0 || build_index(src) != 0 || line > src->nlines)
        return NULL;
    size_t i = src->line_starts[line - 1];
    char *out = malloc(PC_SOURCE_LINE_MAX * 4 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (unsigned chars = 0; i < src->len && chars < PC_SOURCE_LINE_MAX; chars++) {
        if (ph_yaml_line_break_len(src->data, src->len, i))
            break;
        const unsigned char *p = (const unsigned char *)src->data + i;
        uint32_t cp;
        size_t n = ph_utf8_decode(p, src->len - i, &cp);
        /* Control characters (C0 but tab, DEL, C1) would garble a terminal. */
        bool control = (n == 1 && ((p[0] < 0x20 && p[0] != '\t') || p[0] == 0x7F)) ||
                       (n > 1 && pc_code_point_hidden(cp));
        if ((n == 1 && p[0] >= 0x80) || control) {
            out[o++] = '?';
        } else {
            memcpy(out + o, p, n);
            o += n;
        }
        i += n;
    }
    out[o] = '\0';
    return out;
}
