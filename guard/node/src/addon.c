/*
 * addon.c - the Node-API addon of the Node package: libpinhole's guard for
 * JavaScript. What it exposes (index.js wraps it, index.d.ts types it):
 *   - Guard(tablePath, options): ph_guard_open; reload() is
 *     ph_guard_reload_policy; close().
 *   - guard.decide(url, list): the one decision for a URL (ph_decide_url);
 *     guard.admit(url, list): the same decision, thrown when refused.
 *   - guard.resolve(url, list): the decision, then exactly the decided name
 *     resolved by the guard's resolver driver (pinhole/resolve.h) with
 *     every address checked; a Promise of the checked addresses or a
 *     PinholeError with the stable reason.
 *   - guard.redirectCheck(...), nextMethod, redirectHeaders: the redirect
 *     rules of pinhole/redirect.h, read from the library, never copied.
 *   - testLoopback (ph_build_is_test_loopback), urlMaxLen (PH_URL_MAX_LEN).
 *
 * Resolution never blocks the event loop and takes no thread of libuv's
 * shared pool (which fs, dns.lookup and zlib of the whole process share):
 * each Guard owns a ph_resolver driven by the loop itself (a uv_poll per
 * DNS socket, one uv_timer), the way the proxy drives it from libevent.
 * Queries in flight are bounded per guard (maxPending); one over the bound
 * is refused at once with limit_exceeded.
 *
 * Every call happens on the JavaScript thread that made the Guard; a Guard
 * belongs to that thread's loop.
 */
#define NAPI_VERSION 8
#include <node_api.h>
#include <uv.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pinhole/addr.h"
#include "pinhole/guard.h"
#include "pinhole/redirect.h"
#include "pinhole/resolve.h"

#define NH_MAX_PENDING_DEFAULT 256
#define NH_STR_MAX (PH_URL_MAX_LEN + 1)

/* Per module instance (one per JavaScript thread that loads it). */
typedef struct nh_instance {
    napi_ref error_ctor; /* PinholeError, set by index.js */
    napi_ref guard_ctor;
} nh_instance;

typedef struct nh_guard nh_guard;

/* One DNS socket the resolver asked to watch. */
typedef struct nh_watch {
    uv_poll_t poll; /* first: the handle's address is the watch's */
    nh_guard *g;
    int fd;
    struct nh_watch *next;
} nh_watch;

/* One resolution in flight. */
typedef struct nh_query {
    nh_guard *g;
    napi_deferred deferred;
    napi_ref guard_obj; /* keeps the Guard alive while the query runs */
    ph_resolve_query *q;
    ph_decision d;
    struct nh_query *prev, *next;
} nh_query;

struct nh_guard {
    napi_env env;
    ph_guard *guard;
    ph_resolver *resolver;
    uv_loop_t *loop;
    uv_timer_t *timer;
    nh_watch *watches;
    nh_query *queries;
    size_t pending;
    size_t max_pending;
    unsigned handles; /* uv handles whose close callback has not run */
    bool closed;      /* nh_close ran: the C side is released */
    bool finalized;   /* the JS object is gone: freed once handles is 0 */
};

/* ---- errors -------------------------------------------------------------- */

static napi_value nh_error(napi_env env, const char *reason, const char *detail,
                           const char *status)
{
    nh_instance *inst = NULL;
    napi_get_instance_data(env, (void **)&inst);
    napi_value ctor = NULL, args[3], err = NULL;
    char msg[PH_DIAG_MESSAGE_MAX + 64];
    snprintf(msg, sizeof msg, "%s%s%s", reason, detail && *detail ? ": " : "",
             detail ? detail : "");
    napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &args[0]);
    napi_create_string_utf8(env, reason, NAPI_AUTO_LENGTH, &args[1]);
    napi_create_string_utf8(env, detail ? detail : "", NAPI_AUTO_LENGTH, &args[2]);
    if (inst && inst->error_ctor && napi_get_reference_value(env, inst->error_ctor, &ctor) == napi_ok &&
        ctor && napi_new_instance(env, ctor, 3, args, &err) == napi_ok) {
        /* err is a PinholeError */
    } else {
        napi_create_error(env, NULL, args[0], &err);
        napi_set_named_property(env, err, "reason", args[1]);
        napi_set_named_property(env, err, "detail", args[2]);
    }
    if (status) {
        napi_value s;
        napi_create_string_utf8(env, status, NAPI_AUTO_LENGTH, &s);
        napi_set_named_property(env, err, "status", s);
    }
    return err;
}

