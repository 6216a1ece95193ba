/* env_tier0.c - tier 0 of decision 3: the names and values that are never
 * passed into a sandbox, whatever the operator's passthrough list says.
 *
 * The environment is built, not filtered (env_tiers.c), so this is the
 * second line: it stops the usual copy-paste mistakes of an operator who
 * lists a credential. It errs towards refusing; a refusal is a warning
 * naming the variable (never its value), not a failure.
 *
 * The whole rule is the table below, in one place; docs/sandbox.md lists
 * it and tests/sandbox/gate_sandbox_env_tiers.c holds a table of names and
 * values, refused and allowed, run against it.
 *
 * Names are compared ASCII case-insensitively. A name is also read as words:
 * split at '_', '-', '.', ' ' and where a lower-case letter meets an upper
 * one (camelCase), trailing digits dropped ("DB_PW2" has the words DB, PW).
 * Word rules catch a credential word wherever it sits in a name (LDAP_BIND_PW,
 * HTTP_AUTHORIZATION) without catching ordinary names that merely contain
 * its letters (KEYBOARD, MONKEY, GIT_AUTHOR_NAME). A QUALIFIER row makes a
 * word run together from it and a WORD row's text a credential word too
 * (MASTERKEY, DBPW) without making every word that ends in KEY one (TURKEY).
 *
 * A value is refused when it holds
 *   - a URL whose userinfo has a secret (scheme://user:secret@), or any
 *     userinfo when the variable's name has a word of a USERINFO row
 *     (FTP_PROXY=http://user@proxy);
 *   - a key=value pair whose key is a credential word of a KEY row: a JDBC
 *     query (?user=app&password=x), a libpq DSN (password=x), an ADO or ODBC
 *     string (Password=x; PWD=x), an Azure string (AccountKey=x), a signed
 *     URL (X-Amz-Credential=, sig=); an empty value does not count;
 *   - a PEM private key block (-----BEGIN ... PRIVATE KEY-----, any blanks);
 *   - a token of a known issuer: a TOKEN_PREFIX row's text (case-sensitive)
 *     at the start of the value or after a character that is not a letter
 *     or digit, followed by at least `min` characters of [A-Za-z0-9_-];
 *   - a key: value field (JSON, YAML, a header) whose key is a credential
 *     word of a KEY row, read as key=value pairs are;
 *   - a bearer credential (Bearer <token>) or a JWT;
 *   - an Oracle connect string with a password (user/secret@//host);
 *   - a webhook URL of a WEBHOOK row (the URL is the credential). */
#include "sandbox-int.h"

#include "pinhole/ascii.h"

#include <stdio.h>
#include <string.h>

enum tier0_kind {
    NAME_EXACT,    /* the whole name */
    NAME_PREFIX,   /* the name starts with the text */
    NAME_CONTAINS, /* the text anywhere in the name */
    WORD,          /* a word of the name (or key) is the text */
    WORD_PREFIX,   /* a word starts with the text */
    WORD_EXEMPT,   /* a word WORD_PREFIX rows never count (AUTHOR is not AUTH...) */
    QUALIFIER,     /* a word that is the text and then a WORD row's text is
                      a credential word too (MASTERKEY, DBPW) */
    TOKEN_PREFIX,  /* in a value: a token of a known issuer (see above) */
    WEBHOOK,       /* in a value: a webhook URL's host and path (see above) */
    NAME_ORDINARY, /* a whole name no other row refuses: a login session's
                      variables (SESSION is a credential word), which carry
                      no secret and are in the environment of any daemon
                      started from a desktop terminal, or a shell's
                      bookkeeping: PWD is no MYSQL_PWD */
};

/* Where a row applies: to variable names, to keys of key=value pairs inside
 * values, or to names whose values may carry no userinfo at all. */
#define IN_NAME 1u
#define IN_KEY 2u
#define USERINFO 4u

