/* env_tiers.c - decision 3: the environment of a sandboxed command is built
 * from nothing, in three tiers, and never copied from the service.
 *
 *   tier 0  platform and provider credentials: never present. Names and
 *           values matching the rule of env_tier0.c are refused even when
 *           the operator lists them.
 *   tier 1  the operator's passthrough names (one per line in a file), values
 *           from the service's environment.
 *   tier 2  synthesized: PATH, HOME, TMPDIR, LANG, and the proxy variables
 *           carrying the grant when network was granted.
 *
 * A passthrough list that cannot be read or is malformed yields tier 2 alone
 * and a warning: never the parent environment, never a failed run. */
#include "sandbox-int.h"

#include "pinhole/hex.h"
#include "pinhole/io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PASSTHROUGH_MAX_BYTES 65536
#define PASSTHROUGH_MAX_NAMES 256
#define ENV_NAME_MAX 128
#define ENV_VALUE_MAX 32768
#define ENV_MAX_VARS 512

/* The service's own settings (docs/sandbox.md, "Operator settings"): read
 * from its environment by the library, never passed to a sandbox. */
static const char *const setting_names[] = {
    "PINHOLE_GVISOR_ROOTFS", "PINHOLE_FORWARDER",      "PINHOLE_RUNSC",
    "PINHOLE_RUNSC_DEBUG_LOG", "PINHOLE_DOCKER", "PINHOLE_SANDBOX_ID_RANGE",
};

bool ph_env_name_is_setting(const char *name)
{
    for (size_t i = 0; i < sizeof setting_names / sizeof setting_names[0]; i++)
        if (strcmp(name, setting_names[i]) == 0)
            return true;
    return false;
}

static const char *const synthesized_names[] = {
    "PATH", "HOME", "TMPDIR", "LANG", "PWD", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
    "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy",
};

bool ph_env_name_is_synthesized(const char *name)
{
    for (size_t i = 0; i < sizeof synthesized_names / sizeof synthesized_names[0]; i++)
        if (strcmp(name, synthesized_names[i]) == 0)
            return true;
    return false;
}

static bool valid_env_name(const char *s, size_t n)
{
    if (n == 0 || n > ENV_NAME_MAX || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_'))
            return false;
    }
    return true;
}

void ph_env_block_clear(ph_env_block *env)
{
    if (env == NULL)
        return;
    for (size_t i = 0; i < env->count; i++)
        free(env->vars[i]);
    free(env->vars);
    env->vars = NULL;
    env->count = 0;
}

static ssize_t find_var(const ph_env_block *env, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < env->count; i++)
        if (strncmp(env->vars[i], name, nl) == 0 && env->vars[i][nl] == '=')
            return (ssize_t)i;
    return -1;
}

const char *ph_env_get(const ph_env_block *env, const char *name)
{
    ssize_t i = find_var(env, name);
    return i < 0 ? NULL : env->vars[i] + strlen(name) + 1;
}

ph_status ph_env_set(ph_env_block *env, const char *name, const char *value)
{
    char *var = NULL;
    if (asprintf(&var, "%s=%s", name, value) < 0)
        return PH_E_NOMEM;
    ssize_t i = find_var(env, name);
    if (i >= 0) {
        free(env->vars[i]);
        env->vars[i] = var;
        return PH_OK;
    }
    if (env->count + 1 >= ENV_MAX_VARS) {
        free(var);
        return PH_E_LIMIT;
    }
    char **nv = realloc(env->vars, (env->count + 2) * sizeof *nv);
    if (nv == NULL) {
        free(var);
        return PH_E_NOMEM;
    }
    nv[env->count++] = var;
    nv[env->count] = NULL;
    env->vars = nv;
    return PH_OK;
}

static void warn(const ph_env_inputs *in, const char *event, const char *key, const char *detail)
{
    ph_sandbox_log_warning(in->log, in->log_ctx, event, key, detail);
}

/* Reads the passthrough file strictly. Returns the number of names parsed
 * into names[] (each NUL-terminated inside buf), or -1 when the file must be
 * ignored whole (a warning was logged). Blank lines and lines starting with
 * '#' are allowed; anything else that is not a valid name, a duplicate, a
 * missing final newline... makes the whole list malformed. */
