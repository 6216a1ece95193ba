/* wire_ops-int.h - the operations of docs/execd.md section 5 as data: for
 * each, its name, the request fields (key, JSON type, limits, required or
 * not, the `invalid` message a bad one gets) in the order the client writes
 * them, and the reply fields. The client builds every request from this
 * table (ph_wire_request) and the daemon checks and decodes every request
 * against it (ph_wire_decode) before the operation's handler runs, so the
 * two sides read one definition: adding an operation is a row here and a
 * handler in execd_ops.c. The client also checks every answer against the
 * row's reply fields (ph_wire_reply_check). execd.test_execd
 * (test_the_operation_table_is_what_the_daemon_checks) sends, for every
 * row, each required field missing and each field mistyped, and expects
 * the row's refusal; the execd_wire fuzzer checks that what the daemon
 * accepts, rebuilt by the client, is accepted again unchanged. Private to
 * pinhole-execd and its client; not installed. */
#ifndef PINHOLE_WIRE_OPS_INT_H
#define PINHOLE_WIRE_OPS_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most argv elements a command may have (those of the port). */
#define PH_WIRE_ARGV_MAX 4096
/* The smallest chunk_bytes of a streamed workspace.read: a smaller one is
 * refused (`invalid`), never raised, so no chunk exceeds what was asked. */
#define PH_WIRE_CHUNK_MIN 4096

typedef enum ph_wire_op_id {
    PH_OP_HELLO,
    PH_OP_HEALTH,
    PH_OP_METRICS,
    PH_OP_ENV_CREATE,
    PH_OP_ENV_EXECUTE,
    PH_OP_ENV_DESTROY,
    PH_OP_ENV_WORKSPACE,
    PH_OP_WS_STAT,
    PH_OP_WS_READ,
    PH_OP_WS_WRITE,
    PH_OP_WS_LIST,
    PH_OP_WS_CLOSE,
    PH_OP_LEASE_OPEN,
    PH_OP_LEASE_ENVIRONMENT,
    PH_OP_LEASE_WORKSPACE,
    PH_OP_LEASE_STATUS,
    PH_OP_LEASE_HOLD_BEGIN,
    PH_OP_LEASE_HOLD_TICK,
    PH_OP_LEASE_HOLD_END,
    PH_OP_LEASE_END,
    PH_OP_COUNT
} ph_wire_op_id;

/* Every request field by name: where its value is in ph_wire_args (the
 * members of an object field, and of one element of a list, too). Reply
 * fields have none (PH_F_NONE). */
typedef enum ph_wire_field_id {
    PH_F_NONE = -1,
    PH_F_TENANT,
    PH_F_ENVIRONMENT,
    PH_F_WORKSPACE,
    PH_F_HANDLE,
    PH_F_HARD_CAP_MS,
    PH_F_MECHANISM,
    PH_F_LIMITS,
    PH_F_MEMORY_BYTES,
    PH_F_PIDS,
    PH_F_CPU_MILLIS,
    PH_F_WALL_CLOCK_MS,
    PH_F_OUTPUT_BYTES,
    PH_F_LEASE,
    PH_F_NETWORK,
    PH_F_GRANT_TOKEN,
    PH_F_PROXY_PORT,
    PH_F_PASSTHROUGH,
    PH_F_PASS_NAME,
    PH_F_PASS_VALUE,
    PH_F_APPROVAL_HOLD,
    PH_F_ARGV,
    PH_F_TIMEOUT_SECONDS,
    PH_F_RUN_BUDGET_MS,
    PH_F_CWD,
    PH_F_STDIN,
    PH_F_STREAM_OUTPUT,
    PH_F_PATH,
    PH_F_MAX_BYTES,
    PH_F_MAX_ENTRIES,
    PH_F_CHUNK_BYTES,
    PH_F_DATA,
    PH_F_MODE,
    PH_F_NOW_SECONDS,
    PH_F_COUNT
} ph_wire_field_id;

typedef enum ph_wire_type {
    /* A string naming an object (the tenant, an id). Any other value, or
     * none, names no object: the lookup answers `not_found`, as for an id
     * that never existed (docs/execd.md section 2, "Scope"). */
    PH_WT_NAME,
    /* A string; any other value reads as absent. */
    PH_WT_TEXT,
    /* true; any other value reads as false. */
    PH_WT_FLAG,
    /* An integer within [min, max]; null reads as absent (the default). */
    PH_WT_INT,
    /* A byte string: "key" (text) or "key_base64", exactly one; sent as
     * text when the bytes are UTF-8. */
    PH_WT_BYTES,
    /* The same, always sent as base64 (stdin, file contents). */
    PH_WT_BINARY,
    /* An array of min..max elements, each a string or {"base64": ...},
     * none holding a NUL. */
    PH_WT_ARGV,
    /* An object whose members are sub (others are ignored); their values
     * are fields of their own in ph_wire_args. */
    PH_WT_OBJECT,
    /* An array of at most max objects whose members are sub; one element
     * at a time is built and read with ph_wire_item and
     * ph_wire_item_decode. */
    PH_WT_LIST,
} ph_wire_type;

