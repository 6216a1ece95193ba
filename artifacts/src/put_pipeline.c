/* put_pipeline.c - two buffers and one writer thread (put_pipeline-int.h).
 * The writer only ever touches the buffer it was handed; the producer only
 * the other one. One mutex and one condition variable guard the hand-off. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pinhole/diag.h"
#include "put_pipeline-int.h"
#include "store-int.h"

struct ph_put_pipeline {
    const ph_artifact_backend_ops *ops;
    ph_artifact_backend_writer *w;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool threaded, stop;
    unsigned char *buf[2];
    int current;           /* the buffer the producer fills */
    int pending;           /* the buffer handed to the writer, or -1 */
    size_t pending_len;
    ph_status status;      /* the writer's first failure */
    ph_diag diag;
};

static void *writer_main(void *arg)
{
    ph_put_pipeline *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->pending < 0 && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->pending < 0)
            break; /* stop, and nothing left */
        int idx = p->pending;
        size_t len = p->pending_len;
        bool failed = p->status != PH_OK;
        pthread_mutex_unlock(&p->mu);
        ph_diag d = {0};
        ph_status st = failed ? PH_OK : p->ops->write(p->w, p->buf[idx], len, &d);
        pthread_mutex_lock(&p->mu);
        if (st != PH_OK && p->status == PH_OK) {
            p->status = st;
            p->diag = d;
        }
        p->pending = -1;
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

ph_status ph_put_pipeline_start(const ph_artifact_backend_ops *ops, ph_artifact_backend_writer *w,
                                ph_put_pipeline **out, ph_diag *diag)
{
    *out = NULL;
    ph_put_pipeline *p = calloc(1, sizeof *p);
    if (p == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    p->ops = ops;
    p->w = w;
    p->pending = -1;
    p->buf[0] = malloc(PH_ARTIFACT_CHUNK);
    p->buf[1] = malloc(PH_ARTIFACT_CHUNK);
    if (p->buf[0] == NULL || p->buf[1] == NULL) {
        free(p->buf[0]);
        free(p->buf[1]);
        free(p);
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->threaded = pthread_create(&p->thread, NULL, writer_main, p) == 0;
    *out = p;
    return PH_OK;
}

unsigned char *ph_put_pipeline_buffer(ph_put_pipeline *p)
{
    return p->buf[p->current];
}

static ph_status report(ph_put_pipeline *p, ph_diag *diag)
{
    if (p->status != PH_OK && diag)
        *diag = p->diag;
    return p->status;
}

ph_status ph_put_pipeline_submit(ph_put_pipeline *p, size_t len, ph_diag *diag)
{
    if (!p->threaded) {
        if (p->status == PH_OK)
            p->status = p->ops->write(p->w, p->buf[p->current], len, &p->diag);
        return report(p, diag);
    }
    pthread_mutex_lock(&p->mu);
    while (p->pending >= 0)
        pthread_cond_wait(&p->cv, &p->mu);
    p->pending = p->current;
    p->pending_len = len;
    p->current ^= 1;
    pthread_cond_broadcast(&p->cv);
    ph_status st = report(p, diag);
    pthread_mutex_unlock(&p->mu);
    return st;
}

ph_status ph_put_pipeline_finish(ph_put_pipeline **pp, ph_diag *diag)
{
    if (pp == NULL || *pp == NULL)
        return PH_OK;
    ph_put_pipeline *p = *pp;
    if (p->threaded) {
        pthread_mutex_lock(&p->mu);
        p->stop = true;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->thread, NULL); /* drains the pending buffer first */
    }
    ph_status st = report(p, diag);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->buf[0]);
    free(p->buf[1]);
    free(p);
    *pp = NULL;
    return st;
}
