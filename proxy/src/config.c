/* config.c - long options and the strict YAML config file, both driven by
 * one table of settings. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "pinhole/diag.h"

enum kind { K_STR, K_LONG, K_BOOL, K_LISTEN, K_MODE };

typedef struct setting {
    const char *key; /* YAML key; the long option is the same with '-' for '_' */
    enum kind kind;
    size_t off;
    size_t size;     /* K_STR: buffer size */
    long min, max;   /* K_LONG */
    const char *help;
} setting;

#define S_STR(k, f, h) { #k, K_STR, offsetof(px_config, f), sizeof(((px_config *)0)->f), 0, 0, h }
#define S_LONG(k, f, lo, hi, h) { #k, K_LONG, offsetof(px_config, f), 0, lo, hi, h }

static const setting SETTINGS[] = {
    { "listen", K_LISTEN, offsetof(px_config, listen), 0, 0, 0,
      "ADDR:PORT  TCP listener, IPv4 or [IPv6] (repeatable; default 127.0.0.1:3128)" },
    S_STR(unix_socket, unix_socket, "PATH  also listen on this unix socket"),
    { "unix_socket_mode", K_MODE, offsetof(px_config, unix_socket_mode), 0, 0, 0777,
      "OCTAL  permissions of the unix socket (default 0660)" },
    S_STR(admin_listen, admin_listen, "ADDR:PORT  admin listener (default 127.0.0.1:9128; \"\" disables)"),
    S_STR(table, table, "FILE  compiled allowlist table (.ptab; required)"),
    S_STR(grant_key, grant_key, "FILE  grant verification key (required)"),
    S_STR(dns_servers, dns_servers, "LIST  DNS servers, c-ares CSV (\"127.0.0.1:53,[::1]:53\"); default resolv.conf"),
    S_STR(user, user, "NAME  drop privileges to this user after binding (when root)"),
    S_STR(ready_file, ready_file, "FILE  once listening, write the bound addresses here (port 0: the kernel's)"),
    S_LONG(workers, workers, 0, 256, "N  worker threads, one event loop each (default 0: one per core)"),
    S_LONG(dns_timeout_ms, dns_timeout_ms, 100, 60000, "MS  resolution deadline (default 5000)"),
    S_LONG(dns_cache_entries, dns_cache_entries, 0, 1000000, "N  DNS cache entries per worker (default 4096)"),
    S_LONG(dns_cache_max_ttl_s, dns_cache_max_ttl_s, 0, 86400, "S  cap on cached answer TTLs (default 300)"),
    S_LONG(dns_negative_ttl_s, dns_negative_ttl_s, 0, 3600, "S  how long failures are cached (default 5)"),
    S_LONG(header_timeout_ms, header_timeout_ms, 100, 600000, "MS  request head deadline (default 10000)"),
    S_LONG(connect_timeout_ms, connect_timeout_ms, 100, 600000, "MS  per-address connect deadline (default 5000)"),
    S_LONG(idle_timeout_s, idle_timeout_s, 1, 86400, "S  tunnel idle timeout (default 300)"),
    S_LONG(max_lifetime_s, max_lifetime_s, 1, 604800, "S  maximum tunnel lifetime (default 3600)"),
    S_LONG(max_connections, max_connections, 1, 10000000, "N  connections overall (default 20000)"),
    S_LONG(max_connections_per_lease, max_connections_per_lease, 1, 10000000, "N  connections per lease (default 256)"),
    S_LONG(max_connections_per_peer, max_connections_per_peer, 1, 10000000, "N  connections per peer: TCP source address, unix peer process (default 1024)"),
    S_LONG(max_head_connections, max_head_connections, 1, 10000000, "N  connections still sending their request head (default 4096)"),
    { "keep_tunnels_on_reload", K_BOOL, offsetof(px_config, keep_tunnels_on_reload), 0, 0, 0,
      "BOOL  true: a reload does not end tunnels its table no longer allows (default false)" },
    S_LONG(drain_timeout_s, drain_timeout_s, 0, 3600, "S  SIGTERM drain deadline (default 30)"),
    S_LONG(buffer_bytes, buffer_bytes, 4096, 64L << 20, "N  per-direction buffer high watermark (default 262144)"),
};
#define N_SETTINGS (sizeof SETTINGS / sizeof SETTINGS[0])

void px_config_defaults(px_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->unix_socket_mode = 0660;
    snprintf(cfg->admin_listen, sizeof cfg->admin_listen, "127.0.0.1:9128");
    cfg->dns_timeout_ms = 5000;
    cfg->dns_cache_entries = 4096;
    cfg->dns_cache_max_ttl_s = 300;
    cfg->dns_negative_ttl_s = 5;
    cfg->header_timeout_ms = 10000;
    cfg->connect_timeout_ms = 5000;
    cfg->idle_timeout_s = 300;
    cfg->max_lifetime_s = 3600;
    cfg->max_connections = 20000;
    cfg->max_connections_per_lease = 256;
    cfg->max_connections_per_peer = 1024;
    cfg->max_head_connections = 4096;
    cfg->drain_timeout_s = 30;
    cfg->buffer_bytes = 256 * 1024;
}

