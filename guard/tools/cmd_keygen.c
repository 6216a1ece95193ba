/* cmd_keygen.c - pinhole-guard keygen: a fresh grant key as a key-file line,
 * printed, written to a new file, or put in front of an existing key file
 * (rotation: the new key signs, the old ones still verify). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "pinhole/file_atomic.h"
#include "pinhole/grant.h"
#include "tools.h"

#define KEY_FILE_MAX (16 * 1024)

static void keygen_usage(FILE *out)
{
    fputs("Usage: pinhole-guard keygen [--kid KID] [--bytes N] [--output FILE | --rotate FILE]\n"
          "Generates a grant key from the OpenSSL CSPRNG as one key-file line\n"
          "\"<kid> <hex>\" (docs/grants.md).\n"
          "  -i, --kid KID      key id, 1..32 of [A-Za-z0-9_-] (default: kYYYYMMDDhhmmss, UTC)\n"
          "  -b, --bytes N      key length, 32..64 (default 32)\n"
          "  -o, --output FILE  create FILE (mode 0600; refuses to overwrite)\n"
          "  -r, --rotate FILE  put the new key first in the existing key file FILE,\n"
          "                     atomically; the old keys keep verifying until removed\n"
          "  -h, --help         this text\n"
          "Exit status: 0 done, 2 usage error or unusable file.\n",
          out);
}

/* Reads the whole existing key file (already validated by the keyring). */
static char *read_small(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *buf = malloc(KEY_FILE_MAX + 1);
    size_t n = 0;
    ssize_t r = 0;
    while (buf != NULL && n <= KEY_FILE_MAX &&
           ((r = read(fd, buf + n, KEY_FILE_MAX + 1 - n)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0)
            n += (size_t)r;
    close(fd);
    if (buf == NULL || r < 0 || n > KEY_FILE_MAX) {
        ph_secret_free(buf, n); /* what was read of the keys */
        return NULL;
    }
    *len = n;
    return buf;
}

/* New line first, then the old file, published atomically (mode 0600). */
static int rotate(const char *path, const char *line)
{
    ph_keyring *kr = NULL;
    ph_diag d;
    if (ph_keyring_load_file(path, &kr, &d) != PH_OK) {
        pg_error("%s", d.message);
        return EXIT_USAGE;
    }
    ph_keyring_free(&kr);
    size_t oldlen = 0;
    char *old = read_small(path, &oldlen);
    if (old == NULL) {
        pg_error("%s: cannot read it back", path);
        return EXIT_USAGE;
    }
    size_t linelen = strlen(line), cap = linelen + oldlen + 1, n = 0;
    char *joined = malloc(cap);
    int rc = EXIT_USAGE;
    if (joined == NULL) {
        pg_error("out of memory");
        goto out;
    }
    memcpy(joined, line, linelen);
    memcpy(joined + linelen, old, oldlen);
    n = linelen + oldlen;
    if (oldlen > 0 && old[oldlen - 1] != '\n')
        joined[n++] = '\n';
    if (ph_file_write_atomic(path, joined, n, 0600, PH_WRITE_REPLACE, &d) != PH_OK) {
        pg_error("%s", d.message);
        goto out;
    }
    rc = EXIT_ALLOWED;
out:
    ph_secret_free(joined, cap);
    ph_secret_free(old, oldlen);
    return rc;
}

int pg_cmd_keygen(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"kid", required_argument, NULL, 'i'},    {"bytes", required_argument, NULL, 'b'},
        {"output", required_argument, NULL, 'o'}, {"rotate", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    char kid[PH_GRANT_KID_MAX + 1] = "";
    unsigned long long bytes = 32;
    const char *output = NULL, *rotate_path = NULL;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "i:b:o:r:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'i':
            if (strlen(optarg) > PH_GRANT_KID_MAX) {
                pg_error("--kid is at most %d characters", PH_GRANT_KID_MAX);
                return EXIT_USAGE;
            }
            snprintf(kid, sizeof kid, "%s", optarg);
            break;
        case 'b':
            if (!pg_parse_uint(optarg, PH_GRANT_KEY_MIN, PH_GRANT_KEY_MAX, &bytes)) {
                pg_error("--bytes is %d..%d", PH_GRANT_KEY_MIN, PH_GRANT_KEY_MAX);
                return EXIT_USAGE;
            }
            break;
        case 'o': output = optarg; break;
        case 'r': rotate_path = optarg; break;
        case 'h': keygen_usage(stdout); return EXIT_ALLOWED;
        default: keygen_usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind != argc || (output != NULL && rotate_path != NULL)) {
        keygen_usage(stderr);
        return EXIT_USAGE;
    }
    if (kid[0] == '\0') {
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(kid, sizeof kid, "k%Y%m%d%H%M%S", &tm);
    }
    uint8_t key[PH_GRANT_KEY_MAX];
    char line[PH_GRANT_KID_MAX + 2 * PH_GRANT_KEY_MAX + 3];
    ph_diag d;
    if (ph_grant_keygen(key, (size_t)bytes, &d) != PH_OK ||
        ph_grant_format_key_line(kid, key, (size_t)bytes, line, sizeof line, &d) != PH_OK) {
        OPENSSL_cleanse(key, sizeof key);
        pg_error("%s", d.message);
        return EXIT_USAGE;
    }
    OPENSSL_cleanse(key, sizeof key);
    int rc = EXIT_ALLOWED;
    if (rotate_path != NULL) {
        rc = rotate(rotate_path, line);
    } else if (output != NULL) {
        /* Never overwrites an existing key file; never leaves a partial one. */
        if (ph_file_write_atomic(output, line, strlen(line), 0600, PH_WRITE_NO_REPLACE, &d) !=
            PH_OK) {
            pg_error("%s", d.message);
            rc = EXIT_USAGE;
        }
    } else {
        fputs(line, stdout);
    }
    OPENSSL_cleanse(line, sizeof line);
    return rc;
}
