/* forward-int.h - a forwarding connection (struct px_fwd), shared by the
 * two files that serve it: forward_conn.c (its life: the request's
 * beginning, log line and end, refusals, the kept-alive upstream, the
 * deadline and timers, closing and lingering) and forward.c (each request:
 * its head, decision, upstream, and the exchange of request and response).
 * forward_conn.c calls nothing of forward.c's. Ownership: forward.h. */
#ifndef PX_FORWARD_INT_H
#define PX_FORWARD_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <event2/bufferevent.h>

#include "forward.h"
#include "http1.h"
#include "pinhole/grant.h"
#include "pinhole/guard.h"
#include "upstream.h"
#include "worker.h"

struct event;

typedef enum fwd_state {
    F_HEAD,     /* waiting for (or reading) a request head */
    F_RESOLVE,  /* decided; resolving the name */
    F_CONNECT,  /* dialing the checked addresses (upstream.c) */
    F_EXCHANGE, /* request and response streaming */
    F_CLOSING,  /* the last bytes are flushed to the client */
    F_LINGER,   /* flushed and half-closed: what the client still sends is
                 * read and dropped for a moment, so its unread bytes do not
                 * make the kernel reset the connection (and drop the answer
                 * before the client read it) */
    F_DEAD,     /* ended: the reap event frees it from the loop */
} fwd_state;

typedef struct px_fwd px_fwd;

/* What an upstream connection was opened for: it is reused only for the
 * same checked destination and the same grant. */
typedef struct fwd_dest {
    char host[PH_HOST_MAX + 1];
    uint16_t port;
    struct sockaddr_storage addr; /* the checked address dialed */
    char tenant[PH_GRANT_FIELD_MAX + 1];
    char lease[PH_GRANT_FIELD_MAX + 1];
    char list[PH_GRANT_FIELD_MAX + 1];
} fwd_dest;

struct px_fwd {
    px_worker *w;
    const px_fwd_owner *hooks;
    void *owner;
    uint64_t conn_id;
    const char *peer;
    fwd_state state;
    struct bufferevent *client;
    struct bufferevent *up;   /* the current request's upstream */
    fwd_dest up_dest;
    struct bufferevent *idle; /* one kept-alive upstream, between requests */
    fwd_dest idle_dest;
    struct event *timer;      /* head or keep-alive timeout; flush and linger */
    struct event *reap;       /* ends the connection from the loop */
    struct event *client_watch; /* the client's socket while its request waits */
    bool watching_client;
    struct event *deadline;   /* the request's end of life (px_fwd_arm_deadline) */
    const char *deadline_end; /* "max_lifetime" or "grant_expired" */
    const char *reap_end;
    /* A tunnel's HTTP (forward.h px_fwd_tunnel): its host and port, and
     * the CONNECT's grant token (owned); tun_token NULL otherwise. */
    char *tun_token;
    size_t tun_token_len;
    char tun_host[PH_HOST_MAX + 1];
    uint16_t tun_port;
    /* The Proxy-Authorization value the last request was decided on
     * (owned; NULL before one, and in a tunnel): what a reload decides the
     * connection again on (px_forward_recheck_target). */
    char *last_token;
    size_t last_token_len;
    /* The grant this connection's requests verified last (the guard's
     * memo: not verified again under the same policy version until it
     * expires); wiped when the connection ends. */
    ph_grant_memo grant_memo;
    bool head_timer;          /* the timer counts a head's arrival */
    bool client_close;        /* close after this response */
    bool client_v10;          /* the request was HTTP/1.0 */
    bool paused_client;       /* client reading stopped: the upstream is full */
    bool paused_up;           /* upstream reading stopped: the client is full */
    ph_h1_head head;          /* the request head, then the response head */
    size_t head_scan;         /* how far ph_h1_head_scan examined the head being received */

