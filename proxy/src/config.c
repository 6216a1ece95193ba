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
#include <unistd.h>

#include "pinhole/diag.h"
#include "pinhole/io.h"
#include "pinhole/yaml_reader.h"

/* K_LISTEN and K_PREFIX are lists: repeatable options, YAML sequences. */
enum kind { K_STR, K_LONG, K_BOOL, K_LISTEN, K_MODE, K_PREFIX };

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
    { "proxy_protocol", K_PREFIX, offsetof(px_config, proxy_protocol), 0, 0, 0,
      "PREFIX  TCP sources (a balancer) that must start with a PROXY v2 header naming the client (repeatable; default none)" },
    S_STR(unix_socket, unix_socket, "PATH  also listen on this unix socket"),
    { "unix_socket_mode", K_MODE, offsetof(px_config, unix_socket_mode), 0, 0, 0777,
      "OCTAL  permissions of the unix socket (default 0660)" },
    S_STR(admin_listen, admin_listen, "ADDR:PORT  admin listener (default 127.0.0.1:9128; \"\" disables)"),
    S_STR(table, table, "FILE  compiled allowlist table (.ptab; required)"),
    S_STR(grant_key, grant_key, "FILE  grant verification key (required)"),
    S_STR(revocations, revocations, "FILE  revocation list: leases refused before their grants expire (reloaded with the table)"),
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
    S_LONG(max_head_connections_per_peer, max_head_connections_per_peer, 1, 10000000, "N  connections still sending their request head, per peer (default 64)"),
    S_LONG(max_admin_connections, max_admin_connections, 1, 1000, "N  open admin connections (default 8)"),
    { "keep_tunnels_on_reload", K_BOOL, offsetof(px_config, keep_tunnels_on_reload), 0, 0, 0,
      "BOOL  true: a reload does not end tunnels its table no longer allows (default false)" },
    S_LONG(drain_timeout_s, drain_timeout_s, 0, 3600, "S  SIGTERM drain deadline (default 30)"),
    S_LONG(buffer_bytes, buffer_bytes, 4096, 64L << 20, "N  per-direction buffer high watermark (default 262144)"),
    S_LONG(inspect_bytes, inspect_bytes, 512, 1L << 20, "N  client bytes a tunnel's inspection holds at most (default 16384)"),
    S_LONG(inspect_timeout_ms, inspect_timeout_ms, 100, 600000, "MS  deadline of a tunnel's inspection (default 10000)"),
};
#define N_SETTINGS (sizeof SETTINGS / sizeof SETTINGS[0])

/* The config file's keys are the settings' keys (SETTINGS[i].key). */
static const ph_yaml_schema config_schema = {
    "in the config", &SETTINGS[0].key, N_SETTINGS, sizeof(setting), NULL, NULL};

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
    cfg->max_head_connections_per_peer = 64;
    cfg->max_admin_connections = 8;
    cfg->drain_timeout_s = 30;
    cfg->buffer_bytes = 256 * 1024;
    cfg->inspect_bytes = 16384;
    cfg->inspect_timeout_ms = 10000;
}

static bool is_list(const setting *s)
{
    return s->kind == K_LISTEN || s->kind == K_PREFIX;
}

/* Empties a list setting: the first occurrence of a list in the file, or
 * on the command line, replaces what came before rather than adding to it. */
