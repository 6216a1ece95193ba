/* put_pipeline-int.h - overlaps hashing with backend writes during a put
 * (private). The producer (the put) reads and hashes chunk N+1 while a
 * writer thread pushes chunk N to the backend: on two cores a put costs
 * max(read + hash, write) instead of their sum. */
#ifndef PINHOLE_ARTIFACTS_PUT_PIPELINE_INT_H
#define PINHOLE_ARTIFACTS_PUT_PIPELINE_INT_H

#include "pinhole/artifact_backend.h"

typedef struct ph_put_pipeline ph_put_pipeline;

/* Starts a pipeline writing to w with ops. If no thread can be started the
 * pipeline writes synchronously in submit (same results, no overlap). */
ph_status ph_put_pipeline_start(const ph_artifact_backend_ops *ops, ph_artifact_backend_writer *w,
                                ph_put_pipeline **out, ph_diag *diag);

/* The buffer (PH_ARTIFACT_CHUNK bytes) the producer fills next. */
unsigned char *ph_put_pipeline_buffer(ph_put_pipeline *p);

/* Hands the first len bytes of the current buffer to the writer. Returns
 * the writer's first failure, if any happened so far. */
ph_status ph_put_pipeline_submit(ph_put_pipeline *p, size_t len, ph_diag *diag);

/* Waits for every submitted byte, stops the writer, frees *p (NULL-safe) and
 * sets it to NULL. Returns the writer's first failure or PH_OK. */
ph_status ph_put_pipeline_finish(ph_put_pipeline **p, ph_diag *diag);

#endif
