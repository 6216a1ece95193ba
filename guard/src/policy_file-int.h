/* policy_file-int.h - reading a small policy file whole (the grant key file,
 * the revocation list): one routine, so each kind states only its limits. */
#ifndef PINHOLE_POLICY_FILE_INT_H
#define PINHOLE_POLICY_FILE_INT_H

#include <stddef.h>
#include <sys/types.h>

#include "pinhole/status.h"

/*
 * Opens path, refuses anything but a regular file (PH_E_INVAL), a mode with
 * any of the `forbidden` bits set (PH_E_INVAL; the message says `mode_why`
 * and the chmod that fixes it) and more than max bytes (PH_E_LIMIT, also
 * when the file grows while read), then reads it whole into *out (malloc'd,
 * len + 1 bytes, NUL-terminated; the caller frees it, wiping it first if
 * it holds secrets). PH_E_NOT_FOUND when path does not exist, PH_E_IO.
 * Every message starts with path.
 */
ph_status ph_policy_file_read(const char *path, size_t max, mode_t forbidden, const char *mode_why,
                              char **out, size_t *len, ph_diag *diag);

/* One line of a policy file: line[0..len) (no '\n'), its 1-based number
 * and the offset of its first byte in the text. */
typedef ph_status (*ph_policy_line_fn)(void *ctx, const char *line, size_t len, size_t lineno,
                                       size_t off, ph_diag *diag);

/* The line grammar the key file and the revocation list share: lines end
 * at '\n'; only printable ASCII (a tab, CR, control or non-ASCII byte is
 * PH_E_FORMAT with its line, column and offset); lines starting with '#'
 * and empty lines are skipped; every other line goes to fn, and the first
 * status that is not PH_OK stops the walk and is returned. */
ph_status ph_policy_lines(const char *text, size_t len, ph_policy_line_fn fn, void *ctx,
                          ph_diag *diag);

/* Parses text[0..len) into *out (what out points to is the kind's). */
typedef ph_status (*ph_policy_parse_fn)(const char *text, size_t len, void *out, ph_diag *diag);

/* ph_policy_file_read, then parse(text, len, out): the parser's message
 * prefixed with path. The text is wiped before it is freed (a key file's
 * secrets). */
ph_status ph_policy_file_load(const char *path, size_t max, mode_t forbidden, const char *mode_why,
                              ph_policy_parse_fn parse, void *out, ph_diag *diag);

#endif
