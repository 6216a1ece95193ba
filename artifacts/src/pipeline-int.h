/* pipeline-int.h - one worker thread and a small ring of chunk buffers that
 * overlap the caller's work with the backend's, in either direction
 * (private):
 *  - PH_PIPELINE_DRAIN (put): the caller reads and hashes chunk N+1 while
 *    the worker hands chunk N to fn (the backend write);
 *  - PH_PIPELINE_FILL (get): the worker fills chunks ahead of the caller
 *    with fn (the backend read) while the caller hashes and consumes the
 *    oldest one.
 * On two cores a stream then costs the larger of the two sides, not their
 * sum.
 *
 * Ownership: the pipeline owns its buffers; each one belongs to exactly one
 * side at a time (the filler until published, the drainer until released),
 * so bytes are touched without the lock. ctx is borrowed: it must outlive
 * ph_pipeline_finish, and fn runs on the worker thread only (or on the
 * caller's, when no thread could be started: then every call happens inline,
 * with the same results and no overlap). The worker's first failure is
 * sticky and reaches the caller as the same status and diagnostic. */
#ifndef PINHOLE_ARTIFACTS_PIPELINE_INT_H
#define PINHOLE_ARTIFACTS_PIPELINE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "pinhole/status.h"

typedef enum ph_pipeline_dir {
    PH_PIPELINE_DRAIN, /* the caller fills, the worker drains (put) */
    PH_PIPELINE_FILL,  /* the worker fills, the caller drains (get) */
} ph_pipeline_dir;

/* DRAIN: consumes the *len bytes at buf. FILL: fills at most *len bytes of
 * buf and sets *len; 0 is the end (the worker then stops). */
typedef ph_status (*ph_pipeline_fn)(void *ctx, unsigned char *buf, size_t *len, ph_diag *diag);

typedef struct ph_pipeline_config {
    ph_pipeline_dir dir;
    ph_pipeline_fn fn;
    void *ctx;
    size_t slots;    /* buffers in the ring, at least 1 (1: never threaded) */
    size_t cap;      /* bytes per buffer */
    bool threaded;   /* false: everything inline on the caller's thread */
    /* Optional (FILL): called by finish on the caller's thread while fn may
     * be running on the worker, to make it return promptly. */
    void (*interrupt)(void *ctx);
} ph_pipeline_config;

typedef struct ph_pipeline ph_pipeline;

/* Allocates the ring and starts the worker (or none: see above). *out is
 * owned by the caller until ph_pipeline_finish. */
ph_status ph_pipeline_start(const ph_pipeline_config *cfg, ph_pipeline **out, ph_diag *diag);

/* The caller's next buffer, which stays the caller's until ph_pipeline_give.
 * DRAIN: an empty one (*len = cap); waits for a free slot.
 * FILL: the oldest full one and its length; *buf NULL and *len 0 at the
 * end. Either way the worker's failure, once every buffer filled before it
 * was taken. */
ph_status ph_pipeline_take(ph_pipeline *p, unsigned char **buf, size_t *len, ph_diag *diag);

/* Hands the taken buffer back. DRAIN: the first len bytes go to the worker
 * (inline: to fn now); returns the worker's first failure so far. FILL: the
 * buffer is free for the worker again (len unused); PH_OK. */
ph_status ph_pipeline_give(ph_pipeline *p, size_t len, ph_diag *diag);

/* Ends the pipeline, frees *p (NULL-safe) and sets it to NULL.
 * DRAIN: waits for every given byte to reach fn first.
 * FILL: stops the worker at once (interrupting fn if configured), even
 * mid-stream; joins it. Returns the worker's first failure or PH_OK. */
ph_status ph_pipeline_finish(ph_pipeline **p, ph_diag *diag);

#endif