static const struct tier0_row {
    enum tier0_kind kind;
    const char *text;
    unsigned where;
    unsigned min; /* TOKEN_PREFIX: characters after the prefix */
} tier0[] = {
    /* Passwords: PASS also catches PASSWORD, PASSWD, PASSPHRASE, DB_PASS,
     * PGPASSFILE; PWD catches MYSQL_PWD. */
    {NAME_CONTAINS, "PASS", IN_NAME, 0},
    {WORD_PREFIX, "PASS", IN_KEY, 0},
    {NAME_CONTAINS, "PWD", IN_NAME, 0},
    {WORD, "PWD", IN_KEY, 0},
    {WORD, "PW", IN_NAME | IN_KEY, 0},
    {NAME_CONTAINS, "SECRET", IN_NAME, 0},
    {WORD_PREFIX, "SECRET", IN_KEY, 0},
    {NAME_CONTAINS, "TOKEN", IN_NAME, 0},
    {WORD_PREFIX, "TOKEN", IN_KEY, 0},
    {NAME_CONTAINS, "CREDENTIAL", IN_NAME, 0},
    {WORD_PREFIX, "CRED", IN_NAME | IN_KEY, 0},
    {NAME_CONTAINS, "PRIVATE_KEY", IN_NAME, 0},
    {NAME_CONTAINS, "API_KEY", IN_NAME, 0},
    {NAME_CONTAINS, "APIKEY", IN_NAME | IN_KEY, 0},
    {NAME_CONTAINS, "ACCESS_KEY", IN_NAME, 0},
    {NAME_CONTAINS, "WEBHOOK", IN_NAME, 0},
    {NAME_CONTAINS, "JWT", IN_NAME, 0},
    {WORD, "KEY", IN_NAME | IN_KEY, 0},
    {WORD, "KEYS", IN_NAME | IN_KEY, 0},
    {WORD, "KEYFILE", IN_NAME, 0},
    {WORD, "KEYTAB", IN_NAME, 0},
    {WORD, "KEYRING", IN_NAME, 0},
    {WORD, "KEYSTORE", IN_NAME, 0},
    {WORD, "KEYCHAIN", IN_NAME, 0},
    {WORD, "PRIVKEY", IN_NAME, 0},
    {WORD, "PSK", IN_NAME | IN_KEY, 0},
    /* Run together with a credential word (MASTERKEY, DBPW, SSHKEY): only
     * these qualifiers, so KEYBOARD, MONKEY, TURKEY and HOTKEY stay words. */
    {QUALIFIER, "DB", IN_NAME | IN_KEY, 0},
    {QUALIFIER, "ROOT", IN_NAME | IN_KEY, 0},
    {QUALIFIER, "ADMIN", IN_NAME | IN_KEY, 0},
    {QUALIFIER, "USER", IN_NAME | IN_KEY, 0},
    {QUALIFIER, "MASTER", IN_NAME | IN_KEY, 0},
    {QUALIFIER, "SIGNING", IN_NAME | IN_KEY, 0},
    {QUALIFIER, "SSH", IN_NAME | IN_KEY, 0},
    {QUALIFIER, "DEPLOY", IN_NAME | IN_KEY, 0},
    {QUALIFIER, "ENCRYPTION", IN_NAME | IN_KEY, 0},
    {QUALIFIER, "ACCESS", IN_NAME | IN_KEY, 0},
    {QUALIFIER, "CLIENT", IN_NAME | IN_KEY, 0},
    {QUALIFIER, "SHARED", IN_NAME | IN_KEY, 0},
    {QUALIFIER, "HMAC", IN_NAME | IN_KEY, 0},
    {QUALIFIER, "LICENSE", IN_NAME | IN_KEY, 0},
    /* Headers and sessions. */
    {WORD_PREFIX, "AUTH", IN_NAME, 0},
    {WORD_PREFIX, "OAUTH", IN_NAME, 0},
    {WORD_EXEMPT, "AUTHOR", 0, 0},
    {WORD_EXEMPT, "AUTHORS", 0, 0},
    {WORD_EXEMPT, "AUTHORITY", 0, 0},
    {WORD, "BEARER", IN_NAME | IN_KEY, 0},
    {WORD_PREFIX, "COOKIE", IN_NAME, 0},
    {WORD_PREFIX, "SESSION", IN_NAME | IN_KEY, 0},
    {WORD, "AUTHORIZATION", IN_KEY, 0},
    {WORD, "SIG", IN_KEY, 0},
    {WORD, "SIGNATURE", IN_KEY, 0},
    {WORD, "OTP", IN_NAME, 0},
    {WORD, "TOTP", IN_NAME, 0},
    /* Short credential words: STRIPE_SK, SLACK_HOOK, GH_PAT, SENTRY_DSN. */
    {WORD, "SK", IN_NAME, 0},
    {WORD, "HOOK", IN_NAME, 0},
    {WORD, "PAT", IN_NAME, 0},
    {WORD, "DSN", IN_NAME | USERINFO, 0},
    {WORD, "URL", USERINFO, 0},
    {WORD, "URI", USERINFO, 0},
    {WORD, "PROXY", USERINFO, 0},
    /* Providers and tools whose variables are credentials or reach one. */
    {NAME_PREFIX, "AWS_", IN_NAME, 0},
    {NAME_PREFIX, "AMAZON_", IN_NAME, 0},
    {NAME_PREFIX, "GOOGLE_", IN_NAME, 0},
    {NAME_PREFIX, "GCP_", IN_NAME, 0},
    {NAME_PREFIX, "GCLOUD_", IN_NAME, 0},
    {NAME_PREFIX, "CLOUDSDK_", IN_NAME, 0},
    {NAME_PREFIX, "AZURE_", IN_NAME, 0},
    {NAME_PREFIX, "ARM_", IN_NAME, 0},
    {NAME_PREFIX, "OPENAI_", IN_NAME, 0},
    {NAME_PREFIX, "ANTHROPIC_", IN_NAME, 0},
    {NAME_PREFIX, "CLAUDE_", IN_NAME, 0},
    {NAME_PREFIX, "GEMINI_", IN_NAME, 0},
    {NAME_PREFIX, "MISTRAL_", IN_NAME, 0},
    {NAME_PREFIX, "COHERE_", IN_NAME, 0},
    {NAME_PREFIX, "HF_", IN_NAME, 0},
    {NAME_PREFIX, "HUGGINGFACE", IN_NAME, 0},
    {NAME_PREFIX, "GITHUB_", IN_NAME, 0},
    {NAME_PREFIX, "GH_", IN_NAME, 0},
    {NAME_PREFIX, "GITLAB_", IN_NAME, 0},
    {NAME_PREFIX, "VAULT_", IN_NAME, 0},
    {NAME_PREFIX, "PINHOLE_", IN_NAME, 0},
    {NAME_PREFIX, "DOCKER_", IN_NAME, 0},
    {NAME_PREFIX, "KUBE", IN_NAME, 0},
    {NAME_PREFIX, "K8S_", IN_NAME, 0},
    {NAME_PREFIX, "SSH_", IN_NAME, 0},
    {NAME_PREFIX, "GPG_", IN_NAME, 0},
    {NAME_PREFIX, "NPM_CONFIG_", IN_NAME, 0},
    {NAME_PREFIX, "KRB5", IN_NAME, 0},
    {NAME_EXACT, "DATABASE_URL", IN_NAME, 0},
    {NAME_EXACT, "REDIS_URL", IN_NAME, 0},
    {NAME_EXACT, "MONGODB_URI", IN_NAME, 0},
    {NAME_EXACT, "MONGO_URL", IN_NAME, 0},
    {NAME_EXACT, "AMQP_URL", IN_NAME, 0},
    {NAME_EXACT, "NETRC", IN_NAME, 0},
    {NAME_EXACT, "PGSERVICEFILE", IN_NAME, 0},
    {NAME_EXACT, "XAUTHORITY", IN_NAME, 0},
    {NAME_ORDINARY, "XDG_SESSION_ID", IN_NAME, 0},
    {NAME_ORDINARY, "XDG_SESSION_TYPE", IN_NAME, 0},
    {NAME_ORDINARY, "XDG_SESSION_CLASS", IN_NAME, 0},
    {NAME_ORDINARY, "XDG_SESSION_DESKTOP", IN_NAME, 0},
    {NAME_ORDINARY, "DESKTOP_SESSION", IN_NAME, 0},
    {NAME_ORDINARY, "DBUS_SESSION_BUS_ADDRESS", IN_NAME, 0},
    {NAME_ORDINARY, "SESSION_MANAGER", IN_NAME, 0},
    {NAME_ORDINARY, "PWD", IN_NAME, 0},
    {NAME_ORDINARY, "OLDPWD", IN_NAME, 0},
    /* Tokens by their issuer's prefix. */
    {TOKEN_PREFIX, "sk_live_", 0, 16},    {TOKEN_PREFIX, "sk_test_", 0, 16},
    {TOKEN_PREFIX, "rk_live_", 0, 16},    {TOKEN_PREFIX, "rk_test_", 0, 16},
    {TOKEN_PREFIX, "whsec_", 0, 16},      {TOKEN_PREFIX, "ghp_", 0, 20},
    {TOKEN_PREFIX, "gho_", 0, 20},        {TOKEN_PREFIX, "ghu_", 0, 20},
    {TOKEN_PREFIX, "ghs_", 0, 20},        {TOKEN_PREFIX, "ghr_", 0, 20},
    {TOKEN_PREFIX, "github_pat_", 0, 20}, {TOKEN_PREFIX, "glpat-", 0, 20},
    {TOKEN_PREFIX, "xoxb-", 0, 1},        {TOKEN_PREFIX, "xoxp-", 0, 1},
    {TOKEN_PREFIX, "xoxa-", 0, 1},        {TOKEN_PREFIX, "xoxr-", 0, 1},
    {TOKEN_PREFIX, "xoxs-", 0, 1},        {TOKEN_PREFIX, "xoxe-", 0, 1},
    {TOKEN_PREFIX, "xapp-", 0, 10},
    {TOKEN_PREFIX, "AKIA", 0, 16},        {TOKEN_PREFIX, "ASIA", 0, 16},
    {TOKEN_PREFIX, "AIza", 0, 30},        {TOKEN_PREFIX, "ya29.", 0, 20},
    {TOKEN_PREFIX, "sk-ant-", 0, 20},     {TOKEN_PREFIX, "sk-proj-", 0, 20},
    {TOKEN_PREFIX, "hf_", 0, 30},         {TOKEN_PREFIX, "npm_", 0, 30},
    {TOKEN_PREFIX, "pypi-", 0, 50},       {TOKEN_PREFIX, "SG.", 0, 20},
    {TOKEN_PREFIX, "dop_v1_", 0, 30},     {TOKEN_PREFIX, "glrt-", 0, 20},
    {TOKEN_PREFIX, "sk-", 0, 40},         {TOKEN_PREFIX, "sk-svcacct-", 0, 20},
    {TOKEN_PREFIX, "sk-admin-", 0, 20},   {TOKEN_PREFIX, "shpat_", 0, 20},
    {TOKEN_PREFIX, "shpss_", 0, 20},      {TOKEN_PREFIX, "shpca_", 0, 20},
    {TOKEN_PREFIX, "shppa_", 0, 20},      {TOKEN_PREFIX, "AGE-SECRET-KEY-", 0, 20},
    /* Webhook URLs: the URL is the credential. */
    {WEBHOOK, "hooks.slack.com/services/", 0, 8},
    {WEBHOOK, "hooks.slack.com/workflows/", 0, 8},
    {WEBHOOK, "discord.com/api/webhooks/", 0, 8},
    {WEBHOOK, "discordapp.com/api/webhooks/", 0, 8},
    {WEBHOOK, "webhook.office.com/webhookb2/", 0, 8},
};

