/* cmd_grant.c - pinhole-guard grant issue | verify. */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "grant-int.h"
#include "pinhole/grant.h"
#include "tools.h"

#define TTL_MAX (366ULL * 24 * 3600)

static void grant_usage(FILE *out)
{
    fputs("Usage: pinhole-guard grant issue --keys FILE --tenant T --lease L --list NAME\n"
          "                                 [--ttl SECONDS] [--not-before UNIX] [--kid KID]\n"
          "                                 [--format token|basic|bearer]\n"
          "       pinhole-guard grant verify --keys FILE [--list NAME] [--now UNIX] [--json]\n"
          "                                  [--header VALUE | TOKEN...]\n"
          "issue prints one token signed with the key file's first key (or --kid);\n"
          "--format basic/bearer prints a whole Proxy-Authorization value instead.\n"
          "verify prints one VALID or INVALID line per token (tokens read one per line\n"
          "from stdin when none is given); --header verifies a Proxy-Authorization value.\n"
          "  -k, --keys FILE   grant key file, mode 0600 (default: $PINHOLE_GRANT_KEYS)\n"
          "      --ttl S       lifetime in seconds (default 3600, at most one year)\n"
          "      --now UNIX    verify as of this time (default: the clock)\n"
          "Exit status: 0 issued / all valid, 1 any invalid, 2 usage error or unusable key file.\n",
          out);
}

static ph_keyring *load_keys(const char *path)
{
    if (path == NULL || path[0] == '\0') {
        pg_error("no key file: give --keys FILE or set PINHOLE_GRANT_KEYS");
        return NULL;
    }
    ph_keyring *kr = NULL;
    ph_diag d;
    if (ph_keyring_load_file(path, &kr, &d) != PH_OK) {
        pg_error("%s", d.message);
        return NULL;
    }
    return kr;
}

static bool copy_field(char *dst, const char *src, const char *what)
{
    size_t n = src != NULL ? strlen(src) : 0;
    if (!ph_grant_field_valid(src != NULL ? src : "", n)) {
        pg_error("--%s must be 1..%d characters of [A-Za-z0-9._-]", what, PH_GRANT_FIELD_MAX);
        return false;
    }
    memcpy(dst, src, n + 1);
    return true;
}

static int grant_issue(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"keys", required_argument, NULL, 'k'},   {"tenant", required_argument, NULL, 'T'},
        {"lease", required_argument, NULL, 'L'},  {"list", required_argument, NULL, 'l'},
        {"ttl", required_argument, NULL, 't'},    {"not-before", required_argument, NULL, 'n'},
        {"kid", required_argument, NULL, 'K'},    {"format", required_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    const char *keys = getenv("PINHOLE_GRANT_KEYS"), *tenant = NULL, *lease = NULL,
               *list = NULL, *kid = NULL, *format = "token";
    unsigned long long ttl = 3600, nbf = (unsigned long long)time(NULL);
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "k:l:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'k': keys = optarg; break;
        case 'T': tenant = optarg; break;
        case 'L': lease = optarg; break;
        case 'l': list = optarg; break;
        case 'K': kid = optarg; break;
        case 'f': format = optarg; break;
        case 't':
            if (!pg_parse_uint(optarg, 1, TTL_MAX, &ttl)) {
                pg_error("--ttl takes seconds, 1..%llu", TTL_MAX);
                return EXIT_USAGE;
            }
            break;
        case 'n':
            if (!pg_parse_uint(optarg, 0, (unsigned long long)PH_GRANT_TIME_MAX - TTL_MAX, &nbf)) {
                pg_error("--not-before takes unix seconds");
                return EXIT_USAGE;
            }
            break;
        case 'h': grant_usage(stdout); return EXIT_ALLOWED;
        default: grant_usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind != argc) {
        pg_error("grant issue takes no arguments");
        return EXIT_USAGE;
    }
    if (strcmp(format, "token") != 0 && strcmp(format, "basic") != 0 &&
        strcmp(format, "bearer") != 0) {
        pg_error("--format is token, basic or bearer");
        return EXIT_USAGE;
    }
    ph_grant g;
    memset(&g, 0, sizeof g);
    if (!copy_field(g.tenant, tenant, "tenant") || !copy_field(g.lease, lease, "lease") ||
        !copy_field(g.list, list, "list"))
        return EXIT_USAGE;
    g.not_before = (int64_t)nbf;
    g.expires = (int64_t)(nbf + ttl);
    ph_keyring *kr = load_keys(keys);
    if (kr == NULL)
        return EXIT_USAGE;
    char tok[PH_GRANT_TOKEN_MAX + 1];
    size_t n = 0;
    ph_diag d;
    ph_status st = ph_grant_issue(kr, kid, &g, tok, sizeof tok, &n, &d);
    ph_keyring_free(&kr);
    if (st != PH_OK) {
        pg_error("%s", d.message);
        return EXIT_USAGE;
    }
    if (strcmp(format, "basic") == 0) {
        char cred[PH_GRANT_FIELD_MAX + 1 + PH_GRANT_TOKEN_MAX + 1];
        char b64[((sizeof cred + 2) / 3) * 4 + 1];
        int cn = snprintf(cred, sizeof cred, "%s:%s", g.lease, tok);
        ph_b64_encode((const uint8_t *)cred, (size_t)cn, PH_B64_STD_PAD, b64, sizeof b64);
        printf("Basic %s\n", b64);
        OPENSSL_cleanse(cred, sizeof cred);
    } else {
        printf("%s%s\n", strcmp(format, "bearer") == 0 ? "Bearer " : "", tok);
    }
    OPENSSL_cleanse(tok, sizeof tok);
    return EXIT_ALLOWED;
}

