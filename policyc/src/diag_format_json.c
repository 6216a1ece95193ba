/* diag_format_json.c - the JSON and SARIF 2.1.0 printers (jansson).
 * Both schemas are documented in docs/policyc.md. */
#include <jansson.h>
#include <stdio.h>

#include "diag_format-int.h"

static int json_out(FILE *out, json_t *doc)
{
    if (!doc)
        return -1;
    int rc = json_dumpf(doc, out, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    json_decref(doc);
    if (rc == 0)
        fputc('\n', out);
    return rc;
}

static void code_string(char buf[static 8], pc_code code)
{
    snprintf(buf, 8, "PC%03d", (int)code & 0xfff);
}

/* Strings come from user files and may hold invalid UTF-8 in a message's
 * quoted excerpt only if the loader let it through; json_stringn refuses
 * such input, so fall back to an escaped copy rather than dropping the record. */
static json_t *str(const char *s)
{
    if (!s)
        return json_null();
    json_t *j = json_string(s);
    if (j)
        return j;
    char buf[1024];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && n + 5 < sizeof buf; p++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, *p < 0x80 ? "%c" : "\\x%02x", *p);
    buf[n] = '\0';
    return json_string(buf);
}

ph_status pc_format_json(FILE *out, const pc_diagnostics *d)
{
    json_t *list = json_array();
    for (size_t i = 0; list && i < d->count; i++) {
        const pc_diagnostic *x = &d->items[i];
        char code[8];
        code_string(code, x->code);
        json_array_append_new(list, json_pack("{s:o, s:I, s:I, s:s, s:s, s:o, s:o}",
                                              "file", str(x->file), "line", (json_int_t)x->line,
                                              "column", (json_int_t)x->col, "severity",
                                              pc_severity_name(x->severity), "code", code,
                                              "message", str(x->message), "help", str(x->help)));
    }
    json_t *doc = json_pack("{s:s, s:I, s:I, s:I, s:o}", "schema", "pinhole-policyc-check/1",
                            "errors", (json_int_t)d->errors, "warnings",
                            (json_int_t)d->warnings, "not_shown", (json_int_t)d->dropped,
                            "diagnostics", list);
    return json_out(out, doc) == 0 && !ferror(out) ? PH_OK : PH_E_IO;
}

ph_status pc_format_sarif(FILE *out, const pc_diagnostics *d)
{
    size_t ncodes;
    const pc_code_info *codes = pc_code_all(&ncodes);
    json_t *rules = json_array();
    for (size_t i = 0; rules && i < ncodes; i++) {
        char code[8];
        code_string(code, codes[i].code);
        json_array_append_new(
            rules, json_pack("{s:s, s:s, s:{s:s}, s:{s:s}}", "id", code, "name",
                             codes[i].name, "shortDescription", "text", codes[i].title,
                             "defaultConfiguration", "level",
                             pc_severity_name(codes[i].severity)));
    }
    json_t *results = json_array();
    for (size_t i = 0; results && i < d->count; i++) {
        const pc_diagnostic *x = &d->items[i];
        char code[8];
        code_string(code, x->code);
        size_t index = 0;
        while (index < ncodes && codes[index].code != x->code)
            index++;
        char text[1200];
        if (x->help)
            snprintf(text, sizeof text, "%s\nhelp: %s", x->message, x->help);
        else
            snprintf(text, sizeof text, "%s", x->message);
        json_t *region = x->line ? json_pack("{s:I, s:I}", "startLine", (json_int_t)x->line,
                                             "startColumn", (json_int_t)x->col)
                                 : NULL;
        json_t *phys = json_pack("{s:{s:o}}", "artifactLocation", "uri", str(x->file));
        if (phys && region)
            json_object_set_new(phys, "region", region);
        else
            json_decref(region);
        json_array_append_new(results,
                              json_pack("{s:s, s:I, s:s, s:{s:o}, s:[{s:o}]}", "ruleId", code,
                                        "ruleIndex", (json_int_t)index, "level",
                                        pc_severity_name(x->severity), "message", "text",
                                        str(text), "locations", "physicalLocation", phys));
    }
    json_t *doc = json_pack(
        "{s:s, s:s, s:[{s:{s:{s:s, s:o}}, s:s, s:o}]}", "$schema",
        "https://json.schemastore.org/sarif-2.1.0.json", "version", "2.1.0", "runs", "tool",
        "driver", "name", "policyc", "rules", rules, "columnKind", "unicodeCodePoints", "results", results);
    return json_out(out, doc) == 0 && !ferror(out) ? PH_OK : PH_E_IO;
}