#define PH_WF_REQUIRED 1u /* absent: refused (a NAME: not_found) */
#define PH_WF_NO_NUL 2u   /* BYTES: a NUL byte inside is refused */

typedef struct ph_wire_field ph_wire_field;
struct ph_wire_field {
    ph_wire_field_id id;
    const char *key;
    ph_wire_type type;
    unsigned flags;
    int64_t min, max; /* INT: the value; ARGV, LIST: the count (min 0: no minimum) */
    int64_t dflt;     /* INT: the value when absent */
    const char *msg;  /* message of the `invalid` refusal; NULL: the enclosing field's */
    const char *missing; /* of a required field that is absent; NULL: msg */
    const ph_wire_field *const *sub; /* OBJECT, LIST: the members, NULL-terminated */
};

typedef struct ph_wire_op {
    const char *name;
    /* What the NAME fields name: a request whose names find nothing is
     * `not_found` "no such <object>". NULL: the operation names none. */
    const char *object;
    const ph_wire_field *const *req;   /* NULL-terminated, in the order written */
    const ph_wire_field *const *reply; /* NULL-terminated; REQUIRED: always there */
} ph_wire_op;

extern const ph_wire_op ph_wire_ops[PH_OP_COUNT];

/* The operation called name. true and *id, or false when there is none. */
bool ph_wire_op_find(const char *name, ph_wire_op_id *id);

/* One field's value. Written by the client for ph_wire_request (nothing is
 * taken over); filled by ph_wire_decode, where data and argv are new (freed
 * by ph_wire_args_clear) and s and json point into the request. */
typedef struct ph_wire_value {
    bool present;
    int64_t i;                /* INT (the default when absent), FLAG */
    const char *s;            /* NAME, TEXT */
    const void *data;         /* BYTES, BINARY: NUL-terminated when decoded */
    size_t len;
    const char *const *argv;  /* ARGV: NULL-terminated */
    json_t *json;             /* LIST (OBJECT: the members hold the values) */
    uint8_t *owned_data;      /* what ph_wire_decode allocated behind data */
    char **owned_argv;        /* and behind argv */
} ph_wire_value;

typedef struct ph_wire_args {
    ph_wire_op_id op;
    ph_wire_value f[PH_F_COUNT];
} ph_wire_args;

#define PH_WV_STR(x) ((ph_wire_value){.present = (x) != NULL, .s = (x)})
#define PH_WV_INT(x) ((ph_wire_value){.present = true, .i = (int64_t)(x)})
#define PH_WV_BYTES(p, n) ((ph_wire_value){.present = true, .data = (p), .len = (n)})
#define PH_WV_JSON(j) ((ph_wire_value){.present = (j) != NULL, .json = (j)})

/* The request {"op": name, fields of a present in the row's order; an
 * object present holds its members present} (new reference), or NULL when
 * out of memory or a TEXT or NAME value is not UTF-8. */
json_t *ph_wire_request(ph_wire_op_id op, const ph_wire_args *a);

/* Checks req against the row of op and decodes it into *a (a->op = op;
 * absent fields not present, INT ones at their default). NULL, or the
 * message (static) of the `invalid` refusal of the first bad field in the
 * row's order; then *a holds nothing to free. Object lookups (NAME fields)
 * are the caller's. */
const char *ph_wire_decode(ph_wire_op_id op, const json_t *req, ph_wire_args *a);
void ph_wire_args_clear(ph_wire_args *a);

/* One element of the list field list from the members present in a (new
 * reference), or NULL when out of memory. */
json_t *ph_wire_item(ph_wire_field_id list, const ph_wire_args *a);
/* Decodes one element of the list field list (checked by ph_wire_decode
 * with its request) into the members of *a. NULL, or the refusal's
 * message; *a is cleared either way first. */
const char *ph_wire_item_decode(ph_wire_field_id list, const json_t *item, ph_wire_args *a);

/* Checks a successful reply to op against the row's reply fields: each
 * required one there, each one there of its type. NULL, or the key of the
 * first that is not. */
const char *ph_wire_reply_check(ph_wire_op_id op, const json_t *resp);

/* The `invalid` message of field id of op's row (its bad-value message).
 * NULL when the row has no such field. */
const char *ph_wire_field_msg(ph_wire_op_id op, ph_wire_field_id id);

#endif