#define TIER0_ROWS (sizeof tier0 / sizeof tier0[0])
#define WORD_MAX 64

static bool is_alnum(char c)
{
    return ph_is_lower(c) || ph_is_upper(c) || ph_is_digit(c);
}

static bool b64url_char(char c)
{
    return is_alnum(c) || c == '_' || c == '-';
}

/* The length of the run of characters c with pred(c) at p. */
static size_t span(const char *p, bool (*pred)(char))
{
    size_t n = 0;
    while (pred(p[n]))
        n++;
    return n;
}

static bool upper_prefix(const char *s, size_t n, const char *pat)
{
    size_t pl = strlen(pat);
    return pl <= n && ph_ascii_equal_nocase(s, pl, pat);
}

static bool word_rule(const char *w, size_t n, unsigned where);

/* Whether w is a QUALIFIER row's text run together with a WORD row's text
 * (MASTERKEY, DB + PW). */
static bool qualified_word(const char *w, size_t n, unsigned where)
{
    for (size_t i = 0; i < TIER0_ROWS; i++) {
        if (tier0[i].kind != QUALIFIER || !(tier0[i].where & where))
            continue;
        size_t ql = strlen(tier0[i].text);
        if (ql >= n || !upper_prefix(w, n, tier0[i].text))
            continue;
        for (size_t j = 0; j < TIER0_ROWS; j++)
            if (tier0[j].kind == WORD && (tier0[j].where & where) &&
                ph_ascii_equal_nocase(w + ql, n - ql, tier0[j].text))
                return true;
    }
    return false;
}

