/* execd-int.h - private to pinhole-execd and its client library: the wire
 * format of docs/execd.md (frames, byte strings, the port's types as JSON)
 * written once for both sides. Not installed. */
#ifndef PINHOLE_EXECD_INT_H
#define PINHOLE_EXECD_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pinhole/sandbox.h"
#include "pinhole/workspace.h"
#include "sandbox-int.h"
#include "wire_ops-int.h"

#define PH_EXECD_PROTOCOL 1
#define PH_EXECD_FRAME_HEADER 4
/* The largest response a client accepts (two 64 MiB outputs in base64 fit). */
#define PH_EXECD_MAX_RESPONSE_BYTES (256u * 1024 * 1024)
#define PH_EXECD_DEFAULT_MAX_REQUEST (16u * 1024 * 1024)
/* Object ids: "env-", "ws-", "lse-" and 16 lowercase hex digits. */
#define PH_EXECD_ID_MAX 24
/* The largest now_seconds of a lease operation (a monotonic clock's
 * seconds, from 0): the daemon adds its own elapsed time to it. */
#define PH_EXECD_NOW_SECONDS_MAX (INT64_C(1) << 62)

/* ---- frames (wire.c) ---- */

/* The 4-byte big-endian length of a frame header. */
uint32_t ph_wire_frame_len(const uint8_t hdr[static PH_EXECD_FRAME_HEADER]);
/* What a frame body can cost once parsed is bounded before it is parsed:
 * at most PH_WIRE_VALUES_MAX JSON values (every object, array, string,
 * number and literal, object keys included; jansson spends at most about
 * 240 bytes on each besides the string bytes, which are at most the
 * frame's) nested at most PH_WIRE_DEPTH_MAX deep. The largest request the
 * protocol has (4096 argv elements as {"base64": ...}) holds about 12,300. */
#define PH_WIRE_VALUES_MAX 32768
#define PH_WIRE_DEPTH_MAX 32
/* Counts the values of a frame body and its deepest nesting in one pass,
 * without allocating or validating (jansson validates after): brackets and
 * quotes inside strings are skipped with their escapes, so for JSON jansson
 * accepts the counts are exact. true when within both caps; false with
 * *offset at the byte where one was exceeded (the counts stop there). */
typedef struct ph_wire_cost {
    size_t values;
    size_t depth;
} ph_wire_cost;
bool ph_wire_frame_scan(const uint8_t *body, size_t len, ph_wire_cost *cost, size_t *offset);
/* Serializes o (compact) into a new frame: header + JSON. Caller frees
 * *frame. 0, or -1 when out of memory. */
int ph_wire_frame(const json_t *o, uint8_t **frame, size_t *len);
/* A blocking byte transport (a socket, a TLS session): like write(2) and
 * read(2), -1 with errno on error, 0 from read at end of stream. */
typedef ssize_t ph_wire_write_fn(void *ctx, const void *buf, size_t len);
typedef ssize_t ph_wire_read_fn(void *ctx, void *buf, size_t len);
/* ph_wire_send and ph_wire_recv over any transport. */
int ph_wire_send_io(ph_wire_write_fn *wr, void *ctx, const json_t *o);
int ph_wire_recv_io(ph_wire_read_fn *rd, void *ctx, size_t max, json_t **out);
/* The transport of a blocking TLS session: ctx is the SSL *. */
ssize_t ph_wire_ssl_write(void *ctx, const void *buf, size_t len);
ssize_t ph_wire_ssl_read(void *ctx, void *buf, size_t len);
/* Blocking send of one frame of o on fd (MSG_NOSIGNAL). 0 or -1 (errno). */
int ph_wire_send(int fd, const json_t *o);
/* Blocking receive of one frame of at most max bytes. 0 and *out (new
 * reference), -1 with errno (EPIPE at end of file, EMSGSIZE over max,
 * EPROTO when the frame is not a JSON object). */
int ph_wire_recv(int fd, size_t max, json_t **out);

/* ---- errors ---- */

/* Stable error code of docs/execd.md section 4 for a library status. */
const char *ph_wire_error_code(ph_status st);
/* The library status a client reports for an error code. */
ph_status ph_wire_error_status(const char *code);
/* {"ok":false,"error":code,"message":message} (new reference or NULL). */
json_t *ph_wire_error(const char *code, const char *message);

/* ---- byte strings ---- */

/* Reads obj[text_key] (a string; text_key NULL: never) or obj[b64_key]
 * (base64). 1 when neither is
 * there, 0 with *data (new, NUL-terminated, caller frees) and *len, -1 when
 * malformed (both present, wrong type, bad base64) or out of memory. */
int ph_wire_get_bytes(const json_t *obj, const char *text_key, const char *b64_key,
                      uint8_t **data, size_t *len);
/* Decodes standard padded base64. 0 with a new NUL-terminated buffer, -1. */
int ph_wire_b64_decode(const char *s, uint8_t **data, size_t *len);
/* A JSON value for one argv element: a string when UTF-8, else
 * {"base64": "..."}. NULL when out of memory. */
json_t *ph_wire_arg(const char *arg);
/* Decodes a JSON argv array into a NULL-terminated vector of NUL-free C
 * strings (each element and the vector are new; free with
 * ph_wire_argv_free). 0 or -1 (malformed, a NUL inside an element). */
int ph_wire_argv(const json_t *arr, char ***argv);
void ph_wire_argv_free(char **argv);

/* Integer member or dflt when absent; -1 from *ok... false when present but
 * not an integer. */
int64_t ph_wire_int(const json_t *o, const char *key, int64_t dflt, bool *ok);
/* String member or NULL. */
const char *ph_wire_str(const json_t *o, const char *key);

/* ---- the port's types ---- */

/* result as the "result" object of environment.execute. NULL on memory. */
json_t *ph_wire_result(const ph_execution_result *r);
/* The reverse. PH_OK and *out (new, ph_execution_result_free) or PH_E_FORMAT. */
ph_status ph_wire_get_result(const json_t *o, ph_execution_result **out, ph_diag *diag);
/* ph_ws_stat as an object (type, size, mtime, mode) and back. */
json_t *ph_wire_stat(const ph_ws_stat *st);
bool ph_wire_get_stat(const json_t *o, ph_ws_stat *st);

#endif