static int read_passthrough(const ph_env_inputs *in, char *buf, size_t cap, char **names)
{
    /* ph_open_regular: a FIFO, a device or a directory named as the list
     * is never opened (opening one can act: unblock a FIFO's writer, rewind
     * a tape), and a file swapped in between the check and the open is
     * refused. Its diagnostic starts with the path, which stays out of the
     * warning. */
    int fd = -1;
    ph_diag d = {0};
    ph_status opened = ph_open_regular(in->passthrough_file, &fd, NULL, &d);
    if (opened != PH_OK) {
        size_t pl = strlen(in->passthrough_file);
        const char *why = strncmp(d.message, in->passthrough_file, pl) == 0
                              ? d.message + pl + strspn(d.message + pl, ": ")
                              : ph_strerror(opened);
        warn(in, "passthrough_unreadable", "error", why);
        return -1;
    }
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            close(fd);
            warn(in, "passthrough_unreadable", "error", strerror(errno));
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len == cap - 1) {
            close(fd);
            warn(in, "passthrough_malformed", "error", "file larger than 64 KiB");
            return -1;
        }
    }
    close(fd);
    buf[len] = '\0';
    int count = 0;
    size_t line_no = 0;
    char *p = buf;
    while (*p) {
        char *nl = strchr(p, '\n');
        line_no++;
        char detail[96];
        if (nl == NULL) {
            snprintf(detail, sizeof detail, "line %zu: no final newline", line_no);
            warn(in, "passthrough_malformed", "error", detail);
            return -1;
        }
        *nl = '\0';
        size_t n = (size_t)(nl - p);
        if (n > 0 && p[0] != '#') {
            if (memchr(p, '\0', n) != NULL || !valid_env_name(p, n)) {
                snprintf(detail, sizeof detail, "line %zu: not a variable name", line_no);
                warn(in, "passthrough_malformed", "error", detail);
                return -1;
            }
            for (int i = 0; i < count; i++) {
                if (strcmp(names[i], p) == 0) {
                    snprintf(detail, sizeof detail, "line %zu: duplicate name", line_no);
                    warn(in, "passthrough_malformed", "error", detail);
                    return -1;
                }
            }
            if (count == PASSTHROUGH_MAX_NAMES) {
                warn(in, "passthrough_malformed", "error", "more than 256 names");
                return -1;
            }
            names[count++] = p;
        }
        p = nl + 1;
    }
    return count;
}

/* Percent-encodes s outside RFC 3986 unreserved, for URL userinfo. */
static ph_status url_userinfo_escape(const char *s, char *out, size_t cap)
{
    return ph_percent_encode(s, strlen(s), NULL, out, cap) == PH_PERCENT_TOO_LONG ? PH_E_LIMIT
                                                                                  : PH_OK;
}

static ph_status add_tier2(const ph_env_inputs *in, ph_env_block *env)
{
    static const struct {
        const char *name, *value;
    } fixed[] = {
        {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
        {"HOME", PH_SANDBOX_WORKSPACE_PATH},
        {"TMPDIR", "/tmp"},
        {"LANG", "C.UTF-8"},
        {"PWD", PH_SANDBOX_WORKSPACE_PATH},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        ph_status st = ph_env_set(env, fixed[i].name, fixed[i].value);
        if (st != PH_OK)
            return st;
    }
    if (in->network == NULL || in->network->grant_token == NULL)
        return PH_OK;
    char user[3 * 128 + 1], token[3 * 2048 + 1], url[sizeof user + sizeof token + 64];
    if (url_userinfo_escape(in->lease, user, sizeof user) != PH_OK ||
        url_userinfo_escape(in->network->grant_token, token, sizeof token) != PH_OK)
        return PH_E_LIMIT;
    unsigned port = in->network->proxy_port ? in->network->proxy_port : 3128;
    snprintf(url, sizeof url, "http://%s:%s@127.0.0.1:%u", user, token, port);
    static const char *const proxy_vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy",
                                             "https_proxy", "ALL_PROXY", "all_proxy"};
    for (size_t i = 0; i < sizeof proxy_vars / sizeof proxy_vars[0]; i++) {
        ph_status st = ph_env_set(env, proxy_vars[i], url);
        if (st != PH_OK)
            return st;
    }
    /* Empty on purpose: every destination goes through the proxy, which is
     * the only way out of the sandbox anyway. */
    ph_status st = ph_env_set(env, "NO_PROXY", "");
    return st == PH_OK ? ph_env_set(env, "no_proxy", "") : st;
}