/* Whether the word w (n bytes) matches a row of `kind` that applies to
 * `where`. */
static bool word_rule(const char *w, size_t n, unsigned where)
{
    bool exempt = false;
    for (size_t i = 0; i < TIER0_ROWS; i++)
        if (tier0[i].kind == WORD_EXEMPT && ph_ascii_equal_nocase(w, n, tier0[i].text))
            exempt = true;
    for (size_t i = 0; i < TIER0_ROWS; i++) {
        if (!(tier0[i].where & where))
            continue;
        if (tier0[i].kind == WORD && ph_ascii_equal_nocase(w, n, tier0[i].text))
            return true;
        if (tier0[i].kind == WORD_PREFIX && !exempt && upper_prefix(w, n, tier0[i].text))
            return true;
    }
    return qualified_word(w, n, where);
}

/* Splits the n bytes at s into words (see the top of the file) and asks
 * word_rule of each. */
static bool any_word(const char *s, size_t n, unsigned where)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && !is_alnum(s[i]))
            i++;
        size_t start = i;
        while (i < n && is_alnum(s[i]) && !(i > start && ph_is_lower(s[i - 1]) && ph_is_upper(s[i])))
            i++;
        size_t end = i;
        while (end > start && ph_is_digit(s[end - 1]))
            end--;
        if (end > start && end - start <= WORD_MAX && word_rule(s + start, end - start, where))
            return true;
    }
    return false;
}

