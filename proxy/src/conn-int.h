/* conn-int.h - a client connection, shared by the files that serve one:
 * conn.c (its life: accept and the caps there, the refusal it may be
 * answered, its log line, its end), tunnel.c (a CONNECT: head, decision,
 * upstream, relay) and, through the hooks of forward.h, forward.c.
 *
 * Memory: a connection is a small long-lived px_conn and, until it is a
 * tunnel (or forward.c's), its head phase (conn_head, one allocation made
 * at the first read: the head's bytes, its timer, the decision, the
 * refusal's buffers, the upstream's resolution and dial), freed once the
 * tunnel is established;
 * a tunnel keeps only what its log line and its rechecks need, packed in
 * one conn_tunnel with its px_upstream once stopped (the lease slot, the
 * dialed and checked addresses). An idle tunnel is then its px_conn, its
 * conn_tunnel and its relay (bench_proxy --idle-only measures the bytes per
 * tunnel).
 *
 * Ownership: a px_conn is freed only by px_conn_free, and every callback
 * that can reach px_conn_free (bufferevent callbacks, the head's read
 * event, the timer, the upstream's events, the relay's done) returns
 * without touching c afterwards; so does px_conn_accept, which may reach it
 * too. Callbacks that are not the connection's own never run synchronously
 * inside a call of these files, except where a call says so and is the
 * last thing its caller does with c: the upstream's (upstream.h) inside
 * px_upstream_dial, the relay's done inside px_relay_run / px_relay_stop.
 * Bufferevent callbacks are not run inside bufferevent_write/enable.
 */
#ifndef PX_CONN_INT_H
#define PX_CONN_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "pinhole/grant.h"
#include "pinhole/guard.h"
#include "http1.h"
#include "inspect.h"
#include "relay.h"
#include "upstream.h"
#include "worker.h"

struct bufferevent;
struct event;
struct px_fwd;

/* ST_FORWARD: not a CONNECT; forward.c serves the connection (fwd). */
typedef enum conn_state { ST_HEAD, ST_RESOLVE, ST_CONNECT, ST_RELAY, ST_REPLY, ST_FORWARD } conn_state;

/* The strings of a connection's log line (and of a recheck: host, token),
 * by index; each may be absent (NULL). */
enum { CS_TENANT, CS_LEASE, CS_LIST, CS_HOST, CS_RULE_FILE, CS_POLICY_ID, CS_TOKEN, CS_DETAIL,
       CS_SNI, CS_COUNT };

/* The head phase: from the first read until the connection is a tunnel
 * (start_relay) or forward.c's (forward_handoff), or ends. Owned by its
 * px_conn (c->h) and freed with it (px_conn_free) or at that hand-over
 * (px_conn_head_free). One allocation: the fields, the timer's event, the
 * room of the upstream while it resolves and dials (c->up, until
 * px_upstream_stop compacts it: px_conn_free frees c->up before c->h, and
 * start_relay frees h only once the upstream stopped), then head_buf (of
 * the head's own size when the first read brought it whole, else
 * HEAD_READ_MAX). Every libevent object here (the bufferevent,
 * head_ev, timer) has the px_conn as its callback argument, never h, and
 * is freed (or handed over) by px_conn_head_free: no callback of h's can
 * run once h is gone. */
typedef struct conn_head {
    struct bufferevent *client; /* only to answer a refusal */
    struct event *head_ev;      /* head reads after the first (NULL until needed) */
    struct event *timer;        /* head timeout (in store) */
    void *up_room;              /* the live upstream's (px_upstream_start_in; in store) */
    uint8_t *head_buf;          /* the head and the bytes after it (in store) */
    size_t head_got, head_len;  /* bytes in head_buf; the head's own length once parsed */
    const char *token;          /* the Proxy-Authorization value (in head_buf, or ""),
                                 * for rechecks; not NUL-terminated: token_len */
    size_t token_len;
    /* the decision, as far as it got */
    bool has_grant, has_auth, has_rule;
    ph_grant grant;
    char host[PH_HOST_MAX + 1]; /* canonical (has_auth) */
    /* what the log needs of the guard's verdict (the verdict itself is big) */
    char rule_file[PH_VERDICT_FILE_MAX + 1];
    char policy_id[PH_TABLE_ID_HEX_LEN + 1];
    char detail[PH_DIAG_MESSAGE_MAX + 64];
    max_align_t store[];        /* the timer's event, up_room, then head_buf's bytes */
} conn_head;

/* What an established tunnel keeps of its decision, for its log line and
 * its rechecks: the strings (px_conn_strings' values then, each
 * NUL-terminated), then the stopped upstream (c->up), packed in one
 * allocation (px_conn_tunnel_pack), owned by the px_conn (c->t). */
#define CS_ABSENT UINT16_MAX
typedef struct conn_tunnel {
    uint16_t off[CS_COUNT];     /* each string's start in s, CS_ABSENT when absent */
    uint16_t token_len;
    char s[];
} conn_tunnel;

/* One client connection: the worker's list entry, from accept to the log
 * line. Small: an idle tunnel is this, its conn_tunnel, its stopped
 * px_upstream and its relay. */
