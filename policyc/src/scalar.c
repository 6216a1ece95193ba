/* scalar.c - allowlist scalars: see scalar.h. */
#include "scalar.h"

#include <stdio.h>
#include <string.h>

#include "pinhole/host.h"

pc_scalar pc_scalar_of(const ph_yaml_node *n)
{
    pc_scalar s = {n->u.text, n->len, n->style == PH_YAML_PLAIN, (n->flags & PH_YAML_VERBATIM) != 0,
                   pc_node_pos(n)};
    return s;
}

const char *pc_node_kind(const ph_yaml_node *n)
{
    switch (n->kind) {
    case PH_YAML_SCALAR: return "a string";
    case PH_YAML_SEQUENCE: return "a sequence";
    case PH_YAML_MAPPING: return "a mapping";
    case PH_YAML_REFUSED: return "an alias";
    default: return "nothing";
    }
}

bool pc_scalar_require_literal(pc_loader *L, const pc_scalar *s, const char *what)
{
    if (s->literal)
        return true;
    char q[PC_QUOTE_MAX], help[PC_QUOTE_MAX + 64];
    snprintf(help, sizeof help, "write it out on one line as it is: \"%s\"", pc_quote_scalar(q, s));
    pc_report(L, PC_E_NOT_LITERAL, s->pos, help,
              "%s must be written literally: no escape sequences, line breaks or block scalars",
              what);
    return false;
}

static bool word_in(const pc_scalar *s, const char *const *words, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s->len == strlen(words[i]) && memcmp(s->value, words[i], s->len) == 0)
            return true;
    return false;
}

/* A plain empty value, `~` or `null`: YAML's ways of writing nothing. */
bool pc_scalar_is_null(const pc_scalar *s)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    return s->plain && word_in(s, nulls, sizeof nulls / sizeof *nulls);
}

static bool all_of(const char *p, size_t n, const char *set)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!p[i] || !strchr(set, p[i]))
            return false;
    return true;
}

/* YAML 1.1 and 1.2 numbers: [-+] then 0x.., 0o.., 0b.., 0.. (octal),
 * digits with '_' (1.1), sexagesimal d:ss, or a float with '.', exponent,
 * .inf or .nan. */
static bool yaml_number(const char *p, size_t n)
{
    static const char *const special[] = {".inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN"};
    if (n > 0 && (p[0] == '-' || p[0] == '+'))
        p++, n--;
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        if (n == strlen(special[i]) && memcmp(p, special[i], n) == 0)
            return true;
    if (n > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        return all_of(p + 2, n - 2, "0123456789abcdefABCDEF_");
    if (n > 2 && p[0] == '0' && (p[1] == 'o' || p[1] == 'O'))
        return all_of(p + 2, n - 2, "01234567_");
    if (n > 2 && p[0] == '0' && (p[1] == 'b' || p[1] == 'B'))
        return all_of(p + 2, n - 2, "01_");
    /* Mantissa: digits, '_', ':' (sexagesimal) and at most one '.', with at
     * least one digit; then an optional exponent. */
    size_t i = 0, digits = 0, dots = 0;
    for (; i < n && (ph_is_digit((unsigned char)p[i]) || p[i] == '_' || p[i] == ':' || p[i] == '.'); i++) {
        digits += ph_is_digit((unsigned char)p[i]);
        dots += p[i] == '.';
    }
    if (digits == 0 || dots > 1 || p[0] == '_' || p[0] == ':')
        return false;
    if (i == n)
        return true;
    if (p[i] != 'e' && p[i] != 'E')
        return false;
    i++;
    if (i < n && (p[i] == '-' || p[i] == '+'))
        i++;
    return all_of(p + i, n - i, "0123456789");
}

const char *pc_scalar_yaml_type(const pc_scalar *s)
{
    static const char *const booleans[] = {
        "true", "True", "TRUE", "false", "False", "FALSE", "yes", "Yes", "YES", "no", "No", "NO",
        "on", "On", "ON", "off", "Off", "OFF", "y", "Y", "n", "N"};
    if (!s->plain)
        return NULL;
    if (pc_scalar_is_null(s))
        return "null";
    if (word_in(s, booleans, sizeof booleans / sizeof *booleans))
        return "a boolean";
    if (yaml_number(s->value, s->len))
        return "a number";
    return NULL;
}