static bool name_rule(const char *name, size_t n, unsigned where)
{
    for (size_t i = 0; i < TIER0_ROWS; i++)
        if (tier0[i].kind == NAME_ORDINARY && (tier0[i].where & where) &&
            ph_ascii_equal_nocase(name, n, tier0[i].text))
            return false;
    for (size_t i = 0; i < TIER0_ROWS; i++) {
        const char *p = tier0[i].text;
        if (!(tier0[i].where & where))
            continue;
        switch (tier0[i].kind) {
        case NAME_EXACT:
            if (ph_ascii_equal_nocase(name, n, p))
                return true;
            break;
        case NAME_PREFIX:
            if (upper_prefix(name, n, p))
                return true;
            break;
        case NAME_CONTAINS:
            for (size_t at = 0; at + strlen(p) <= n; at++)
                if (upper_prefix(name + at, n - at, p))
                    return true;
            break;
        default:
            break;
        }
    }
    return any_word(name, n, where);
}

bool ph_env_name_is_credential(const char *name)
{
    return name_rule(name, strlen(name), IN_NAME);
}

const char *ph_env_credential_patterns_text(void)
{
    static char text[8192];
    if (text[0] == '\0') {
        static const char *kinds[] = {"name", "prefix", "contains", "word",
                                      "word-prefix", "not-word", "qualifier", "token",
                                      "webhook", "ordinary"};
        size_t o = 0;
        for (size_t i = 0; i < TIER0_ROWS; i++) {
            unsigned w = tier0[i].where;
            int n = snprintf(text + o, sizeof text - o, "%s %s%s%s%s\n", kinds[tier0[i].kind],
                             tier0[i].text, (w & IN_NAME) ? " name" : "",
                             (w & IN_KEY) ? " key" : "", (w & USERINFO) ? " userinfo" : "");
            if (n < 0 || (size_t)n >= sizeof text - o)
                break;
            o += (size_t)n;
        }
    }
    return text;
}

static bool scheme_char(char c)
{
    return is_alnum(c) || c == '+' || c == '-' || c == '.';
}

static bool blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* scheme://user:secret@ anywhere in value; any userinfo when any_userinfo. */
static bool url_userinfo(const char *value, bool any_userinfo)
{
    for (const char *p = strstr(value, "://"); p != NULL; p = strstr(p + 1, "://")) {
        /* A scheme: a letter, then letters, digits, '+', '-', '.'. */
        const char *s = p;
        while (s > value && scheme_char(s[-1]))
            s--;
        while (s < p && !(ph_is_lower(*s) || ph_is_upper(*s)))
            s++;
        if (s == p)
            continue;
        /* The authority ends at '/', '?', '#', whitespace or the end; its
         * userinfo is everything before its last '@'. */
        const char *a = p + 3, *end = a;
        while (*end && !strchr("/?#", *end) && !blank(*end))
            end++;
        const char *at = NULL;
        for (const char *q = a; q < end; q++)
            if (*q == '@')
                at = q;
        if (at == NULL)
            continue;
        if (any_userinfo)
            return true;
        const char *colon = memchr(a, ':', (size_t)(at - a));
        if (colon != NULL && colon + 1 < at)
            return true; /* scheme://user:secret@ */
    }
    return false;
}

