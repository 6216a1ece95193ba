/* cmd_addr.c - pinhole-guard addr: the denylist verdict for each address. */
#include <getopt.h>
#include <string.h>

#include "pinhole/addr.h"
#include "tools.h"

static void addr_usage(FILE *out)
{
    fputs("Usage: pinhole-guard addr [--json] ADDRESS...\n"
          "Prints whether each IPv4 or IPv6 address may be dialed, naming the denylist\n"
          "block (prefix, name, RFC) when it may not.\n"
          "  -j, --json   one JSON object per line\n"
          "  -h, --help   this text\n"
          "Exit status: 0 all allowed, 1 any denied or not an address, 2 usage error.\n",
          out);
}

/* The argument as far as it is printable (hostile input, one output line). */
static void shown(const char *in, char *out, size_t cap)
{
    size_t n = 0;
    for (; in[n] != '\0' && n + 1 < cap; n++)
        out[n] = (in[n] > 0x20 && in[n] < 0x7f && in[n] != '"') ? in[n] : '?';
    out[n] = '\0';
}

int pg_cmd_addr(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "jh", longopts, NULL)) != -1) {
        switch (c) {
        case 'j': json = true; break;
        case 'h': addr_usage(stdout); return EXIT_ALLOWED;
        default: addr_usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind == argc) {
        addr_usage(stderr);
        return EXIT_USAGE;
    }
    int rc = EXIT_ALLOWED;
    for (int i = optind; i < argc; i++) {
        ph_addr_verdict v;
        ph_diag d;
        memset(&d, 0, sizeof d);
        char text[128];
        shown(argv[i], text, sizeof text);
        ph_status st = ph_addr_parse_and_classify(argv[i], NULL, &v, &d);
        const char *verdict = st == PH_OK ? "ALLOW" : st == PH_E_DENIED ? "DENY" : "INVALID";
        if (st != PH_OK)
            rc = EXIT_REFUSED;
        if (json) {
            json_t *o = json_object();
            json_object_set_new(o, "address", json_string(text));
            json_object_set_new(o, "allowed", json_boolean(st == PH_OK));
            ph_reason r = st == PH_E_INVAL ? PH_REASON_PARSE_ERROR : v.reason;
            json_object_set_new(o, "reason", json_string(ph_reason_code(r)));
            if (v.block != NULL) {
                json_object_set_new(o, "block", json_string(v.block->prefix));
                json_object_set_new(o, "name", json_string(v.block->name));
                json_object_set_new(o, "rfc", json_string(v.block->rfc));
            }
            if (v.loopback_exempt)
                json_object_set_new(o, "test_build_loopback_exempt", json_true());
            if (st == PH_E_INVAL)
                json_object_set_new(o, "detail", json_string(d.message));
            pg_print_json(o);
        } else if (st == PH_E_INVAL) {
            printf("%s %s reason=parse_error detail=", verdict, text);
            pg_print_quoted(d.message);
            putchar('\n');
        } else if (v.block != NULL) {
            printf("%s %s reason=%s block=%s name=\"%s\" rfc=\"%s\"%s\n", verdict, text,
                   ph_reason_code(v.reason), v.block->prefix, v.block->name, v.block->rfc,
                   v.loopback_exempt ? " (test build: loopback exempt)" : "");
        } else {
            printf("%s %s\n", verdict, text);
        }
    }
    return rc;
}
