/* diag_format_text.c - the human format:
 *
 *   file:line:col: error[PC011]: unknown key 'port' in a rule
 *      3 |       port: [443]
 *        |       ^
 *     help: did you mean 'ports'?
 */
#include <string.h>

#include "diag_format-int.h"

const char *pc_severity_name(pc_severity s)
{
    return s == PC_SEV_WARNING ? "warning" : "error";
}

/* The caret line repeats the source's tabs so the caret lines up under the
 * column on any tab width; every other character before it becomes one space
 * (columns count characters, so a multi-byte UTF-8 sequence is one space). */
static void print_caret(FILE *out, const char *src, uint32_t col)
{
    const unsigned char *p = (const unsigned char *)src;
    for (uint32_t c = 1; c < col && *p; c++) {
        fputc(*p == '\t' ? '\t' : ' ', out);
        p++;
        while ((*p & 0xC0) == 0x80)
            p++;
    }
    fputs("^\n", out);
}

ph_status pc_format_text(FILE *out, const pc_diagnostics *d)
{
    for (size_t i = 0; i < d->count; i++) {
        const pc_diagnostic *x = &d->items[i];
        if (x->line)
            fprintf(out, "%s:%u:%u: ", x->file, x->line, x->col);
        else
            fprintf(out, "%s: ", x->file);
        fprintf(out, "%s[PC%03d]: %s\n", pc_severity_name(x->severity), (int)x->code, x->message);
        if (x->line && x->source_line) {
            fprintf(out, "%6u | %s\n", x->line, x->source_line);
            fputs("       | ", out);
            print_caret(out, x->source_line, x->col);
        }
        if (x->help)
            fprintf(out, "  help: %s\n", x->help);
    }
    if (d->dropped)
        fprintf(out, "note: %zu more diagnostics not shown\n", d->dropped);
    return ferror(out) ? PH_E_IO : PH_OK;
}