/* A call that could not do its job (bad table, bad argument): reason
 * "guard_error", .status the ph_status name. */
static void nh_throw_status(napi_env env, ph_status st, const char *detail)
{
    napi_throw(env, nh_error(env, "guard_error", detail, ph_strerror(st)));
}

static void nh_throw_type(napi_env env, const char *what)
{
    napi_throw_type_error(env, NULL, what);
}

/* ---- argument helpers ---------------------------------------------------- */

/* Copies a JS string into buf[0..cap); false (a TypeError thrown) when it is
 * not a string, holds a NUL or does not fit. */
static bool nh_string(napi_env env, napi_value v, char *buf, size_t cap, const char *what)
{
    napi_valuetype t;
    size_t len = 0;
    if (napi_typeof(env, v, &t) != napi_ok || t != napi_string) {
        char m[128];
        snprintf(m, sizeof m, "%s must be a string", what);
        nh_throw_type(env, m);
        return false;
    }
    if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok || len >= cap) {
        char m[128];
        snprintf(m, sizeof m, "%s is longer than %zu bytes", what, cap - 1);
        nh_throw_type(env, m);
        return false;
    }
    napi_get_value_string_utf8(env, v, buf, cap, &len);
    if (strlen(buf) != len) {
        char m[128];
        snprintf(m, sizeof m, "%s holds a NUL byte", what);
        nh_throw_type(env, m);
        return false;
    }
    return true;
}

/* options[name] when present and not undefined: true with *v set; false
 * when absent (*v untouched). */
static bool nh_opt(napi_env env, napi_value obj, const char *name, napi_value *v,
                   napi_valuetype *t)
{
    bool has = false;
    if (napi_has_named_property(env, obj, name, &has) != napi_ok || !has)
        return false;
    napi_get_named_property(env, obj, name, v);
    napi_typeof(env, *v, t);
    return *t != napi_undefined;
}

static bool nh_opt_u32(napi_env env, napi_value obj, const char *name, unsigned *out)
{
    napi_value v;
    napi_valuetype t;
    double d;
    if (!nh_opt(env, obj, name, &v, &t))
        return true;
    if (t != napi_number || napi_get_value_double(env, v, &d) != napi_ok || d < 0 ||
        d > 4294967295.0 || d != (double)(unsigned)d) {
        char m[128];
        snprintf(m, sizeof m, "options.%s must be an integer from 0 to 2^32-1", name);
        nh_throw_type(env, m);
        return false;
    }
    *out = (unsigned)d;
    return true;
}

static bool nh_opt_bool(napi_env env, napi_value obj, const char *name, bool *out)
{
    napi_value v;
    napi_valuetype t;
    if (!nh_opt(env, obj, name, &v, &t))
        return true;
    if (t != napi_boolean) {
        char m[128];
        snprintf(m, sizeof m, "options.%s must be a boolean", name);
        nh_throw_type(env, m);
        return false;
    }
    napi_get_value_bool(env, v, out);
    return true;
}

static void nh_set_str(napi_env env, napi_value obj, const char *name, const char *s)
{
    napi_value v;
    napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
    napi_set_named_property(env, obj, name, v);
}

static void nh_set_u32(napi_env env, napi_value obj, const char *name, uint32_t n)
{
    napi_value v;
    napi_create_uint32(env, n, &v);
    napi_set_named_property(env, obj, name, v);
}

static void nh_set_bool(napi_env env, napi_value obj, const char *name, bool b)
{
    napi_value v;
    napi_get_boolean(env, b, &v);
    napi_set_named_property(env, obj, name, v);
}

/* ---- the loop driving the resolver --------------------------------------- */

static void nh_maybe_free(nh_guard *g)
{
    if (g->closed && g->finalized && g->handles == 0)
        free(g);
}

static void nh_handle_closed(uv_handle_t *h)
{
    nh_guard *g = h->data;
    if ((void *)h == (void *)g->timer) {
        free(g->timer);
        g->timer = NULL;
    } else {
        free(h); /* an nh_watch: poll is its first member */
    }
    g->handles--;
    nh_maybe_free(g);
}

/* Hands readiness to the resolver inside a callback scope, so that the
 * promises its answers settle run their reactions before the loop moves
 * on. */
