/* execd_wire.c - fuzzes the decoders of pinhole-execd's wire format
 * (sandbox/execd/wire.c) with what a peer can send: a frame body. Invariants:
 * a result that decodes re-encodes and decodes to the same result; an argv
 * that decodes re-encodes (ph_wire_arg) and decodes to the same strings; a
 * stat decodes or is refused, never half-filled into a crash;
 * the frame scan (ph_wire_frame_scan) counts exactly the values and
 * nesting of whatever jansson accepts, refusing it exactly when a cap is
 * over; and, for every row of the operation table, a request the daemon
 * accepts (ph_wire_decode) rebuilt by the client's builder
 * (ph_wire_request) is accepted again with the same values: the two sides
 * of the table agree. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "execd-int.h"

static void same_result(const ph_execution_result *a, const ph_execution_result *b)
{
    assert(a->exited == b->exited && a->exit_code == b->exit_code);
    assert(a->term_signal == b->term_signal && a->timed_out == b->timed_out);
    assert(a->timeout_ms == b->timeout_ms && a->timeout_bound == b->timeout_bound);
    assert(a->out.len == b->out.len && memcmp(a->out.data, b->out.data, a->out.len) == 0);
    assert(a->err.len == b->err.len && memcmp(a->err.data, b->err.data, a->err.len) == 0);
    assert(a->files_changed_count == b->files_changed_count);
    assert(a->files_changed_gaps == b->files_changed_gaps);
    for (size_t i = 0; i < a->files_changed_count; i++) {
        assert(strcmp(a->files_changed[i].path, b->files_changed[i].path) == 0);
        assert(a->files_changed[i].kind == b->files_changed[i].kind);
        assert(a->files_changed[i].size == b->files_changed[i].size);
    }
}

/* The values of v (object keys included) and its deepest nesting. */
static void cost_of(json_t *v, size_t level, ph_wire_cost *c)
{
    c->values++;
    if (json_is_object(v) || json_is_array(v))
        c->depth = level + 1 > c->depth ? level + 1 : c->depth;
    const char *key;
    json_t *m;
    size_t i;
    json_object_foreach(v, key, m) {
        (void)key;
        c->values++;
        cost_of(m, level + 1, c);
    }
    json_array_foreach(v, i, m)
        cost_of(m, level + 1, c);
}

static void check_scan(const uint8_t *data, size_t size)
{
    ph_wire_cost scanned, real = {0};
    size_t off = 0;
    bool within = ph_wire_frame_scan(data, size, &scanned, &off);
    if (!within && off >= size)
        abort();
    json_t *any =
        json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
    if (any == NULL)
        return;
    cost_of(any, 0, &real);
    json_decref(any);
    /* Checked whatever NDEBUG says: this is the bound the daemon relies on. */
    if (within != (real.values <= PH_WIRE_VALUES_MAX && real.depth <= PH_WIRE_DEPTH_MAX) ||
        (within && (scanned.values != real.values || scanned.depth != real.depth)))
        abort();
}

static void same_value(const ph_wire_field *f, const ph_wire_args *x, const ph_wire_args *y)
{
    const ph_wire_value *a = &x->f[f->id], *b = &y->f[f->id];
    if (a->present != b->present || a->i != b->i)
        abort();
    if ((a->s || b->s) && (!a->s || !b->s || strcmp(a->s, b->s) != 0))
        abort();
    if (a->len != b->len || (a->len && memcmp(a->data, b->data, a->len) != 0))
        abort();
    for (size_t i = 0; a->argv && (a->argv[i] || b->argv[i]); i++)
        if (!a->argv[i] || !b->argv[i] || strcmp(a->argv[i], b->argv[i]) != 0)
            abort();
    if ((a->json || b->json) && !json_equal(a->json, b->json))
        abort();
    for (const ph_wire_field *const *m = f->sub; f->type == PH_WT_OBJECT && *m; m++)
        same_value(*m, x, y);
}

static void check_table(const json_t *o)
{
    for (int op = 0; op < PH_OP_COUNT; op++) {
        ph_wire_args a, b;
        if (ph_wire_decode((ph_wire_op_id)op, o, &a) != NULL)
            continue;
        json_t *again = ph_wire_request((ph_wire_op_id)op, &a);
        if (again == NULL || ph_wire_decode((ph_wire_op_id)op, again, &b) != NULL)
            abort();
        for (const ph_wire_field *const *f = ph_wire_ops[op].req; *f; f++)
            same_value(*f, &a, &b);
        ph_wire_args_clear(&b);
        json_decref(again);
        ph_wire_args_clear(&a);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_scan(data, size);
    json_t *o = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return 0;
    }
    check_table(o);
    ph_execution_result *r = NULL;
    if (ph_wire_get_result(json_object_get(o, "result"), &r, NULL) == PH_OK) {
        json_t *again = ph_wire_result(r);
        assert(again != NULL);
        ph_execution_result *r2 = NULL;
        assert(ph_wire_get_result(again, &r2, NULL) == PH_OK);
        same_result(r, r2);
        ph_execution_result_free(&r2);
        json_decref(again);
        ph_execution_result_free(&r);
    }
    char **argv = NULL;
    if (ph_wire_argv(json_object_get(o, "argv"), &argv) == 0) {
        json_t *arr = json_array();
        for (size_t i = 0; argv[i]; i++)
            assert(json_array_append_new(arr, ph_wire_arg(argv[i])) == 0);
        char **back = NULL;
        assert(ph_wire_argv(arr, &back) == 0);
        for (size_t i = 0; argv[i]; i++)
            assert(back[i] != NULL && strcmp(argv[i], back[i]) == 0);
        ph_wire_argv_free(back);
        json_decref(arr);
        ph_wire_argv_free(argv);
    }
    ph_ws_stat st;
    (void)ph_wire_get_stat(json_object_get(o, "stat"), &st);
    uint8_t *bytes;
    size_t len;
    if (ph_wire_get_bytes(o, "path", "path_base64", &bytes, &len) == 0) {
        assert(bytes[len] == '\0');
        free(bytes);
    }
    json_decref(o);
    return 0;
}
