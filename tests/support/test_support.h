/* test_support.h - what every Pinhole unit test includes: cmocka (with the
 * headers cmocka 1.1.5 needs before it) and small helpers. */
#ifndef PINHOLE_TEST_SUPPORT_H
#define PINHOLE_TEST_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* Absolute path of a file under the source tree (tests/data/..., examples/...).
 * Returns a static buffer overwritten by the next call. */
const char *ph_test_source_path(const char *relative);

/* A fresh empty directory under $TMPDIR; the caller removes it with
 * ph_test_rmtree. Returns a malloc'd path. */
char *ph_test_mkdtemp(void);
void ph_test_rmtree(const char *path);

/* A cmocka group fixture: ph_test_dir is a fresh scratch directory while the
 * group's tests run, removed with everything in it afterwards. */
extern char *ph_test_dir;
int ph_test_dir_setup(void **state);
int ph_test_dir_teardown(void **state);

/* Reads a whole file into a malloc'd NUL-terminated buffer; *len gets its size. */
char *ph_test_read_file(const char *path, size_t *len);
/* Writes len bytes to path (truncating). Returns 0 or -1. */
int ph_test_write_file(const char *path, const void *data, size_t len);
/* Runs cmd with /bin/sh; its stdout (at most 64 KiB) goes to a malloc'd
 * NUL-terminated *out (freed here when out is NULL). Returns its exit status,
 * or -1 when it did not exit normally or could not start. */
int ph_test_capture(const char *cmd, char **out);

#endif
