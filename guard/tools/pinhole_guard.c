/* pinhole_guard.c - pinhole-guard: check URLs against an allowlist table,
 * classify addresses, issue and verify grants, generate grant keys. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/addr.h"
#include "pinhole/version.h"
#include "tools.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"check", pg_cmd_check, "the verdict for each URL (allowlist, optionally DNS)"},
    {"addr", pg_cmd_addr, "the denylist verdict for each IP address"},
    {"grant", pg_cmd_grant, "issue or verify a network grant"},
    {"keygen", pg_cmd_keygen, "generate a grant key (key-file line)"},
    {"revoke", pg_cmd_revoke, "add a lease to a revocation list, atomically"},
};

static void usage(FILE *out)
{
    fputs("Usage: pinhole-guard COMMAND [OPTIONS] ARGS...\n\nCommands:\n", out);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(out, "  %-7s %s\n", commands[i].name, commands[i].summary);
    fputs("\nRun 'pinhole-guard COMMAND --help' for a command's options.\n"
          "Exit status: 0 all allowed (or valid), 1 any refused (or invalid),\n"
          "2 usage error or unusable input file.\n",
          out);
}

void pg_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("pinhole-guard: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void pg_print_json(json_t *obj)
{
    char *s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    if (s != NULL) {
        puts(s);
        free(s);
    }
    json_decref(obj);
}

void pg_print_quoted(const char *s)
{
    putchar('"');
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            putchar('\\');
        putchar(c >= 0x20 && c < 0x7f ? c : '?');
    }
    putchar('"');
}

bool pg_parse_uint(const char *s, unsigned long long min, unsigned long long max,
                   unsigned long long *out)
{
    if (s == NULL || s[0] < '0' || s[0] > '9')
        return false;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return false;
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return EXIT_ALLOWED;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("pinhole-guard %s%s\n", ph_version(),
               ph_build_is_test_loopback()
                   ? " (TEST BUILD: loopback exempt from the address denylist)"
                   : "");
        return EXIT_ALLOWED;
    }
    if (ph_build_is_test_loopback())
        pg_error("warning: TEST BUILD, 127.0.0.0/8 and ::1 are exempt from the address "
                 "denylist");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    pg_error("unknown command '%s'", argv[1]);
    usage(stderr);
    return EXIT_USAGE;
}
