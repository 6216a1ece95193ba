/* s3_config.c - the S3 backend's configuration file: `name = value` lines,
 * `#` comments, every name known, every value checked, the first error
 * reported with its line. Secrets never come from this file: they come from
 * a separate credentials file that must be a regular file of ours with no
 * group or other permission bits, or from the worker's environment. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "pinhole/diag.h"
#include "read_capped-int.h"
#include "s3-int.h"

#define CONFIG_MAX (64 * 1024)

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* Reads a small file whole, refusing more than CONFIG_MAX bytes. With
 * secret set, the file must be a regular file owned by us, mode 0600 or
 * stricter. */
static ph_status read_small(const char *path, bool secret, char **out, ph_diag *diag)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return ph_diag_set(diag, PH_E_IO, 0, "s3 config: %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return ph_diag_set(diag, PH_E_INVAL, 0, "s3 config: %s: not a regular file", path);
    }
    if (secret && ((sb.st_mode & 077) != 0 || sb.st_uid != geteuid())) {
        close(fd);
        return ph_diag_set(diag, PH_E_DENIED, 0,
                           "s3 config: %s: credentials file must be ours and mode 0600", path);
    }
    char *buf = NULL;
    size_t n = 0;
    ph_status st = ph_art_read_capped(fd, CONFIG_MAX, path, &buf, &n, diag);
    close(fd);
    if (st == PH_OK && memchr(buf, '\0', n) != NULL) {
        free(buf);
        st = ph_diag_set(diag, PH_E_FORMAT, 0, "s3 config: %s: NUL byte", path);
    }
    if (st == PH_OK)
        *out = buf;
    return st;
}

static bool copy_into(char *dst, size_t cap, const char *v)
{
    size_t n = strlen(v);
    if (n >= cap)
        return false;
    memcpy(dst, v, n + 1);
    return true;
}

static bool parse_u64(const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
    if (*v < '0' || *v > '9')
        return false;
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno != 0 || *end != '\0' || x < min || x > max)
        return false;
    *out = x;
    return true;
}

static bool parse_bool(const char *v, bool *out)
{
    if (strcmp(v, "true") == 0 || strcmp(v, "yes") == 0) {
        *out = true;
        return true;
    }
    if (strcmp(v, "false") == 0 || strcmp(v, "no") == 0) {
        *out = false;
        return true;
    }
    return false;
}

/* Bucket names as S3 allows them for virtual-host addressing: 3-63 of
 * [a-z0-9.-], starting and ending alphanumeric. */
static bool valid_bucket(const char *b)
{
    size_t n = strlen(b);
    if (n < 3 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && c != '.' && c != '-')
            return false;
        if ((i == 0 || i == n - 1) && !alnum)
            return false;
    }
    return true;
}

/* The prefix: segments of [A-Za-z0-9._-] joined by '/', no leading,
 * trailing or double '/'. */
static bool valid_prefix(const char *p)
{
    size_t n = strlen(p);
    if (n == 0 || p[0] == '/' || p[n - 1] == '/')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-' || (c == '/' && p[i + 1] != '/');
        if (!ok)
            return false;
    }
    return strstr(p, "..") == NULL;
}