/* Sets one setting from its string form. Returns NULL or a static error. */
static const char *apply(px_config *cfg, const setting *s, const char *v, int from_cli)
{
    char *base = (char *)cfg + s->off;
    char *end;
    switch (s->kind) {
    case K_STR:
        if (strlen(v) >= s->size)
            return "value too long";
        memcpy(base, v, strlen(v) + 1);
        return NULL;
    case K_LISTEN:
        if (cfg->listen_count >= PX_LISTEN_MAX)
            return "too many listeners (at most 8)";
        if (strlen(v) >= PX_ADDR_MAX || strchr(v, ':') == NULL)
            return "expected ADDR:PORT";
        memcpy(cfg->listen[cfg->listen_count++], v, strlen(v) + 1);
        return NULL;
    case K_BOOL:
        if (strcmp(v, "true") == 0)
            *(int *)(void *)base = 1;
        else if (strcmp(v, "false") == 0)
            *(int *)(void *)base = 0;
        else
            return "expected true or false";
        return NULL;
    case K_MODE:
    case K_LONG: {
        errno = 0;
        if (v[0] == '\0' || v[0] == '-' || v[0] == '+' || v[0] == ' ')
            return s->kind == K_MODE ? "expected an octal mode" : "expected a non-negative integer";
        long n = strtol(v, &end, s->kind == K_MODE ? 8 : 10);
        if (errno != 0 || *end != '\0')
            return s->kind == K_MODE ? "expected an octal mode" : "expected a non-negative integer";
        if (n < s->min || n > s->max)
            return "value out of range";
        if (s->kind == K_MODE)
            *(unsigned *)(void *)base = (unsigned)n;
        else
            *(long *)(void *)base = n;
        return NULL;
    }
    }
    (void)from_cli;
    return "internal error";
}

static const setting *find_key(const char *key)
{
    for (size_t i = 0; i < N_SETTINGS; i++)
        if (strcmp(SETTINGS[i].key, key) == 0)
            return &SETTINGS[i];
    return NULL;
}

/* ---- YAML ---------------------------------------------------------------- */

typedef struct yctx {
    const char *path;
    ph_diag *diag;
} yctx;

__attribute__((format(printf, 3, 4)))
static ph_status yerr(const yctx *y, yaml_mark_t m, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* libyaml marks are 0-based; positions are 1-based. */
    ph_diag_set(y->diag, PH_E_INVAL, m.index, "%s:%zu:%zu: %s", y->path, m.line + 1,
                m.column + 1, msg);
    return PH_E_INVAL;
}

/* libyaml reader errors (bad UTF-8, NUL) carry only a byte offset. */
static ph_status reader_error(const yctx *y, const yaml_parser_t *p, const char *text, size_t len)
{
    size_t line = 1, col = 1, off = p->problem_offset;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    ph_diag_set(y->diag, PH_E_INVAL, off, "%s:%zu:%zu: %s", y->path, line, col,
                p->problem ? p->problem : "invalid YAML");
    return PH_E_INVAL;
}

static int next_event(yaml_parser_t *p, yaml_event_t *e)
{
    return yaml_parser_parse(p, e);
}

static ph_status check_plain_node(const yctx *y, const yaml_event_t *e)
{
    const unsigned char *anchor = NULL, *tag = NULL;
    if (e->type == YAML_ALIAS_EVENT)
        return yerr(y, e->start_mark, "aliases are not accepted");
    if (e->type == YAML_SCALAR_EVENT) {
        anchor = e->data.scalar.anchor;
        tag = e->data.scalar.tag;
    } else if (e->type == YAML_SEQUENCE_START_EVENT) {
        anchor = e->data.sequence_start.anchor;
        tag = e->data.sequence_start.tag;
    } else if (e->type == YAML_MAPPING_START_EVENT) {
        anchor = e->data.mapping_start.anchor;
        tag = e->data.mapping_start.tag;
    }
    if (anchor)
        return yerr(y, e->start_mark, "anchors are not accepted");
    if (tag)
        return yerr(y, e->start_mark, "tags are not accepted");
    return PH_OK;
}

