/* config.h - pinhole-proxy settings: one table of keys shared by the long
 * options (--dns-timeout-ms) and the YAML config file (dns_timeout_ms), so
 * the two can never drift apart. */
#ifndef PX_CONFIG_H
#define PX_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "pinhole/status.h"
#include "sockaddr.h"

#define PX_LISTEN_MAX 8
#define PX_TRUSTED_MAX 16 /* proxy_protocol prefixes */
#define PX_PATH_MAX 1024
#define PX_ADDR_MAX 300

typedef struct px_config {
    char listen[PX_LISTEN_MAX][PX_ADDR_MAX]; /* "host:port", "[v6]:port" */
    int listen_count;
    /* Sources that must (and alone may) start a TCP connection with a
     * PROXY protocol v2 header naming the client; none: no header read. */
    px_prefix proxy_protocol[PX_TRUSTED_MAX];
    int proxy_protocol_count;
    char unix_socket[PX_PATH_MAX];   /* empty: none */
    unsigned unix_socket_mode;       /* octal permission bits */
    char admin_listen[PX_ADDR_MAX];  /* empty: no admin listener */
    char table[PX_PATH_MAX];         /* compiled allowlist (.ptab) */
    char grant_key[PX_PATH_MAX];     /* grant verification key file */
    char revocations[PX_PATH_MAX];   /* the revocation list; "" none */
    char dns_servers[PX_ADDR_MAX];   /* c-ares CSV; empty: /etc/resolv.conf */
    char user[64];                   /* drop to this user after binding (root only) */
    char ready_file[PX_PATH_MAX];    /* written with the bound addresses; empty: none */
    long workers;                    /* 0: one per core */
    long dns_timeout_ms;
    long dns_cache_entries;
    long dns_cache_max_ttl_s;
    long dns_negative_ttl_s;
    long header_timeout_ms;
    long connect_timeout_ms;
    long idle_timeout_s;
    long max_lifetime_s;
    long max_connections;
    long max_connections_per_lease;
    long max_connections_per_peer;   /* per TCP source address / unix peer process */
    long max_head_connections;       /* still sending their request head, overall */
    long max_head_connections_per_peer; /* still sending their request head, per peer */
    long max_admin_connections;      /* open connections to the admin listener */
    int keep_tunnels_on_reload;      /* 1: a reload never ends a tunnel for its destination */
    long drain_timeout_s;
    long buffer_bytes;               /* per-direction high watermark */
    long inspect_bytes;              /* client bytes held at most while inspecting */
    long inspect_timeout_ms;         /* the inspection's deadline, from the 200 */
} px_config;

/* Fills *cfg with the documented defaults. */
void px_config_defaults(px_config *cfg);

/* Exit codes (documented in docs/pinhole-proxy.md). */
enum {
    PX_EXIT_OK = 0,
    PX_EXIT_USAGE = 2,    /* bad option or config file */
    PX_EXIT_STARTUP = 3,  /* could not bind, load the table or the key, drop privileges */
    PX_EXIT_INTERNAL = 4,
};

/*
 * Parses argv (and the --config file it names, whose settings the command
 * line overrides). Returns PH_OK, or PH_E_INVAL with a positioned message
 * ("file:line:col: ...") in diag. *action is set to 'h' for --help, 'v' for
 * --version, 'c' for --check-config, 0 to run.
 */
ph_status px_config_from_args(int argc, char **argv, px_config *cfg, int *action, ph_diag *diag);

/* Loads a YAML config file over *cfg. Only a regular file is read
 * (ph_open_regular: a FIFO or a device is refused, PH_E_INVAL). Strict:
 * unknown or duplicate keys, anchors, aliases, tags, several documents and
 * badly typed values are errors positioned as "path:line:col". */
ph_status px_config_load_yaml(const char *path, px_config *cfg, ph_diag *diag);

/* Writes --help to stdout. */
void px_config_usage(const char *argv0);

#endif