static void nh_process(nh_guard *g, int fd, unsigned events)
{
    napi_env env = g->env;
    napi_handle_scope hs;
    napi_value resource;
    napi_async_context ctx;
    napi_callback_scope cs;
    if (g->closed || !g->resolver)
        return;
    napi_open_handle_scope(env, &hs);
    napi_create_object(env, &resource);
    napi_value name;
    napi_create_string_utf8(env, "pinhole.resolve", NAPI_AUTO_LENGTH, &name);
    napi_async_init(env, resource, name, &ctx);
    napi_open_callback_scope(env, resource, ctx, &cs);
    ph_resolver_process(g->resolver, fd, events);
    napi_close_callback_scope(env, cs);
    napi_async_destroy(env, ctx);
    napi_close_handle_scope(env, hs);
}

static void nh_on_poll(uv_poll_t *p, int status, int events)
{
    nh_watch *w = (nh_watch *)p;
    unsigned ev = 0;
    if (status < 0 || (events & (UV_READABLE | UV_DISCONNECT)))
        ev |= PH_RESOLVER_READ;
    if (events & UV_WRITABLE)
        ev |= PH_RESOLVER_WRITE;
    nh_process(w->g, w->fd, ev);
}

static void nh_on_timer(uv_timer_t *t)
{
    nh_process(t->data, -1, 0);
}

static void nh_watch_stop(nh_guard *g, nh_watch **link)
{
    nh_watch *w = *link;
    *link = w->next;
    uv_poll_stop(&w->poll);
    uv_close((uv_handle_t *)&w->poll, nh_handle_closed);
    (void)g;
}

static void nh_loop_watch(void *arg, int fd, unsigned events)
{
    nh_guard *g = arg;
    nh_watch **link = &g->watches;
    while (*link && (*link)->fd != fd)
        link = &(*link)->next;
    if (events == 0) {
        if (*link)
            nh_watch_stop(g, link);
        return;
    }
    nh_watch *w = *link;
    if (!w) {
        w = calloc(1, sizeof *w);
        if (!w)
            return; /* the query then ends by its timeout */
        if (uv_poll_init_socket(g->loop, &w->poll, fd) != 0) {
            free(w);
            return;
        }
        w->poll.data = g;
        w->g = g;
        w->fd = fd;
        w->next = g->watches;
        g->watches = w;
        g->handles++;
        /* An idle DNS socket does not keep the process alive; the timer,
         * armed while a query is pending, does. */
        uv_unref((uv_handle_t *)&w->poll);
    }
    int uvev = 0;
    if (events & PH_RESOLVER_READ)
        uvev |= UV_READABLE;
    if (events & PH_RESOLVER_WRITE)
        uvev |= UV_WRITABLE;
    uv_poll_start(&w->poll, uvev, nh_on_poll);
}

static void nh_loop_timer(void *arg, long ms)
{
    nh_guard *g = arg;
    if (!g->timer)
        return;
    if (ms < 0)
        uv_timer_stop(g->timer);
    else
        uv_timer_start(g->timer, nh_on_timer, (uint64_t)ms, 0);
}

/* ---- Guard --------------------------------------------------------------- */

static nh_guard *nh_unwrap(napi_env env, napi_callback_info info, size_t *argc, napi_value *argv,
                           napi_value *self)
{
    napi_value this_arg;
    nh_guard *g = NULL;
    if (napi_get_cb_info(env, info, argc, argv, &this_arg, NULL) != napi_ok)
        return NULL;
    if (self)
        *self = this_arg;
    if (napi_unwrap(env, this_arg, (void **)&g) != napi_ok || !g) {
        nh_throw_type(env, "not a Guard");
        return NULL;
    }
    if (g->closed || !g->guard) {
        nh_throw_status(env, PH_E_INVAL, "the guard is closed");
        return NULL;
    }
    return g;
}

/* Frees the guard's C side: pending queries are rejected (when the env is
 * still usable), the resolver freed, the loop handles closed. */
static void nh_close(nh_guard *g, bool reject)
{
    if (g->closed)
        return;
    g->closed = true;
    while (g->queries) {
        nh_query *q = g->queries;
        g->queries = q->next;
        ph_resolver_cancel(q->q);
        if (reject) {
            napi_reject_deferred(g->env, q->deferred,
                                 nh_error(g->env, "guard_error", "the guard was closed", "invalid"));
        }
        if (q->guard_obj)
            napi_delete_reference(g->env, q->guard_obj);
        free(q);
    }
    g->pending = 0;
    ph_resolver_free(&g->resolver);
    while (g->watches)
        nh_watch_stop(g, &g->watches);
    if (g->timer) {
        uv_timer_stop(g->timer);
        uv_close((uv_handle_t *)g->timer, nh_handle_closed);
    }
    ph_guard_close(&g->guard);
}