static void list_clear(px_config *cfg, const setting *s)
{
    if (s->kind == K_LISTEN)
        cfg->listen_count = 0;
    else
        cfg->proxy_protocol_count = 0;
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
    case K_PREFIX: {
        if (cfg->proxy_protocol_count >= PX_TRUSTED_MAX)
            return "too many prefixes (at most 16)";
        const char *err = px_prefix_parse(v, &cfg->proxy_protocol[cfg->proxy_protocol_count]);
        if (err == NULL)
            cfg->proxy_protocol_count++;
        return err;
    }
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

/* ---- YAML ---------------------------------------------------------------- */

/* Every reader refusal as the proxy words it; the position comes first. */
static void reader_message(const ph_yaml_error *e, char *msg, size_t size)
{
    switch (e->code) {
    case PH_YAML_E_SYNTAX:
    case PH_YAML_E_ENCODING:
        snprintf(msg, size, "%s", e->problem ? e->problem : "invalid YAML");
        break;
    case PH_YAML_E_TOO_LARGE:
        snprintf(msg, size, "larger than %ld bytes", e->value);
        break;
    case PH_YAML_E_TOO_DEEP:
        snprintf(msg, size, "nested more than %ld levels deep", e->value);
        break;
    case PH_YAML_E_TOO_MANY_NODES:
        snprintf(msg, size, "more than %ld YAML nodes", e->value);
        break;
    case PH_YAML_E_SCALAR_TOO_LONG:
        snprintf(msg, size, "a value longer than %ld bytes", e->value);
        break;
    case PH_YAML_E_MULTIPLE_DOCUMENTS:
        snprintf(msg, size, "only one YAML document is accepted");
        break;
    case PH_YAML_E_ANCHOR:
        snprintf(msg, size, "anchors are not accepted");
        break;
    case PH_YAML_E_ALIAS:
        snprintf(msg, size, "aliases are not accepted");
        break;
    case PH_YAML_E_TAG:
        snprintf(msg, size, "tags are not accepted");
        break;
    case PH_YAML_E_TAG_DIRECTIVE:
        snprintf(msg, size, "%%TAG directives are not accepted");
        break;
    case PH_YAML_E_VERSION_DIRECTIVE:
        snprintf(msg, size, "%%YAML directives are not accepted");
        break;
    case PH_YAML_E_DUPLICATE_KEY:
        snprintf(msg, size, "duplicate setting '%s'", e->text);
        break;
    case PH_YAML_E_KEY_NOT_SCALAR:
        snprintf(msg, size, "expected a setting name");
        break;
    case PH_YAML_E_UNKNOWN_KEY:
        snprintf(msg, size, "unknown setting '%s'", e->text);
        break;
    default:
        snprintf(msg, size, "invalid YAML (%s)", ph_yaml_code_name(e->code));
        break;
    }
}

__attribute__((format(printf, 4, 5)))
static ph_status yerr(const char *path, ph_diag *diag, ph_yaml_pos pos, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ph_diag_set(diag, PH_E_INVAL, 0, "%s:%u:%u: %s", path, (unsigned)pos.line,
                (unsigned)pos.col, msg);
    return PH_E_INVAL;
}

/* Sets one setting from a scalar node. */
static ph_status apply_node(const char *path, ph_diag *diag, px_config *cfg, const setting *s,
                            const ph_yaml_node *v)
{
    /* Numbers and booleans must be plain scalars: "5000" quoted is a
     * string, and accepting it would hide a typing mistake. */
    if ((s->kind == K_LONG || s->kind == K_BOOL || s->kind == K_MODE) && v->style != PH_YAML_PLAIN)
        return yerr(path, diag, v->pos, "'%s' must be an unquoted value", s->key);
    if (strlen(v->u.text) != v->len)
        return yerr(path, diag, v->pos, "%s: a value with a NUL byte", s->key);
    const char *err = apply(cfg, s, v->u.text, 0);
    if (err)
        return yerr(path, diag, v->pos, "%s: %s", s->key, err);
    return PH_OK;
}

static ph_status apply_tree(const char *path, ph_diag *diag, px_config *cfg, const ph_yaml_node *root)
{
    if (root == NULL) /* an empty file sets nothing */
        return PH_OK;
    if (root->kind != PH_YAML_MAPPING)
        return yerr(path, diag, root->pos, "the config must be a mapping of settings");
    bool list_from_file[N_SETTINGS] = { false };
    for (uint32_t i = 0; i < root->len; i++) {
        const ph_yaml_node *k = &root->u.pairs[i].key, *v = &root->u.pairs[i].value;
        /* The reader refused every key that is not a setting. */
        long idx = ph_yaml_schema_key(&config_schema, k->u.text, k->len);
        if (k->kind != PH_YAML_SCALAR || idx < 0)
            return yerr(path, diag, k->pos, "expected a setting name");
        const setting *s = &SETTINGS[idx];
        ph_status st = PH_OK;
        if (is_list(s) && !list_from_file[idx]) {
            list_clear(cfg, s);
            list_from_file[idx] = true;
        }
        if (is_list(s) && v->kind == PH_YAML_SEQUENCE) {
            for (uint32_t j = 0; j < v->len; j++) {
                const ph_yaml_node *item = &v->u.items[j];
                if (item->kind != PH_YAML_SCALAR)
                    return yerr(path, diag, item->pos, "%s: expected a list of strings", s->key);
                if (strlen(item->u.text) != item->len)
                    return yerr(path, diag, item->pos, "%s: a value with a NUL byte", s->key);
                const char *err = apply(cfg, s, item->u.text, 0);
                if (err)
                    return yerr(path, diag, item->pos, "%s: %s", s->key, err);
            }
            continue;
        }
        if (v->kind != PH_YAML_SCALAR)
            return yerr(path, diag, v->pos, "'%s' takes a single value", s->key);
        if ((st = apply_node(path, diag, cfg, s, v)) != PH_OK)
            return st;
    }
    return PH_OK;
}

#define CONFIG_FILE_MAX (1 << 20)

/* A config nests two levels (settings, the listen list); 16 is ample. */
static const ph_yaml_limits config_limits = {CONFIG_FILE_MAX, 16, 4096, 4096, 0};

ph_status px_config_load_yaml(const char *path, px_config *cfg, ph_diag *diag)
{
    int fd;
    ph_status opened = ph_open_regular(path, &fd, NULL, diag);
    if (opened != PH_OK)
        return opened;
    FILE *f = fdopen(fd, "rb");
    if (f == NULL) {
        close(fd);
        return ph_diag_set(diag, PH_E_IO, 0, "%s: %s", path, strerror(errno));
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
    ph_yaml_doc *doc = NULL;
    ph_status st = ph_yaml_read(text, len, &config_limits, &config_schema, &doc);
    free(text);
    if (st == PH_E_NOMEM) {
        ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        return PH_E_NOMEM;
    }
    if (st != PH_OK) {
        /* The first error in the file; nothing of it is applied. */
        const ph_yaml_error *e = ph_yaml_error_at(doc, 0);
        char msg[200];
        reader_message(e, msg, sizeof msg);
        st = yerr(path, diag, e->pos, "%s", msg);
    } else {
        /* Applied to a copy so a bad value changes nothing. */
        px_config tmp = *cfg;
        st = apply_tree(path, diag, &tmp, ph_yaml_root(doc));
        if (st == PH_OK)
            *cfg = tmp;
    }
    ph_yaml_free(&doc);
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
    bool list_from_cli[N_SETTINGS] = { false };
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
        if (is_list(s) && !list_from_cli[s - SETTINGS]) {
            list_clear(cfg, s); /* the command line replaces the file's list */
            list_from_cli[s - SETTINGS] = true;
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
