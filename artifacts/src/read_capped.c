/* read_capped.c - one bounded whole-file read for the metadata documents of
 * the filesystem backend and the S3 backend's configuration files. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinhole/diag.h"
#include "read_capped-int.h"

ph_status ph_art_read_capped(int fd, size_t cap, const char *what, char **out, size_t *len,
                             ph_diag *diag)
{
    *out = NULL;
    *len = 0;
    char *buf = malloc(cap + 2);
    if (buf == NULL)
        return ph_diag_set(diag, PH_E_NOMEM, 0, "out of memory");
    size_t n = 0;
    ph_status st = PH_OK;
    /* One byte past the cap tells "exactly cap" from "more". */
    while (st == PH_OK && n <= cap) {
        ssize_t r = read(fd, buf + n, cap + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            st = ph_diag_set(diag, PH_E_IO, 0, "%s: %s", what, strerror(errno));
        else if (r == 0)
            break;
        else
            n += (size_t)r;
    }
    if (st == PH_OK && n > cap)
        st = ph_diag_set(diag, PH_E_LIMIT, 0, "%s: larger than %zu bytes", what, cap);
    if (st != PH_OK) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return PH_OK;
}