/* At the environment's teardown (process exit, a worker thread ending)
 * the loop handles are closed while the loop still runs, before Node-API
 * runs the finalizers. */
static void nh_teardown(void *arg)
{
    nh_close(arg, false);
}

static void nh_finalize(napi_env env, void *data, void *hint)
{
    (void)hint;
    nh_guard *g = data;
    napi_remove_env_cleanup_hook(env, nh_teardown, g);
    nh_close(g, false);
    g->finalized = true;
    nh_maybe_free(g);
}

/* new Guard(tablePath, {dnsServers, dnsTimeoutMs, reloadIntervalMs,
 * dnsCache, dnsCacheEntries, dnsCacheMaxTtlS, dnsNegativeTtlS, maxPending}) */
static napi_value nh_guard_new(napi_env env, napi_callback_info info)
{
    size_t argc = 2;
    napi_value argv[2], self;
    char path[4096], servers[PH_RESOLVE_SERVERS_MAX + 1] = "";
    napi_get_cb_info(env, info, &argc, argv, &self, NULL);
    if (argc < 1 || !nh_string(env, argv[0], path, sizeof path, "tablePath"))
        return NULL;
    ph_guard_options o = {0};
    unsigned max_pending = NH_MAX_PENDING_DEFAULT, reload_ms = 1000;
    bool cache = true;
    napi_valuetype t = napi_undefined;
    if (argc >= 2)
        napi_typeof(env, argv[1], &t);
    if (t == napi_object) {
        napi_value opts = argv[1];
        napi_value v;
        napi_valuetype vt;
        if (nh_opt(env, opts, "dnsServers", &v, &vt) && vt != napi_null) {
            if (!nh_string(env, v, servers, sizeof servers, "options.dnsServers"))
                return NULL;
            o.dns_servers = servers;
        }
        if (!nh_opt_u32(env, opts, "dnsTimeoutMs", &o.dns_timeout_ms) ||
            !nh_opt_u32(env, opts, "reloadIntervalMs", &reload_ms) ||
            !nh_opt_u32(env, opts, "dnsCacheEntries", &o.dns_cache_entries) ||
            !nh_opt_u32(env, opts, "dnsCacheMaxTtlS", &o.dns_cache_max_ttl_s) ||
            !nh_opt_u32(env, opts, "dnsNegativeTtlS", &o.dns_negative_ttl_s) ||
            !nh_opt_u32(env, opts, "maxPending", &max_pending) ||
            !nh_opt_bool(env, opts, "dnsCache", &cache))
            return NULL;
        if (max_pending == 0) {
            nh_throw_type(env, "options.maxPending must be at least 1");
            return NULL;
        }
    } else if (t != napi_undefined) {
        nh_throw_type(env, "options must be an object");
        return NULL;
    }
    o.reload_interval_ms = reload_ms;
    o.dns_cache_off = !cache;

    nh_guard *g = calloc(1, sizeof *g);
    if (!g) {
        nh_throw_status(env, PH_E_NOMEM, "out of memory");
        return NULL;
    }
    g->env = env;
    g->max_pending = max_pending;
    ph_diag diag = {0};
    ph_status st = ph_guard_open(path, &o, &g->guard, &diag);
    if (st != PH_OK) {
        free(g);
        nh_throw_status(env, st, diag.message);
        return NULL;
    }
    /* The loop's resolver gets the guard's resolver settings and a cache of
     * the same shape (checked outcomes only). */
    ph_resolver_config rc = {
        .servers = o.dns_servers,
        .timeout_ms = o.dns_timeout_ms,
        .cache_entries = cache ? (o.dns_cache_entries ? o.dns_cache_entries
                                                      : PH_GUARD_DNS_CACHE_ENTRIES_DEFAULT)
                               : 0,
        .cache_max_ttl_s = o.dns_cache_max_ttl_s ? o.dns_cache_max_ttl_s
                                                 : PH_GUARD_DNS_CACHE_MAX_TTL_S_DEFAULT,
        .negative_ttl_s = o.dns_negative_ttl_s ? o.dns_negative_ttl_s
                                               : PH_GUARD_DNS_NEGATIVE_TTL_S_DEFAULT,
    };
    if (napi_get_uv_event_loop(env, &g->loop) != napi_ok || !g->loop) {
        ph_guard_close(&g->guard);
        free(g);
        nh_throw_status(env, PH_E_UNSUPPORTED, "no event loop");
        return NULL;
    }
    g->timer = calloc(1, sizeof *g->timer);
    if (!g->timer) {
        ph_guard_close(&g->guard);
        free(g);
        nh_throw_status(env, PH_E_NOMEM, "out of memory");
        return NULL;
    }
    uv_timer_init(g->loop, g->timer);
    g->timer->data = g;
    g->handles = 1;
    ph_resolver_loop loop = {.watch = nh_loop_watch, .timer = nh_loop_timer, .arg = g};
    st = ph_resolver_new(&rc, &loop, &g->resolver, &diag);
    if (st == PH_OK && napi_wrap(env, self, g, nh_finalize, NULL, NULL) != napi_ok)
        st = PH_E_INTERNAL;
    if (st != PH_OK) {
        nh_close(g, false);
        g->finalized = true;
        nh_maybe_free(g);
        nh_throw_status(env, st, diag.message);
        return NULL;
    }
    napi_add_env_cleanup_hook(env, nh_teardown, g);
    return self;
}