static bool key_char(char c)
{
    return is_alnum(c) || c == '_' || c == '-' || c == '.';
}

/* Whether the value of a pair, starting at v, is empty: nothing, a
 * separator, or '' / "". */
static bool empty_value(const char *v)
{
    while (blank(*v))
        v++;
    if (*v == '\0' || strchr(";&,}]", *v) != NULL)
        return true;
    return (v[0] == '\'' || v[0] == '"') && v[1] == v[0];
}

/* key=value with a credential key and a non-empty value. The key is the run
 * of [A-Za-z0-9_.-] before '=' (blanks between them allowed: "Password =
 * x"); the value may be quoted, and '' or "" is empty. */
static bool credential_pair(const char *value)
{
    for (const char *eq = strchr(value, '='); eq != NULL; eq = strchr(eq + 1, '=')) {
        const char *k = eq;
        while (k > value && blank(k[-1]))
            k--;
        const char *kend = k;
        while (k > value && key_char(k[-1]))
            k--;
        if (k == kend || !name_rule(k, (size_t)(kend - k), IN_KEY))
            continue;
        if (!empty_value(eq + 1))
            return true;
    }
    return false;
}

/* "key": value (JSON) or key: value (YAML, a header) with a credential key
 * and a value that is not empty. The key is a run of [A-Za-z0-9_.-], either
 * quoted (then blanks may come before ':') or bare (then a blank must follow
 * ':', as YAML wants; "https://" and "/usr/bin:/bin" hold no pair). */
static bool credential_field(const char *value)
{
    for (const char *colon = strchr(value, ':'); colon != NULL;
         colon = strchr(colon + 1, ':')) {
        const char *k = colon;
        while (k > value && blank(k[-1]))
            k--;
        bool quoted = k > value && (k[-1] == '"' || k[-1] == '\'');
        if (quoted)
            k--;
        else if (k != colon || !blank(colon[1]))
            continue;
        const char *kend = k;
        while (k > value && key_char(k[-1]))
            k--;
        if (quoted && (k == value || k[-1] != *kend))
            continue;
        if (k == kend || !name_rule(k, (size_t)(kend - k), IN_KEY))
            continue;
        if (!empty_value(colon + 1))
            return true;
    }
    return false;
}

/* The word w (ASCII case-insensitive) at p, ending before end, followed by
 * a blank or end. */
static bool word_at(const char *p, const char *end, const char *w)
{
    size_t n = strlen(w);
    return (size_t)(end - p) >= n && ph_ascii_equal_nocase(p, n, w) &&
           (p + n == end || blank(p[n]));
}

/* -----BEGIN <label>-----, the label naming a private key (RSA, EC, DSA,
 * OPENSSH, ENCRYPTED, PGP ... PRIVATE KEY [BLOCK]): the words PRIVATE and
 * KEY, any run of blanks between the words, any case. */
static bool pem_private_key(const char *value)
{
    static const char begin[] = "-----BEGIN";
    for (const char *p = strstr(value, begin); p != NULL; p = strstr(p + 1, begin)) {
        const char *label = p + sizeof begin - 1;
        const char *end = strstr(label, "-----");
        if (end == NULL)
            return false;
        for (const char *q = label; q < end; q++) {
            if (!word_at(q, end, "PRIVATE") || (q > label && !blank(q[-1])))
                continue;
            const char *k = q + 7;
            while (k < end && blank(*k))
                k++;
            if (k > q + 7 && word_at(k, end, "KEY"))
                return true;
        }
    }
    return false;
}

static bool issuer_token(const char *value)
{
    for (size_t i = 0; i < TIER0_ROWS; i++) {
        if (tier0[i].kind != TOKEN_PREFIX)
            continue;
        const char *pre = tier0[i].text;
        size_t pl = strlen(pre);
        for (const char *p = strstr(value, pre); p != NULL; p = strstr(p + 1, pre)) {
            if (p > value && is_alnum(p[-1]))
                continue;
            if (span(p + pl, b64url_char) >= tier0[i].min)
                return true;
        }
    }
    return false;
}

