/* pipeline.c - a ring of buffers and one worker thread (pipeline-int.h).
 * The filler fills slot `head` and publishes it; the drainer drains slot
 * `tail` and releases it; `full` counts the published, unreleased slots.
 * One mutex and one condition variable guard the indices, never the bytes. */
#include <pthread.h>
#include <stdlib.h>

#include "pinhole/diag.h"
#include "pipeline-int.h"

struct ph_pipeline {
    ph_pipeline_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool threaded;
    bool closing;        /* finish was called: DRAIN drains and ends, FILL stops */
    bool done;           /* FILL: the worker reached the end or failed */
    unsigned char **buf; /* nbuf buffers of cfg.cap bytes, cfg.slots in use */
    size_t nbuf;
    size_t *len;
    size_t head, tail, full;
    ph_status status;    /* the worker's first failure */
    ph_diag diag;
};

static void record(ph_pipeline *p, ph_status st, const ph_diag *d)
{
    if (st != PH_OK && p->status == PH_OK) {
        p->status = st;
        p->diag = *d;
        p->diag.status = st;
    }
}

static ph_status report(const ph_pipeline *p, ph_diag *diag)
{
    if (p->status != PH_OK && diag)
        *diag = p->diag;
    return p->status;
}

/* DRAIN: passes each published slot to fn until closed and empty; after a
 * failure the rest is released unwritten. */
static void drain_main(ph_pipeline *p)
{
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->full == 0 && !p->closing)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->full == 0)
            break;
        size_t idx = p->tail, len = p->len[idx];
        bool failed = p->status != PH_OK;
        pthread_mutex_unlock(&p->mu);
        ph_diag d = {0};
        ph_status st = failed ? PH_OK : p->cfg.fn(p->cfg.ctx, p->buf[idx], &len, &d);
        pthread_mutex_lock(&p->mu);
        record(p, st, &d);
        p->tail = (p->tail + 1) % p->cfg.slots;
        p->full--;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
}

/* FILL: fills free slots ahead of the caller until the end, a failure or
 * finish. */
static void fill_main(ph_pipeline *p)
{
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->full == p->cfg.slots && !p->closing)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->closing)
            break;
        size_t idx = p->head, len = p->cfg.cap;
        pthread_mutex_unlock(&p->mu);
        ph_diag d = {0};
        ph_status st = p->cfg.fn(p->cfg.ctx, p->buf[idx], &len, &d);
        pthread_mutex_lock(&p->mu);
        record(p, st, &d);
        if (st != PH_OK || len == 0) {
            p->done = true;
            pthread_cond_broadcast(&p->cv);
            break;
        }
        p->len[idx] = len;
        p->head = (p->head + 1) % p->cfg.slots;
        p->full++;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
}

static void *worker_main(void *arg)
{
    ph_pipeline *p = arg;
    if (p->cfg.dir == PH_PIPELINE_DRAIN)
        drain_main(p);
    else
        fill_main(p);
    return NULL;
}

static void free_pipeline(ph_pipeline *p)
{
    for (size_t i = 0; p->buf && i < p->nbuf; i++)
        free(p->buf[i]);
    free(p->buf);
    free(p->len);
    free(p);
}

ph_status ph_pipeline_start(const ph_pipeline_config *cfg, ph_pipeline **out, ph_diag *diag)
{
    *out = NULL;
    if (cfg->slots == 0 || cfg->fn == NULL)
        return ph_diag_set(diag, PH_E_INTERNAL, 0, "pipeline without slots or function");
    ph_pipeline *p = calloc(1, sizeof *p);
    if (p == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    p->cfg = *cfg;
    if (!cfg->threaded || cfg->slots < 2)
        p->cfg.slots = 1; /* inline: one buffer serves */
    p->buf = calloc(p->cfg.slots, sizeof *p->buf);
    p->len = calloc(p->cfg.slots, sizeof *p->len);
    bool ok = p->buf && p->len;
    if (ok)
        p->nbuf = p->cfg.slots;
    for (size_t i = 0; ok && i < p->nbuf; i++)
        ok = (p->buf[i] = malloc(cfg->cap ? cfg->cap : 1)) != NULL;
    if (!ok) {
        free_pipeline(p);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    /* No thread to spare: the same calls happen inline in take and give. */
    p->threaded = p->cfg.slots > 1 && pthread_create(&p->thread, NULL, worker_main, p) == 0;
    if (!p->threaded) {
        p->cfg.slots = 1;
        p->head = p->tail = 0;
    }
    *out = p;
    return PH_OK;
}

/* Inline FILL: fills the one buffer now. */
static ph_status fill_inline(ph_pipeline *p)
{
    if (p->full > 0 || p->done)
        return p->status;
    size_t len = p->cfg.cap;
    ph_diag d = {0};
    ph_status st = p->cfg.fn(p->cfg.ctx, p->buf[0], &len, &d);
    record(p, st, &d);
    if (st != PH_OK || len == 0)
        p->done = true;
    else {
        p->len[0] = len;
        p->full = 1;
    }
    return st;
}

ph_status ph_pipeline_take(ph_pipeline *p, unsigned char **buf, size_t *len, ph_diag *diag)
{
    *buf = NULL;
    *len = 0;
    if (p->threaded)
        pthread_mutex_lock(&p->mu);
    ph_status st;
    if (p->cfg.dir == PH_PIPELINE_DRAIN) {
        while (p->threaded && p->full == p->cfg.slots)
            pthread_cond_wait(&p->cv, &p->mu);
        *buf = p->buf[p->head];
        *len = p->cfg.cap;
        st = report(p, diag);
    } else {
        if (!p->threaded)
            fill_inline(p);
        while (p->threaded && p->full == 0 && !p->done)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->full > 0) {
            *buf = p->buf[p->tail];
            *len = p->len[p->tail];
            st = PH_OK;
        } else {
            st = report(p, diag); /* the end, or the failure */
        }
    }
    if (p->threaded)
        pthread_mutex_unlock(&p->mu);
    return st;
}

ph_status ph_pipeline_give(ph_pipeline *p, size_t len, ph_diag *diag)
{
    if (!p->threaded) {
        if (p->cfg.dir == PH_PIPELINE_FILL) {
            p->full = 0;
            return PH_OK;
        }
        if (p->status == PH_OK) {
            ph_diag d = {0};
            record(p, p->cfg.fn(p->cfg.ctx, p->buf[0], &len, &d), &d);
        }
        return report(p, diag);
    }
    pthread_mutex_lock(&p->mu);
    ph_status st = PH_OK;
    if (p->cfg.dir == PH_PIPELINE_DRAIN) {
        p->len[p->head] = len;
        p->head = (p->head + 1) % p->cfg.slots;
        p->full++;
        st = report(p, diag);
    } else {
        p->tail = (p->tail + 1) % p->cfg.slots;
        p->full--;
    }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return st;
}

ph_status ph_pipeline_finish(ph_pipeline **pp, ph_diag *diag)
{
    if (pp == NULL || *pp == NULL)
        return PH_OK;
    ph_pipeline *p = *pp;
    if (p->threaded) {
        pthread_mutex_lock(&p->mu);
        p->closing = true;
        bool busy = !p->done;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        if (p->cfg.dir == PH_PIPELINE_FILL && busy && p->cfg.interrupt)
            p->cfg.interrupt(p->cfg.ctx); /* fn may be blocked in the backend */
        pthread_join(p->thread, NULL); /* DRAIN: after the last given buffer */
    }
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    ph_status st = report(p, diag);
    free_pipeline(p);
    *pp = NULL;
    return st;
}