static napi_value nh_guard_close(napi_env env, napi_callback_info info)
{
    napi_value this_arg;
    nh_guard *g = NULL;
    napi_get_cb_info(env, info, NULL, NULL, &this_arg, NULL);
    if (napi_unwrap(env, this_arg, (void **)&g) == napi_ok && g)
        nh_close(g, true);
    return NULL;
}

static napi_value nh_guard_reload(napi_env env, napi_callback_info info)
{
    nh_guard *g = nh_unwrap(env, info, NULL, NULL, NULL);
    if (!g)
        return NULL;
    ph_reload_report r;
    ph_diag diag = {0};
    ph_status st = ph_guard_reload_policy(g->guard, &r, &diag);
    if (st != PH_OK) {
        nh_throw_status(env, st, diag.message);
        return NULL;
    }
    napi_value out, gen;
    napi_create_object(env, &out);
    nh_set_bool(env, out, "reloaded", r.reloaded);
    napi_create_double(env, (double)r.info.generation, &gen);
    napi_set_named_property(env, out, "generation", gen);
    nh_set_str(env, out, "policyId", r.info.policy_id);
    return out;
}

/* A decision's verdict fields on o. */
static void nh_set_verdict(napi_env env, napi_value o, const ph_verdict *v)
{
    napi_value rule;
    nh_set_str(env, o, "scheme",
               v->scheme == PH_SCHEME_HTTPS  ? "https"
               : v->scheme == PH_SCHEME_HTTP ? "http"
                                             : "");
    nh_set_str(env, o, "host", v->host);
    nh_set_u32(env, o, "port", v->port);
    nh_set_str(env, o, "policyId", v->policy_id);
    if (v->has_rule) {
        napi_create_object(env, &rule);
        nh_set_str(env, rule, "list", v->rule_list);
        nh_set_str(env, rule, "host", v->rule_host);
        nh_set_str(env, rule, "file", v->rule_file);
        nh_set_u32(env, rule, "line", v->rule_line);
        nh_set_str(env, rule, "reason", v->rule_reason);
    } else {
        napi_get_null(env, &rule);
    }
    napi_set_named_property(env, o, "rule", rule);
}

/* The decision as a plain object. */
static napi_value nh_decision_object(napi_env env, const ph_decision *d)
{
    napi_value o;
    napi_create_object(env, &o);
    nh_set_bool(env, o, "allowed", d->allowed);
    nh_set_str(env, o, "reason", ph_reason_code(d->reason));
    nh_set_str(env, o, "detail", d->log_detail);
    /* A refusal's own message (ph_verdict.detail: the parser's or the
     * lookup's, what the check CLIs print), where detail is the log line. */
    if (!d->allowed)
        nh_set_str(env, o, "verdictDetail", d->verdict.detail);
    nh_set_u32(env, o, "httpStatus", (uint32_t)d->http_status);
    nh_set_verdict(env, o, &d->verdict);
    return o;
}

/* A guard method's call (url, list): decides url for list into *d and
 * returns the guard (*self the Guard object when self is not NULL); NULL
 * with an exception pending for a closed guard or bad arguments. */
