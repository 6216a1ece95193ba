/* policy_file.c - a small policy file read whole (policy_file-int.h). */
#include "policy_file-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pinhole/diag.h"
#include "pinhole/grant.h"
#include "pinhole/io.h"

ph_status ph_policy_file_read(const char *path, size_t max, mode_t forbidden, const char *mode_why,
                              char **out, size_t *len, ph_diag *diag)
{
    *out = NULL;
    *len = 0;
    /* A FIFO, a device or a directory is refused without waiting on it. */
    int fd;
    struct stat sb;
    ph_status st = ph_open_regular(path, &fd, &sb, diag);
    if (st != PH_OK)
        return st;
    char *buf = NULL;
    size_t cap = 0, got = 0;
    /* Refuse rather than warn: a warning in a log nobody reads protects
     * nothing. */
    if ((sb.st_mode & forbidden) != 0) {
        st = ph_diag_set(diag, PH_E_INVAL, 0, "%s: mode %04o %s; run chmod %o on it", path,
                         (unsigned)(sb.st_mode & 07777), mode_why,
                         (unsigned)(sb.st_mode & 07777 & ~forbidden));
        goto out;
    }
    if ((uint64_t)sb.st_size > max) {
        st = ph_diag_set(diag, PH_E_LIMIT, 0, "%s: over %zu bytes", path, max);
        goto out;
    }
    /* Sized by fstat, one byte more to see a file that grew meanwhile. */
    cap = (size_t)sb.st_size + 1;
    buf = malloc(cap + 1);
    if (buf == NULL) {
        st = ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
        goto out;
    }
    for (;;) {
        ssize_t n = read(fd, buf + got, cap - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            st = ph_diag_set(diag, PH_E_IO, 0, "%s: %s", path, strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        got += (size_t)n;
        if (got == cap) {
            st = ph_diag_set(diag, PH_E_IO, 0, "%s: changed while read (replace it atomically)",
                             path);
            goto out;
        }
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    buf = NULL;
out:
    ph_secret_free(buf, cap + 1); /* a key file's partial secrets */
    close(fd);
    return st;
}

ph_status ph_policy_file_load(const char *path, size_t max, mode_t forbidden, const char *mode_why,
                              ph_policy_parse_fn parse, void *out, ph_diag *diag)
{
    char *buf;
    size_t len;
    ph_status st = ph_policy_file_read(path, max, forbidden, mode_why, &buf, &len, diag);
    if (st != PH_OK)
        return st;
    st = parse(buf, len, out, diag);
    if (st != PH_OK && diag != NULL) {
        char msg[PH_DIAG_MESSAGE_MAX];
        memcpy(msg, diag->message, sizeof msg);
        ph_diag_set(diag, st, diag->offset, "%s: %s", path, msg);
    }
    ph_secret_free(buf, len + 1);
    return st;
}

ph_status ph_policy_lines(const char *text, size_t len, ph_policy_line_fn fn, void *ctx,
                          ph_diag *diag)
{
    size_t pos = 0, lineno = 0;
    while (pos < len) {
        lineno++;
        const char *line = text + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t linelen = nl != NULL ? (size_t)(nl - line) : len - pos;
        for (size_t i = 0; i < linelen; i++) {
            unsigned char c = (unsigned char)line[i];
            if (c < 0x20 || c > 0x7e)
                return ph_diag_set(diag, PH_E_FORMAT, pos + i,
                                   "line %zu column %zu: control or non-ASCII byte 0x%02x "
                                   "(tabs and CR are not allowed either)",
                                   lineno, i + 1, c);
        }
        if (linelen > 0 && line[0] != '#') {
            ph_status st = fn(ctx, line, linelen, lineno, pos, diag);
            if (st != PH_OK)
                return st;
        }
        pos += linelen + (nl != NULL ? 1 : 0);
    }
    return PH_OK;
}