static ph_status parse_body(yaml_parser_t *p, const yctx *y, px_config *cfg, const char *text,
                            size_t len)
{
    yaml_event_t e;
    ph_status st = PH_OK;
    unsigned char seen[N_SETTINGS] = { 0 };
    int docs = 0, depth = 0;
    int listen_from_file = 0;

    for (;;) {
        if (!next_event(p, &e))
            return p->error == YAML_READER_ERROR
                       ? reader_error(y, p, text, len)
                       : yerr(y, p->problem_mark, "%s", p->problem ? p->problem : "invalid YAML");
        yaml_event_type_t t = e.type;
        if (t == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&e);
            break;
        }
        if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_END_EVENT) {
            yaml_event_delete(&e);
            continue;
        }
        if (t == YAML_DOCUMENT_START_EVENT) {
            if (++docs > 1)
                st = yerr(y, e.start_mark, "only one YAML document is accepted");
            yaml_event_delete(&e);
            if (st != PH_OK)
                return st;
            continue;
        }
        if ((st = check_plain_node(y, &e)) != PH_OK) {
            yaml_event_delete(&e);
            return st;
        }
        if (depth == 0) {
            if (t != YAML_MAPPING_START_EVENT) {
                st = yerr(y, e.start_mark, "the config must be a mapping of settings");
                yaml_event_delete(&e);
                return st;
            }
            depth = 1;
            yaml_event_delete(&e);
            continue;
        }
        if (t == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&e);
            depth = 0;
            continue;
        }
        /* A key. */
        if (t != YAML_SCALAR_EVENT) {
            st = yerr(y, e.start_mark, "expected a setting name");
            yaml_event_delete(&e);
            return st;
        }
        const setting *s = find_key((const char *)e.data.scalar.value);
        if (s == NULL) {
            st = yerr(y, e.start_mark, "unknown setting '%s'", (const char *)e.data.scalar.value);
            yaml_event_delete(&e);
            return st;
        }
        yaml_mark_t key_mark = e.start_mark;
        yaml_event_delete(&e);
        if (seen[s - SETTINGS]++)
            return yerr(y, key_mark, "duplicate setting '%s'", s->key);

        if (!next_event(p, &e))
            return yerr(y, p->problem_mark, "%s", p->problem ? p->problem : "invalid YAML");
        if ((st = check_plain_node(y, &e)) != PH_OK) {
            yaml_event_delete(&e);
            return st;
        }
        if (s->kind == K_LISTEN && e.type == YAML_SEQUENCE_START_EVENT) {
            yaml_event_delete(&e);
            if (!listen_from_file) {
                cfg->listen_count = 0;
                listen_from_file = 1;
            }
            for (;;) {
                if (!next_event(p, &e))
                    return yerr(y, p->problem_mark, "%s", p->problem ? p->problem : "invalid YAML");
                if (e.type == YAML_SEQUENCE_END_EVENT) {
                    yaml_event_delete(&e);
                    break;
                }
                if ((st = check_plain_node(y, &e)) != PH_OK || e.type != YAML_SCALAR_EVENT) {
                    if (st == PH_OK)
                        st = yerr(y, e.start_mark, "expected ADDR:PORT strings");
                    yaml_event_delete(&e);
                    return st;
                }
                const char *err = apply(cfg, s, (const char *)e.data.scalar.value, 0);
                if (err)
                    st = yerr(y, e.start_mark, "listen: %s", err);
                yaml_event_delete(&e);
                if (st != PH_OK)
                    return st;
            }
            continue;
        }
        if (e.type != YAML_SCALAR_EVENT) {
            st = yerr(y, e.start_mark, "'%s' takes a single value", s->key);
            yaml_event_delete(&e);
            return st;
        }
        /* Numbers and booleans must be plain scalars: "5000" quoted is a
         * string, and accepting it would hide a typing mistake. */
        if ((s->kind == K_LONG || s->kind == K_BOOL || s->kind == K_MODE) &&
            e.data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
            st = yerr(y, e.start_mark, "'%s' must be an unquoted value", s->key);
            yaml_event_delete(&e);
            return st;
        }
        if (s->kind == K_LISTEN && !listen_from_file) {
            cfg->listen_count = 0;
            listen_from_file = 1;
        }
        const char *err = apply(cfg, s, (const char *)e.data.scalar.value, 0);
        if (err) {
            char what[200];
            snprintf(what, sizeof what, "%s: %s", s->key, err);
            st = yerr(y, e.start_mark, "%s", what);
        }
        yaml_event_delete(&e);
        if (st != PH_OK)
            return st;
    }
    return PH_OK;
}

#define CONFIG_FILE_MAX (1 << 20)