static bool report(const ph_grant *g, ph_status st, ph_reason r, const ph_diag *d, bool json)
{
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "valid", json_boolean(st == PH_OK));
        json_object_set_new(o, "reason", json_string(ph_reason_code(r)));
        if (st == PH_OK) {
            json_object_set_new(o, "kid", json_string(g->kid));
            json_object_set_new(o, "tenant", json_string(g->tenant));
            json_object_set_new(o, "lease", json_string(g->lease));
            json_object_set_new(o, "list", json_string(g->list));
            json_object_set_new(o, "not_before", json_integer(g->not_before));
            json_object_set_new(o, "expires", json_integer(g->expires));
        } else {
            json_object_set_new(o, "detail", json_string(d->message));
        }
        pg_print_json(o);
    } else if (st == PH_OK) {
        printf("VALID kid=%s tenant=%s lease=%s list=%s not_before=%" PRId64 " expires=%" PRId64
               "\n",
               g->kid, g->tenant, g->lease, g->list, g->not_before, g->expires);
    } else {
        printf("INVALID reason=%s detail=", ph_reason_code(r));
        pg_print_quoted(d->message);
        putchar('\n');
    }
    return st == PH_OK;
}

static int grant_verify(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"keys", required_argument, NULL, 'k'}, {"list", required_argument, NULL, 'l'},
        {"now", required_argument, NULL, 'n'},  {"header", required_argument, NULL, 'H'},
        {"json", no_argument, NULL, 'j'},       {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *keys = getenv("PINHOLE_GRANT_KEYS"), *list = NULL, *header = NULL;
    unsigned long long now = (unsigned long long)time(NULL);
    bool json = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "k:l:jh", longopts, NULL)) != -1) {
        switch (c) {
        case 'k': keys = optarg; break;
        case 'l': list = optarg; break;
        case 'H': header = optarg; break;
        case 'j': json = true; break;
        case 'n':
            if (!pg_parse_uint(optarg, 0, (unsigned long long)PH_GRANT_TIME_MAX, &now)) {
                pg_error("--now takes unix seconds");
                return EXIT_USAGE;
            }
            break;
        case 'h': grant_usage(stdout); return EXIT_ALLOWED;
        default: grant_usage(stderr); return EXIT_USAGE;
        }
    }
    if (header != NULL && optind != argc) {
        pg_error("give either --header or tokens, not both");
        return EXIT_USAGE;
    }
    ph_keyring *kr = load_keys(keys);
    if (kr == NULL)
        return EXIT_USAGE;
    bool all = true;
    ph_grant g;
    ph_reason r;
    ph_diag d;
    if (header != NULL) {
        ph_status st = ph_grant_verify_proxy_authorization(kr, header, strlen(header),
                                                           (int64_t)now, list, &g, &r, &d);
        all = report(&g, st, r, &d, json);
    } else if (optind < argc) {
        for (int i = optind; i < argc; i++) {
            ph_status st =
                ph_grant_verify(kr, argv[i], strlen(argv[i]), (int64_t)now, list, &g, &r, &d);
            all &= report(&g, st, r, &d, json);
        }
    } else {
        char line[PH_GRANT_TOKEN_MAX + 3];
        while (fgets(line, sizeof line, stdin) != NULL) {
            size_t n = strlen(line);
            bool whole = n > 0 && line[n - 1] == '\n';
            if (whole)
                line[--n] = '\0';
            else if (!feof(stdin)) { /* over-long: refuse it whole, skip the rest */
                int ch;
                while ((ch = getchar()) != EOF && ch != '\n') {
                }
                n = PH_GRANT_TOKEN_MAX + 1;
            }
            ph_status st = ph_grant_verify(kr, line, n, (int64_t)now, list, &g, &r, &d);
            all &= report(&g, st, r, &d, json);
        }
    }
    ph_keyring_free(&kr);
    return all ? EXIT_ALLOWED : EXIT_REFUSED;
}

int pg_cmd_grant(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "issue") == 0)
        return grant_issue(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "verify") == 0)
        return grant_verify(argc - 1, argv + 1);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        grant_usage(stdout);
        return EXIT_ALLOWED;
    }
    grant_usage(stderr);
    return EXIT_USAGE;
}