    /* the request in flight */
    bool in_request;
    int64_t started_ns; /* ph_monotonic_ns() when the request in flight (or
                         * the last one) began; before one, when the
                         * connection became forward.c's */
    char method[40];
    bool is_head;
    bool has_grant;
    ph_grant grant;
    bool has_host;
    char host[PH_HOST_MAX + 1];
    uint16_t port;
    bool has_rule;
    uint32_t rule_line;
    char rule_file[PH_VERDICT_FILE_MAX + 1];
    char policy_id[PH_TABLE_ID_HEX_LEN + 1];
    px_upstream *dial;          /* from the decision to the end of the request: the lease slot */
    struct evbuffer *up_head;   /* the rewritten head, kept for one retry */
    bool reused, retried;
    ph_h1_body req_body;
    uint64_t req_left;
    ph_h1_chunked req_chunks;
    bool req_done;
    bool resp_head_done;
    ph_h1_body resp_body;
    uint64_t resp_left;
    ph_h1_chunked resp_chunks;
    bool resp_chunked_out;      /* re-framed as chunked to the client */
    bool up_reusable;
    bool up_sent_any;
    bool up_write_failed;       /* the upstream stopped taking the request */
    int status;
    ph_reason reason;
    char detail[PH_DIAG_MESSAGE_MAX + 64];
    uint64_t bytes_up, bytes_down;
};

static inline size_t cap_bytes(const px_fwd *f)
{
    return (size_t)f->w->cfg->buffer_bytes;
}

static inline struct timeval secs(long s)
{
    return (struct timeval){ s, 0 };
}

static inline struct timeval msecs(long ms)
{
    return (struct timeval){ ms / 1000, (ms % 1000) * 1000 };
}

static inline void bev_free(struct bufferevent **b)
{
    if (*b != NULL) {
        bufferevent_free(*b);
        *b = NULL;
    }
}

/* The request in flight begins (its fields reset, its clock started). */
void px_fwd_begin_request(px_fwd *f);
/* The request's log line and metrics, once; then its resources go (the
 * upstream's path with its lease slot, the deadline, the client watch). */
void px_fwd_end_request(px_fwd *f, const char *end);
/* Ends the connection from the loop (forward.h: nothing is freed inside a
 * callback of forward.c's). */
void px_fwd_kill(px_fwd *f, const char *end);
/* Refuses the request in flight (or a head that did not parse) with the
 * guard's status for reason, and closes once the answer is written;
 * log_detail (may be NULL or "") replaces client_detail in the log. */
void px_fwd_refuse(px_fwd *f, ph_reason reason, const char *client_detail,
                   const char *log_detail);
/* Flushes what the client has not been sent yet, then ends (lingering). */
void px_fwd_close_after_flush(px_fwd *f, const char *end);
/* Everything was written: half-close, then read and drop what the client
 * still sends until it closes or a moment passes. */
void px_fwd_linger(px_fwd *f);
/* Watches (or stops watching) the client's socket while its request, read
 * whole, waits for its response: a reset ends the request. Once the
 * response head went out the watch stays until the request ends (firing,
 * it only ends itself). Both are the client's second read event on its
 * socket: the watch starts before the bufferevent's reading stops, and the
 * reading resumes before the watch goes, so the socket's epoll interest
 * never changes and a kept-alive request costs no epoll_ctl (the other
 * order is a removal and an addition, which libevent's changelist turns
 * into an EPOLL_CTL_MOD to the same events, each way). */
void px_fwd_watch_client(px_fwd *f);
void px_fwd_unwatch_client(px_fwd *f);
/* The current upstream becomes the kept-alive one (replacing any), or the
 * kept-alive one goes. */
void px_fwd_keep_idle(px_fwd *f);
void px_fwd_drop_idle(px_fwd *f);
/* Keeps token[0..len) as the last request's (f->last_token), copied only
 * when it differs from the one kept. False when out of memory (the one
 * kept stays). */
bool px_fwd_keep_token(px_fwd *f, const uint8_t *token, size_t len);
/* The request's end of life: the earliest of max_lifetime_s and the
 * grant's expiry (px_upstream_lifetime), from now. */
void px_fwd_arm_deadline(px_fwd *f);

#endif