static bool token68_char(char c)
{
    return b64url_char(c) || c == '.' || c == '~' || c == '+' || c == '/' || c == '=';
}

/* An HTTP bearer credential, "Bearer <token>" (the word at the start or
 * after a character that is not a letter or digit, any case, blanks, then
 * BEARER_MIN or more token68 characters), or a JWT: "eyJ" (a base64url JSON
 * object) at a token start, base64url, '.', "eyJ", base64url, '.'. */
#define BEARER_MIN 16
static bool bearer_token(const char *value)
{
    for (const char *p = value; *p; p++) {
        if (p > value && is_alnum(p[-1]))
            continue;
        if (ph_ascii_equal_nocase(p, 6, "bearer") && blank(p[6])) {
            const char *t = p + 6;
            while (blank(*t))
                t++;
            if (span(t, token68_char) >= BEARER_MIN)
                return true;
        }
        if (strncmp(p, "eyJ", 3) == 0) {
            size_t h = span(p, b64url_char);
            if (p[h] == '.' && strncmp(p + h + 1, "eyJ", 3) == 0) {
                size_t b = span(p + h + 1, b64url_char);
                if (p[h + 1 + b] == '.')
                    return true;
            }
            /* A start later in the same run ends where this one did and
             * fails the same way: skipping it keeps the scan linear. */
            p += h - 1;
        }
    }
    return false;
}

static bool ora_user_char(char c)
{
    return is_alnum(c) || c == '_' || c == '$' || c == '#';
}

static bool ora_secret_char(char c)
{
    return c != '\0' && c != '/' && c != '@' && !blank(c);
}

static bool host_char(char c)
{
    return is_alnum(c) || c == '.' || c == '-';
}

/* An Oracle connect string with a password, user/secret@target: at the
 * start of the value or after a blank, '=', '"' or '\'', a user (a letter,
 * then [A-Za-z0-9_$#]), '/', a secret (no '/', '@' or blank), '@', and a
 * target that is an EZConnect "//host...", a descriptor "(DESCRIPTION=..."
 * or host:port. A bare TNS alias (scott/tiger@orcl) is not told from a path
 * (src/pkg@v1) and passes; so does any path starting with '/', '.' or '~'. */
static bool connect_string(const char *value)
{
    for (const char *p = value; *p; p++) {
        if (p > value && !blank(p[-1]) && !strchr("=\"'", p[-1]))
            continue;
        if (!(ph_is_lower(*p) || ph_is_upper(*p)))
            continue;
        const char *q = p + span(p, ora_user_char);
        if (*q != '/')
            continue;
        size_t sl = span(q + 1, ora_secret_char);
        const char *t = q + 1 + sl;
        if (sl == 0 || *t != '@')
            continue;
        t++;
        if (strncmp(t, "//", 2) == 0 || *t == '(')
            return true;
        size_t hl = span(t, host_char);
        if (hl > 0 && t[hl] == ':' && ph_is_digit(t[hl + 1]))
            return true;
    }
    return false;
}

static bool url_path_char(char c)
{
    return b64url_char(c) || c == '/';
}

/* A WEBHOOK row's text (ASCII case-insensitive), then at least `min`
 * characters of [A-Za-z0-9_/-]. */
static bool webhook_url(const char *value)
{
    for (size_t i = 0; i < TIER0_ROWS; i++) {
        if (tier0[i].kind != WEBHOOK)
            continue;
        size_t tl = strlen(tier0[i].text);
        for (const char *p = value; *p; p++)
            if (ph_ascii_equal_nocase(p, strnlen(p, tl), tier0[i].text) &&
                span(p + tl, url_path_char) >= tier0[i].min)
                return true;
    }
    return false;
}

const char *ph_env_value_credential_rule(const char *name, const char *value)
{
    if (url_userinfo(value, any_word(name, strlen(name), USERINFO)))
        return "url_userinfo";
    if (credential_pair(value))
        return "credential_parameter";
    if (pem_private_key(value))
        return "private_key_block";
    if (issuer_token(value))
        return "issuer_token";
    if (credential_field(value))
        return "credential_field";
    if (bearer_token(value))
        return "bearer_token";
    if (connect_string(value))
        return "connect_string";
    if (webhook_url(value))
        return "webhook_url";
    return NULL;
}

bool ph_env_value_is_credential(const char *name, const char *value)
{
    return ph_env_value_credential_rule(name, value) != NULL;
}