static ph_status parse_endpoint(ph_s3_config *c, const char *v, ph_diag *diag, int line)
{
    const char *h;
    if (strncmp(v, "https://", 8) == 0) {
        c->https = true;
        h = v + 8;
    } else if (strncmp(v, "http://", 7) == 0) {
        c->https = false;
        h = v + 7;
    } else {
        return ph_diag_set(diag, PH_E_INVAL, 0, "s3 config: line %d: endpoint wants http(s)://",
                           line);
    }
    size_t n = strlen(h);
    while (n > 0 && h[n - 1] == '/')
        n--;
    if (n == 0 || n >= sizeof c->host)
        return ph_diag_set(diag, PH_E_INVAL, 0, "s3 config: line %d: bad endpoint host", line);
    for (size_t i = 0; i < n; i++) {
        char ch = h[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                  ch == '.' || ch == '-' || ch == ':' || ch == '[' || ch == ']';
        if (!ok)
            return ph_diag_set(diag, PH_E_INVAL, 0,
                               "s3 config: line %d: endpoint has a path, user or bad byte", line);
    }
    memcpy(c->host, h, n);
    c->host[n] = '\0';
    snprintf(c->endpoint, sizeof c->endpoint, "%s://%s", c->https ? "https" : "http", c->host);
    return PH_OK;
}

static ph_status load_credentials(ph_s3_config *c, const char *path, ph_diag *diag)
{
    char *text = NULL;
    ph_status st = read_small(path, true, &text, diag);
    if (st != PH_OK)
        return st;
    int line = 0;
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l && st == PH_OK; l = strtok_r(NULL, "\n", &save)) {
        line++;
        char *s = trim(l);
        if (*s == '\0' || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (eq == NULL) {
            st = ph_diag_set(diag, PH_E_FORMAT, 0, "s3 credentials: line %d: wants name = value",
                             line);
            break;
        }
        *eq = '\0';
        char *name = trim(s), *val = trim(eq + 1);
        bool ok = false;
        if (strcmp(name, "access_key") == 0)
            ok = copy_into(c->access_key, sizeof c->access_key, val);
        else if (strcmp(name, "secret_key") == 0)
            ok = copy_into(c->secret_key, sizeof c->secret_key, val);
        if (!ok)
            st = ph_diag_set(diag, PH_E_FORMAT, 0, "s3 credentials: line %d: unknown or bad %s",
                             line, name);
    }
    OPENSSL_cleanse(text, strlen(text));
    free(text);
    return st;
}

ph_status ph_s3_config_load(const char *path, ph_s3_config *c, ph_diag *diag)
{
    memset(c, 0, sizeof *c);
    snprintf(c->region, sizeof c->region, "us-east-1");
    snprintf(c->prefix, sizeof c->prefix, "artifacts");
    c->connect_timeout_ms = 5000;
    c->request_timeout_ms = 120000;
    c->retries = 5;
    c->retry_base_ms = 100;
    c->multipart_threshold = (uint64_t)16 << 20;
    c->part_size = (uint64_t)8 << 20;
    c->staging_grace_seconds = 24 * 3600;
    char *text = NULL;
    ph_status st = read_small(path, false, &text, diag);
    if (st != PH_OK)
        return st;
    char creds[512] = "";
    int line = 0;
    char *save = NULL;
    const char *l = text;
    while (st == PH_OK && l && *l) {
        const char *nl = strchr(l, '\n');
        size_t ll = nl ? (size_t)(nl - l) : strlen(l);
        char buf[1024];
        line++;
        if (ll >= sizeof buf) {
            st = ph_diag_set(diag, PH_E_LIMIT, 0, "s3 config: line %d: too long", line);
            break;
        }
        memcpy(buf, l, ll);
        buf[ll] = '\0';
        l = nl ? nl + 1 : NULL;
        char *s = trim(buf);
        if (*s == '\0' || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (eq == NULL) {
            st = ph_diag_set(diag, PH_E_FORMAT, 0, "s3 config: line %d: wants name = value", line);
            break;
        }
        *eq = '\0';
        char *name = trim(s), *v = trim(eq + 1);
        bool ok = true;
        uint64_t u = 0;
        if (strcmp(name, "endpoint") == 0) {
            st = parse_endpoint(c, v, diag, line);
            continue;
        } else if (strcmp(name, "region") == 0) {
            ok = copy_into(c->region, sizeof c->region, v) && *v;
        } else if (strcmp(name, "bucket") == 0) {
            ok = copy_into(c->bucket, sizeof c->bucket, v) && valid_bucket(v);
        } else if (strcmp(name, "prefix") == 0) {
            ok = copy_into(c->prefix, sizeof c->prefix, v) && valid_prefix(v);
        } else if (strcmp(name, "addressing") == 0) {
            ok = strcmp(v, "path") == 0 || strcmp(v, "virtual-host") == 0;
            c->virtual_host = strcmp(v, "virtual-host") == 0;
        } else if (strcmp(name, "allow_http") == 0) {
            ok = parse_bool(v, &c->allow_http);
        } else if (strcmp(name, "create_bucket") == 0) {
            ok = parse_bool(v, &c->create_bucket);
        } else if (strcmp(name, "credentials_file") == 0) {
            ok = copy_into(creds, sizeof creds, v) && *v;
        } else if (strcmp(name, "ca_file") == 0) {
            ok = copy_into(c->ca_file, sizeof c->ca_file, v);
        } else if (strcmp(name, "connect_timeout_ms") == 0) {
            ok = parse_u64(v, 1, 600000, &u);
            c->connect_timeout_ms = (long)u;
        } else if (strcmp(name, "request_timeout_ms") == 0) {
            ok = parse_u64(v, 1, 3600000, &u);
            c->request_timeout_ms = (long)u;
        } else if (strcmp(name, "retries") == 0) {
            ok = parse_u64(v, 0, 20, &u);
            c->retries = (int)u;
        } else if (strcmp(name, "retry_base_ms") == 0) {
            ok = parse_u64(v, 1, 60000, &u);
            c->retry_base_ms = (long)u;
        } else if (strcmp(name, "multipart_threshold") == 0) {
            ok = parse_u64(v, 1, (uint64_t)5 << 30, &c->multipart_threshold);
        } else if (strcmp(name, "part_size") == 0) {
            ok = parse_u64(v, PH_S3_MIN_PART, (uint64_t)5 << 30, &c->part_size);
        } else if (strcmp(name, "sign_content") == 0) {
            ok = strcmp(v, "auto") == 0 || strcmp(v, "always") == 0 || strcmp(v, "never") == 0;
            c->sign_content = strcmp(v, "always") == 0  ? PH_S3_SIGN_ALWAYS
                              : strcmp(v, "never") == 0 ? PH_S3_SIGN_NEVER
                                                        : PH_S3_SIGN_AUTO;
        } else if (strcmp(name, "staging_grace_seconds") == 0) {
            ok = parse_u64(v, 0, (uint64_t)365 * 86400, &u);
            c->staging_grace_seconds = (int64_t)u;
        } else {
            st = ph_diag_set(diag, PH_E_FORMAT, 0, "s3 config: line %d: unknown setting %s", line,
                             name);
            break;
        }
        if (!ok)
            st = ph_diag_set(diag, PH_E_INVAL, 0, "s3 config: line %d: bad value for %s", line,
                             name);
    }
    (void)save;
    free(text);
    if (st != PH_OK)
        return st;
    if (c->host[0] == '\0' || c->bucket[0] == '\0')
        return ph_diag_set(diag, PH_E_INVAL, 0, "s3 config: endpoint and bucket are required");
    if (!c->https && !c->allow_http)
        return ph_diag_set(diag, PH_E_DENIED, 0,
                           "s3 config: plain http endpoint refused (allow_http = true to permit)");
    if (c->virtual_host && strchr(c->bucket, '.') && c->https)
        return ph_diag_set(diag, PH_E_INVAL, 0,
                           "s3 config: a dotted bucket cannot be virtual-host over TLS");
    if (creds[0]) {
        st = load_credentials(c, creds, diag);
    } else {
        const char *a = getenv("PINHOLE_S3_ACCESS_KEY"), *s = getenv("PINHOLE_S3_SECRET_KEY");
        if (a && s && !(copy_into(c->access_key, sizeof c->access_key, a) &&
                        copy_into(c->secret_key, sizeof c->secret_key, s)))
            st = ph_diag_set(diag, PH_E_INVAL, 0, "s3 config: credentials too long");
    }
    if (st == PH_OK && (c->access_key[0] == '\0' || c->secret_key[0] == '\0'))
        st = ph_diag_set(diag, PH_E_INVAL, 0,
                         "s3 config: no credentials (credentials_file, or PINHOLE_S3_ACCESS_KEY "
                         "and PINHOLE_S3_SECRET_KEY)");
    if (st != PH_OK)
        OPENSSL_cleanse(c, sizeof *c);
    return st;
}