static nh_guard *nh_decide(napi_env env, napi_callback_info info, napi_value *self, ph_decision *d)
{
    size_t argc = 2;
    napi_value argv[2];
    nh_guard *g = nh_unwrap(env, info, &argc, argv, self);
    char url[NH_STR_MAX + 1], list[PH_VERDICT_TEXT_MAX + 1];
    if (!g)
        return NULL;
    /* A call without its list throws: returning with no exception pending
     * would make admit's undefined, its "allowed", an answer. */
    if (argc < 2) {
        nh_throw_type(env, "(url, list): both are strings");
        return NULL;
    }
    if (!nh_string(env, argv[0], url, sizeof url, "url") ||
        !nh_string(env, argv[1], list, sizeof list, "list"))
        return NULL;
    ph_url_request req = {.url = url, .url_len = strlen(url), .list = list,
                          .now = (int64_t)time(NULL)};
    ph_status st = ph_decide_url(g->guard, &req, d);
    if (st != PH_OK && st != PH_E_DENIED && st != PH_E_INVAL) {
        nh_throw_status(env, st, d->log_detail);
        return NULL;
    }
    return g;
}

static napi_value nh_guard_decide(napi_env env, napi_callback_info info)
{
    ph_decision d;
    if (!nh_decide(env, info, NULL, &d))
        return NULL;
    return nh_decision_object(env, &d);
}

/* guard.admit(url, list): the same decision as decide, for a request about
 * to be sent: undefined when allowed, the refusal thrown as a PinholeError.
 * No verdict object is made: building one costs many times the decision
 * itself, and guardedFetch makes this call on every request. */
static napi_value nh_guard_admit(napi_env env, napi_callback_info info)
{
    ph_decision d;
    if (!nh_decide(env, info, NULL, &d))
        return NULL;
    if (!d.allowed)
        napi_throw(env, nh_error(env, ph_reason_code(d.reason), d.log_detail, NULL));
    return NULL;
}

static void nh_query_unlink(nh_query *q)
{
    nh_guard *g = q->g;
    if (q->prev)
        q->prev->next = q->next;
    else
        g->queries = q->next;
    if (q->next)
        q->next->prev = q->prev;
    g->pending--;
}

static void nh_on_answer(void *arg, const ph_resolve_answer *a)
{
    nh_query *q = arg;
    nh_guard *g = q->g;
    napi_env env = g->env;
    nh_query_unlink(q);
    if (a->st == PH_OK) {
        napi_value out = nh_decision_object(env, &q->d), list;
        napi_create_array_with_length(env, a->addrs.count, &list);
        for (size_t i = 0; i < a->addrs.count; i++) {
            char buf[INET6_ADDRSTRLEN];
            napi_value e;
            if (ph_pinned_addr_string(&a->addrs, i, buf, sizeof buf) != PH_OK)
                continue;
            napi_create_object(env, &e);
            nh_set_str(env, e, "address", buf);
            nh_set_u32(env, e, "family", a->addrs.addr[i].ss_family == AF_INET6 ? 6 : 4);
            napi_set_element(env, list, (uint32_t)i, e);
        }
        napi_set_named_property(env, out, "addresses", list);
        nh_set_bool(env, out, "fromCache", a->from_cache);
        napi_resolve_deferred(env, q->deferred, out);
    } else {
        napi_reject_deferred(env, q->deferred,
                             nh_error(env, ph_reason_code(a->reason), a->detail, NULL));
    }
    napi_delete_reference(env, q->guard_obj);
    free(q);
}

/* guard.resolve(url, list) -> Promise */
static napi_value nh_guard_resolve(napi_env env, napi_callback_info info)
{
    napi_value self, promise;
    nh_query *q = calloc(1, sizeof *q);
    if (!q) {
        nh_throw_status(env, PH_E_NOMEM, "out of memory");
        return NULL;
    }
    nh_guard *g = nh_decide(env, info, &self, &q->d);
    if (!g) {
        free(q);
        return NULL;
    }
    napi_create_promise(env, &q->deferred, &promise);
    if (!q->d.allowed) {
        napi_reject_deferred(env, q->deferred,
                             nh_error(env, ph_reason_code(q->d.reason), q->d.log_detail, NULL));
        free(q);
        return promise;
    }
    if (g->pending >= g->max_pending) {
        char m[128];
        snprintf(m, sizeof m, "%zu resolutions already in flight on this guard (maxPending)",
                 g->pending);
        napi_reject_deferred(env, q->deferred, nh_error(env, "limit_exceeded", m, NULL));
        free(q);
        return promise;
    }
    ph_diag diag = {0};
    q->g = g;
    ph_status st = ph_resolver_start(g->resolver, q->d.verdict.host, q->d.verdict.port,
                                     nh_on_answer, q, &q->q, &diag);
    if (st != PH_OK) {
        napi_reject_deferred(env, q->deferred,
                             st == PH_E_INVAL ? nh_error(env, "parse_error", diag.message, NULL)
                                              : nh_error(env, "guard_error", diag.message,
                                                         ph_strerror(st)));
        free(q);
        return promise;
    }
    napi_create_reference(env, self, 1, &q->guard_obj);
    q->next = g->queries;
    if (g->queries)
        g->queries->prev = q;
    g->queries = q;
    g->pending++;
    return promise;
}