_Thread_local const ph_env_block *ph_env_tier1_supplied;

/* One tier-1 candidate: the refusals, then the variable. PH_OK when it was
 * added or refused (with a warning); another status only for memory. */
static ph_status add_tier1(const ph_env_inputs *in, ph_env_block *env, const char *name,
                           const char *value)
{
    if (ph_env_name_is_synthesized(name)) {
        warn(in, "passthrough_synthesized_refused", "name", name);
        return PH_OK;
    }
    if (ph_env_name_is_credential(name)) {
        warn(in, "passthrough_credential_refused", "name", name);
        return PH_OK;
    }
    if (value == NULL)
        return PH_OK; /* not set in the service: simply absent */
    if (ph_env_value_is_credential(name, value)) {
        warn(in, "passthrough_credential_value_refused", "name", name);
        return PH_OK;
    }
    if (strlen(value) > ENV_VALUE_MAX) {
        warn(in, "passthrough_value_too_long", "name", name);
        return PH_OK;
    }
    return ph_env_set(env, name, value);
}

/* Tier 1 handed over whole (ph_env_tier1_supplied): each "NAME=value"
 * through the same refusals as a name read from the passthrough list. */
static ph_status add_supplied_tier1(const ph_env_inputs *in, const ph_env_block *supplied,
                                    ph_env_block *env)
{
    ph_status st = PH_OK;
    for (size_t i = 0; st == PH_OK && i < supplied->count; i++) {
        const char *eq = strchr(supplied->vars[i], '=');
        size_t n = eq ? (size_t)(eq - supplied->vars[i]) : 0;
        char name[ENV_NAME_MAX + 1];
        if (n == 0 || n > ENV_NAME_MAX) {
            /* The entry may be a value alone ("=secret", no '=' at all):
             * the warning says only how long its name part is. */
            char len[24];
            snprintf(len, sizeof len, "%zu", eq ? n : strlen(supplied->vars[i]));
            warn(in, "passthrough_name_invalid", "name_bytes", len);
            continue;
        }
        if (!valid_env_name(supplied->vars[i], n)) {
            /* A name part, cut at its '=': named, as the list's names are. */
            char shown[ENV_NAME_MAX + 1];
            snprintf(shown, sizeof shown, "%.*s", (int)n, supplied->vars[i]);
            warn(in, "passthrough_name_invalid", "name", shown);
            continue;
        }
        memcpy(name, supplied->vars[i], n);
        name[n] = '\0';
        st = add_tier1(in, env, name, eq + 1);
    }
    return st;
}

ph_status ph_env_build(const ph_env_inputs *in, ph_env_block *out, ph_diag *diag)
{
    ph_env_block env = {0};
    ph_status st = PH_OK;
    if (ph_env_tier1_supplied != NULL) {
        st = add_supplied_tier1(in, ph_env_tier1_supplied, &env);
    } else if (in->passthrough_file != NULL && in->getenv_fn != NULL) {
        char *buf = malloc(PASSTHROUGH_MAX_BYTES + 1);
        char **names = calloc(PASSTHROUGH_MAX_NAMES, sizeof *names);
        int n = (buf && names) ? read_passthrough(in, buf, PASSTHROUGH_MAX_BYTES + 1, names) : -1;
        for (int i = 0; st == PH_OK && i < n; i++)
            st = add_tier1(in, &env, names[i], in->getenv_fn(names[i]));
        free(buf);
        free(names);
    }
    if (st == PH_OK)
        st = add_tier2(in, &env);
    if (st != PH_OK) {
        ph_env_block_clear(&env);
        return ph_diag_set(diag, st, 0, "building the environment: %s", ph_strerror(st));
    }
    *out = env;
    return PH_OK;
}
