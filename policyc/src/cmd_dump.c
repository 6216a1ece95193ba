/*
 * cmd_dump.c - policyc dump TABLE: the table's canonical policy as YAML.
 *
 * Flattened (every list with all its rules, no include), lists sorted by
 * name, rules in the table's canonical order, ports sorted and merged, and
 * each rule's provenance kept in `source: "file:line"`, so compiling the
 * output gives back the very same bytes: compile(dump(T)) == T.
 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "dump.h"
#include "table_input.h"

static void usage(FILE *out)
{
    fputs("Usage: policyc dump TABLE\n"
          "\n"
          "Print the canonical policy of TABLE (or of an allowlist FILE, compiled in\n"
          "memory) as allowlist YAML on standard output: lists sorted by name and\n"
          "flattened (included rules copied in), rules in canonical order, each with\n"
          "its provenance as `source: \"file:line\"`. Compiling the output gives a\n"
          "table byte-identical to TABLE.\n"
          "\n"
          "Options:\n"
          "  -h, --help  show this help\n"
          "\n"
          "Exit status: 0 printed, 1 FILE is an allowlist with errors,\n"
          "2 usage error or unreadable/corrupt input.\n",
          out);
}

/* A YAML double-quoted scalar: '"' and '\' escaped, control bytes as \xNN;
 * other bytes (validated UTF-8) verbatim. */
static void put_quoted(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(out, "\\x%02x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void dump_rule(FILE *out, const ph_table *t, size_t i)
{
    ph_table_rule r;
    ph_table_rule_at(t, i, &r);
    fputs("      - host: ", out);
    put_quoted(out, r.host);
    fputs("\n        ports: [", out);
    uint16_t lo, hi;
    for (size_t k = 0; ph_table_rule_port(t, i, k, &lo, &hi) == PH_OK; k++) {
        if (lo == hi)
            fprintf(out, "%s%u", k ? ", " : "", lo);
        else
            fprintf(out, "%s\"%u-%u\"", k ? ", " : "", lo, hi);
    }
    fputs("]\n", out);
    if (r.protocol != PH_PROTOCOL_DEFAULT)
        fprintf(out, "        protocol: %s\n", ph_protocol_name(r.protocol));
    if (r.reason != NULL) {
        fputs("        reason: ", out);
        put_quoted(out, r.reason);
        fputc('\n', out);
    }
    /* file:line as one string; the loader splits at the last ':'. */
    char src[4200];
    snprintf(src, sizeof src, "%s:%u", r.file, r.line);
    fputs("        source: ", out);
    put_quoted(out, src);
    fputc('\n', out);
}

int pc_dump_table(FILE *out, const ph_table *t)
{
    fprintf(out, "# Canonical policy dumped by policyc from a compiled table.\n"
                 "# policy id: %s\nversion: 1\nlists:\n",
            ph_table_policy_id_hex(t));
    for (size_t l = 0; l < ph_table_list_count(t); l++) {
        const char *name;
        size_t first, count;
        ph_table_list_at(t, l, &name, &first, &count);
        fputs("  ", out);
        put_quoted(out, name);
        fputs(":\n    rules:\n", out);
        for (size_t i = first; i < first + count; i++)
            dump_rule(out, t, i);
    }
    return fflush(out) == 0 && !ferror(out) ? 0 : 2;
}

int pc_cmd_dump(int argc, char **argv)
{
    int first;
    int rc = pc_args_operands_only(argc, argv, 1, "exactly one TABLE", usage, &first);
    if (rc >= 0)
        return rc;
    ph_table *t = NULL;
    rc = pc_open_table_input("dump", argv[first], &t, NULL);
    if (rc != 0)
        return rc;
    rc = pc_dump_table(stdout, t);
    if (rc != 0)
        fputs("policyc dump: write error\n", stderr);
    ph_table_close(&t);
    return rc;
}