typedef struct px_conn {
    px_worker *w;
    struct px_conn *prev, *next;
    uint64_t id;
    int64_t started_ns;         /* ph_monotonic_ns() at accept */
    conn_head *h;               /* the head phase; NULL once a tunnel or forward.c's */
    conn_tunnel *t;             /* ST_RELAY: what the tunnel keeps */
    px_upstream *up;            /* from the decision on: the lease slot, the dial, the log's addresses */
    px_relay *relay;            /* ST_RELAY: owns both sockets */
    struct px_fwd *fwd;         /* ST_FORWARD: owns the client from then on */
    const char *end;
    uint64_t bytes_up, bytes_down;
    int fd;                     /* the client socket; -1 once h->client or the relay owns it */
    int status;
    ph_reason reason;
    uint32_t rule_line;         /* 0 without a rule */
    px_inspect_kept insp;       /* inspecting: what the inspection keeps between asks */
    uint16_t port;              /* the authority's (0 without one) */
    uint8_t state;              /* conn_state */
    uint8_t protocol;           /* the rule's ph_protocol: what the tunnel may carry */
    bool sni_is_host;           /* the ClientHello named the CONNECT host byte for byte:
                                 * the log's sni is the host (no copy of it kept) */
    bool in_head;               /* holds a request-head slot */
    bool inspecting;            /* ST_RELAY: the client's first bytes are held for the
                                 * inspection (tunnel.c), until it passed (TLS: until
                                 * the server answered the hello) */
    uint8_t key_off;            /* the per-peer limit's key: peer + key_off; "" = no slot held */
    char peer[];                /* who connected, for the log; then the key */
} px_conn;


/* The most one head read takes: a whole head and the tunnel bytes a client
 * sent right behind it (a TLS ClientHello fits). */
#define HEAD_READ_MAX (PH_H1_REQUEST_HEAD_MAX + 4096)

/* A connection accepted on w (fd now its): the overall, descriptor,
 * per-peer and request-head caps at accept (a refusal is answered on fd
 * without reading further, logged, and fd closed: NULL), then the
 * px_conn, in w's list, holding its slots (its head phase comes with its
 * first read: tunnel.c). NULL also when out of memory (fd closed). */
px_conn *px_conn_new(px_worker *w, int fd, const struct sockaddr *peer);
/* A connection refused before it is a px_conn (fd, not read from yet):
 * answered reason's status and why, closed, counted and logged with peer
 * as who connected, and its time since accepted_ns (ph_monotonic_ns() at
 * accept; 0: refused at accept, a duration of 0). */
void px_conn_refuse_at_accept(int fd, const char *peer, ph_reason reason, const char *why,
                              int64_t accepted_ns);
/* Who connected (peer, from accept or a balancer's PROXY header; fd for a
 * unix peer's credentials): log, the form of its log lines (log_cap of at
 * least 64 bytes), and key, its per-peer limits' key. */
#define PX_PEER_KEY_MAX 64
void px_conn_peer_identity(int fd, const struct sockaddr *peer, char *log, size_t log_cap,
                           char key[PX_PEER_KEY_MAX]);
/* The slots a connection holds from accept while its head arrives: an
 * overall one, the peer's (peer_key), the peer's head one, a head one.
 * False: none is held, and fd was refused (px_conn_refuse_at_accept, with
 * peer_log). px_conn_slots_release gives all four back. */
bool px_conn_slots_acquire(px_worker *w, int fd, const char *peer_log, const char *peer_key);
void px_conn_slots_release(const char *peer_key);
/* Logs the connection (a forwarding one logs its requests itself),
 * releases every slot it holds, closes and frees everything of it. */
void px_conn_free(px_conn *c);
/* The head slots (overall and the peer's) are held together, from accept
 * until the head was parsed or the connection ends. */
void px_conn_leave_head(px_conn *c);
/* The client socket as a bufferevent, made on first use (a refusal is
 * written through it) with the bytes read so far in its input; the socket
 * is then the bufferevent's. NULL when out of memory. */
struct bufferevent *px_conn_client_bev(px_conn *c);
/* Answers a refusal and closes once it is written (bounded by a timeout so
 * a client that does not read cannot hold the connection). Only in the
 * head phase (c->h): a tunnel ends through its relay. Stops the upstream. */
void px_conn_refuse(px_conn *c, int status, ph_reason reason, const char *detail);
/* px_conn_refuse with the guard's status for reason. */
void px_conn_refuse_for(px_conn *c, ph_reason reason, const char *detail);
/* The connection's log strings (and a recheck's) in str[CS_COUNT], NULL
 * where absent, from wherever they are kept: the head phase's fields, or
 * the tunnel's packed copy of those same values. *token_len: the token's
 * length. Valid until h or t changes. */
void px_conn_strings(const px_conn *c, const char *str[CS_COUNT], size_t *token_len);
/* One allocation holding copies of str[CS_COUNT] (NULL: absent; the token
 * token_len bytes, the others NUL-terminated) and, when up and *up are not
 * NULL, the upstream's compact form (px_upstream_stop_in: stopped there if
 * live, moved there if stopped already, *up updated), which then lives as
 * long as the conn_tunnel: px_upstream_free it first. NULL when out of
 * memory (*up untouched). */
conn_tunnel *px_conn_tunnel_pack(const char *const str[CS_COUNT], size_t token_len,
                                 px_upstream **up);
/* Frees the head phase and everything it holds (its events and
 * bufferevent: none of their callbacks runs afterwards), the head's bytes
 * wiped (they hold the grant). NULLs *hp. */
void px_conn_head_free(conn_head **hp);
/* Frees a conn_tunnel (its upstream freed before, if it holds one), its
 * token wiped. NULLs *tp. */
void px_conn_tunnel_free(conn_tunnel **tp);

#endif