/* guard.redirectCheck(fromUrl, location, hop, list, {maxHops,
 * allowDowngrade, resendBody, allowBodyCrossOrigin}) */
static napi_value nh_guard_redirect_check(napi_env env, napi_callback_info info)
{
    size_t argc = 5;
    napi_value argv[5];
    nh_guard *g = nh_unwrap(env, info, &argc, argv, NULL);
    if (!g)
        return NULL;
    char from[NH_STR_MAX + 1], loc[8192], list[PH_VERDICT_TEXT_MAX + 1];
    uint32_t hop = 0;
    if (argc < 4 || !nh_string(env, argv[0], from, sizeof from, "fromUrl") ||
        !nh_string(env, argv[1], loc, sizeof loc, "location") ||
        napi_get_value_uint32(env, argv[2], &hop) != napi_ok ||
        !nh_string(env, argv[3], list, sizeof list, "list")) {
        bool pending = false;
        napi_is_exception_pending(env, &pending);
        if (!pending)
            nh_throw_type(env, "redirectCheck(fromUrl, location, hop, list, options)");
        return NULL;
    }
    ph_redirect_options o = {0};
    napi_valuetype t = napi_undefined;
    if (argc >= 5)
        napi_typeof(env, argv[4], &t);
    if (t == napi_object &&
        (!nh_opt_u32(env, argv[4], "maxHops", &o.max_hops) ||
         !nh_opt_bool(env, argv[4], "allowDowngrade", &o.allow_downgrade) ||
         !nh_opt_bool(env, argv[4], "resendBody", &o.resend_body) ||
         !nh_opt_bool(env, argv[4], "allowBodyCrossOrigin", &o.allow_body_cross_origin)))
        return NULL;
    ph_redirect *r = malloc(sizeof *r);
    if (!r) {
        nh_throw_status(env, PH_E_NOMEM, "out of memory");
        return NULL;
    }
    ph_diag diag = {0};
    ph_status st = ph_redirect_check(g->guard, list, from, loc, hop, &o, r, &diag);
    napi_value out = NULL;
    if (st == PH_OK || st == PH_E_DENIED || st == PH_E_INVAL) {
        napi_create_object(env, &out);
        nh_set_bool(env, out, "allowed", st == PH_OK && r->verdict.allowed);
        nh_set_str(env, out, "reason", ph_reason_code(r->verdict.reason));
        nh_set_str(env, out, "detail", r->verdict.detail);
        nh_set_str(env, out, "url", r->url);
        nh_set_bool(env, out, "sameOrigin", r->same_origin);
        nh_set_bool(env, out, "dropCredentials", r->drop_credentials);
    } else {
        nh_throw_status(env, st, diag.message);
    }
    free(r);
    return out;
}

/* ---- module functions ---------------------------------------------------- */

static napi_value nh_set_error_class(napi_env env, napi_callback_info info)
{
    size_t argc = 1;
    napi_value argv[1];
    nh_instance *inst = NULL;
    napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
    napi_get_instance_data(env, (void **)&inst);
    if (argc < 1 || !inst) {
        nh_throw_type(env, "setErrorClass(PinholeError)");
        return NULL;
    }
    if (inst->error_ctor)
        napi_delete_reference(env, inst->error_ctor);
    napi_create_reference(env, argv[0], 1, &inst->error_ctor);
    return NULL;
}

