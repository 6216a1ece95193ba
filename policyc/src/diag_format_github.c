/* diag_format_github.c - GitHub Actions workflow commands:
 *   ::error file=F,line=L,col=C,title=PC011::message
 * Values are escaped as the runner expects: '%', CR and LF everywhere, and
 * ':' and ',' inside properties. The help line follows the message after an
 * escaped newline so the annotation shows it. */
#include "diag_format-int.h"

void pc_github_escape(FILE *out, const char *s, bool property)
{
    for (; *s; s++) {
        switch (*s) {
        case '%': fputs("%25", out); break;
        case '\r': fputs("%0D", out); break;
        case '\n': fputs("%0A", out); break;
        case ':': fputs(property ? "%3A" : ":", out); break;
        case ',': fputs(property ? "%2C" : ",", out); break;
        default: fputc(*s, out);
        }
    }
}

ph_status pc_format_github(FILE *out, const pc_diagnostics *d)
{
    for (size_t i = 0; i < d->count; i++) {
        const pc_diagnostic *x = &d->items[i];
        fprintf(out, "::%s file=", pc_severity_name(x->severity));
        pc_github_escape(out, x->file, true);
        if (x->line)
            fprintf(out, ",line=%u,col=%u", x->line, x->col);
        fprintf(out, ",title=PC%03d::", (int)x->code);
        pc_github_escape(out, x->message, false);
        if (x->help) {
            fputs("%0Ahelp: ", out);
            pc_github_escape(out, x->help, false);
        }
        fputc('\n', out);
    }
    return ferror(out) ? PH_E_IO : PH_OK;
}