ph_status px_config_load_yaml(const char *path, px_config *cfg, ph_diag *diag)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        ph_diag_set(diag, PH_E_IO, 0, "%s: %s", path, strerror(errno));
        return PH_E_IO;
    }
    char *text = malloc(CONFIG_FILE_MAX + 1);
    size_t len = text ? fread(text, 1, CONFIG_FILE_MAX + 1, f) : 0;
    fclose(f);
    if (text == NULL) {
        ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        return PH_E_NOMEM;
    }
    if (len > CONFIG_FILE_MAX) {
        free(text);
        ph_diag_set(diag, PH_E_LIMIT, 0, "%s: larger than 1 MiB", path);
        return PH_E_LIMIT;
    }
    /* Parse into a copy so a bad file changes nothing. */
    px_config tmp = *cfg;
    yaml_parser_t p;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    yctx y = { path, diag };
    ph_status st = parse_body(&p, &y, &tmp, text, len);
    yaml_parser_delete(&p);
    free(text);
    if (st == PH_OK)
        *cfg = tmp;
    return st;
}

/* ---- command line -------------------------------------------------------- */

#define OPT_BASE 1000

void px_config_usage(const char *argv0)
{
    printf("Usage: %s [OPTION]...\n"
           "Event-driven CONNECT egress proxy: admits a tunnel only with a valid grant\n"
           "(Proxy-Authorization) for a destination its allowlist permits, resolved\n"
           "and checked against the address denylist. See pinhole-proxy(8).\n\n"
           "  -c, --config=FILE         YAML file with the settings below (keys use '_');\n"
           "                            the command line overrides it\n",
           argv0);
    for (size_t i = 0; i < N_SETTINGS; i++) {
        char opt[64];
        snprintf(opt, sizeof opt, "--%s", SETTINGS[i].key);
        for (char *c = opt; *c; c++)
            if (*c == '_')
                *c = '-';
        printf("      %-28s %s\n", opt, SETTINGS[i].help);
    }
    printf("      --check-config               validate the settings, then exit\n"
           "  -h, --help                this help\n"
           "  -V, --version             version and build options\n\n"
           "Exit status: 0 success (also after a graceful SIGTERM/SIGINT drain),\n"
           "2 bad option or config, 3 start-up failure, 4 internal error.\n");
}

ph_status px_config_from_args(int argc, char **argv, px_config *cfg, int *action, ph_diag *diag)
{
    static char names[N_SETTINGS][64];
    struct option opts[N_SETTINGS + 5];
    size_t n = 0;
    for (size_t i = 0; i < N_SETTINGS; i++, n++) {
        snprintf(names[i], sizeof names[i], "%s", SETTINGS[i].key);
        for (char *c = names[i]; *c; c++)
            if (*c == '_')
                *c = '-';
        opts[n] = (struct option){ names[i], required_argument, NULL, OPT_BASE + (int)i };
    }
    opts[n++] = (struct option){ "config", required_argument, NULL, 'c' };
    opts[n++] = (struct option){ "help", no_argument, NULL, 'h' };
    opts[n++] = (struct option){ "version", no_argument, NULL, 'V' };
    opts[n++] = (struct option){ "check-config", no_argument, NULL, 'C' };
    opts[n] = (struct option){ NULL, 0, NULL, 0 };

    *action = 0;
    /* Pass 1: the config file, so the command line can override it. */
    const char *config = NULL;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:hV", opts, NULL)) != -1) {
        if (c == 'c')
            config = optarg;
    }
    if (config) {
        ph_status st = px_config_load_yaml(config, cfg, diag);
        if (st != PH_OK)
            return st;
    }
    int listen_from_cli = 0;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "c:hV", opts, NULL)) != -1) {
        if (c == 'c')
            continue;
        if (c == 'h' || c == 'V') {
            *action = c == 'h' ? 'h' : 'v';
            return PH_OK;
        }
        if (c == 'C') {
            *action = 'c';
            continue;
        }
        if (c < OPT_BASE || c >= OPT_BASE + (int)N_SETTINGS) {
            ph_diag_set(diag, PH_E_INVAL, 0, "unknown or incomplete option '%s' (see --help)",
                        argv[optind - 1]);
            return PH_E_INVAL;
        }
        const setting *s = &SETTINGS[c - OPT_BASE];
        if (s->kind == K_LISTEN && !listen_from_cli) {
            cfg->listen_count = 0; /* the command line replaces the file's list */
            listen_from_cli = 1;
        }
        const char *err = apply(cfg, s, optarg, 1);
        if (err) {
            ph_diag_set(diag, PH_E_INVAL, 0, "--%s: %s", names[s - SETTINGS], err);
            return PH_E_INVAL;
        }
    }
    if (optind < argc) {
        ph_diag_set(diag, PH_E_INVAL, 0, "unexpected argument '%s' (see --help)", argv[optind]);
        return PH_E_INVAL;
    }
    if (cfg->listen_count == 0)
        snprintf(cfg->listen[cfg->listen_count++], PX_ADDR_MAX, "127.0.0.1:3128");
    if (cfg->table[0] == '\0' || cfg->grant_key[0] == '\0') {
        ph_diag_set(diag, PH_E_INVAL, 0, "--table and --grant-key are required (see --help)");
        return PH_E_INVAL;
    }
    return PH_OK;
}