/* nextMethod(status, method) */
static napi_value nh_next_method(napi_env env, napi_callback_info info)
{
    size_t argc = 2;
    napi_value argv[2], out;
    int32_t status = 0;
    char method[64];
    napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
    if (argc < 2 || napi_get_value_int32(env, argv[0], &status) != napi_ok) {
        nh_throw_type(env, "nextMethod(status, method)");
        return NULL;
    }
    if (!nh_string(env, argv[1], method, sizeof method, "method"))
        return NULL;
    const char *m = ph_redirect_next_method(status, method);
    napi_create_string_utf8(env, m ? m : method, NAPI_AUTO_LENGTH, &out);
    return out;
}

static napi_value nh_names(napi_env env, const char *(*fn)(size_t))
{
    napi_value arr;
    napi_create_array(env, &arr);
    for (size_t i = 0;; i++) {
        const char *n = fn(i);
        if (!n)
            break;
        napi_value s;
        napi_create_string_utf8(env, n, NAPI_AUTO_LENGTH, &s);
        napi_set_element(env, arr, (uint32_t)i, s);
    }
    return arr;
}

/* redirectHeaders() -> {crossOrigin: [...], body: [...]} */
static napi_value nh_redirect_headers(napi_env env, napi_callback_info info)
{
    (void)info;
    napi_value o;
    napi_create_object(env, &o);
    napi_set_named_property(env, o, "crossOrigin", nh_names(env, ph_redirect_cross_origin_header));
    napi_set_named_property(env, o, "body", nh_names(env, ph_redirect_body_header));
    return o;
}

static void nh_instance_free(napi_env env, void *data, void *hint)
{
    (void)hint;
    nh_instance *inst = data;
    if (inst->error_ctor)
        napi_delete_reference(env, inst->error_ctor);
    if (inst->guard_ctor)
        napi_delete_reference(env, inst->guard_ctor);
    free(inst);
}

static napi_value nh_init(napi_env env, napi_value exports)
{
    nh_instance *inst = calloc(1, sizeof *inst);
    if (!inst || napi_set_instance_data(env, inst, nh_instance_free, NULL) != napi_ok) {
        free(inst);
        nh_throw_status(env, PH_E_NOMEM, "out of memory");
        return NULL;
    }
    napi_property_descriptor methods[] = {
        {"decide", NULL, nh_guard_decide, NULL, NULL, NULL, napi_default, NULL},
        {"admit", NULL, nh_guard_admit, NULL, NULL, NULL, napi_default, NULL},
        {"resolve", NULL, nh_guard_resolve, NULL, NULL, NULL, napi_default, NULL},
        {"redirectCheck", NULL, nh_guard_redirect_check, NULL, NULL, NULL, napi_default, NULL},
        {"reload", NULL, nh_guard_reload, NULL, NULL, NULL, napi_default, NULL},
        {"close", NULL, nh_guard_close, NULL, NULL, NULL, napi_default, NULL},
    };
    napi_value cls;
    if (napi_define_class(env, "Guard", NAPI_AUTO_LENGTH, nh_guard_new, NULL,
                          sizeof methods / sizeof methods[0], methods, &cls) != napi_ok)
        return NULL;
    napi_create_reference(env, cls, 1, &inst->guard_ctor);
    napi_value test_loopback, url_max;
    napi_get_boolean(env, ph_build_is_test_loopback(), &test_loopback);
    napi_create_uint32(env, PH_URL_MAX_LEN, &url_max);
    napi_property_descriptor fns[] = {
        {"Guard", NULL, NULL, NULL, NULL, cls, napi_default, NULL},
        {"setErrorClass", NULL, nh_set_error_class, NULL, NULL, NULL, napi_default, NULL},
        {"nextMethod", NULL, nh_next_method, NULL, NULL, NULL, napi_default, NULL},
        {"redirectHeaders", NULL, nh_redirect_headers, NULL, NULL, NULL, napi_default, NULL},
        {"testLoopback", NULL, NULL, NULL, NULL, test_loopback, napi_default, NULL},
        {"urlMaxLen", NULL, NULL, NULL, NULL, url_max, napi_default, NULL},
    };
    napi_define_properties(env, exports, sizeof fns / sizeof fns[0], fns);
    return exports;
}

/* The entry points NAPI_MODULE_INIT defines, declared first (-Wmissing-prototypes). */
NAPI_MODULE_EXPORT int32_t NODE_API_MODULE_GET_API_VERSION(void);
NAPI_MODULE_EXPORT napi_value NAPI_MODULE_INITIALIZER(napi_env env, napi_value exports);

NAPI_MODULE_INIT()
{
    return nh_init(env, exports);
}
