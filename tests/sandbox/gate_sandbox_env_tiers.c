/* gate_sandbox_env_tiers.c - gate sandbox.env_built_in_tiers (ADR-0029
 * decision 3): the environment is built from nothing; tier 0 credentials are
 * never present and cannot be configured in; a passthrough list that cannot
 * be read or is malformed gives tier 2 alone and a warning, never the
 * parent environment and never a failure. */
#include "sandbox_test_util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "sandbox-int.h"

static char g_warnings[65536];

static void collect(void *ctx, const char *line)
{
    (void)ctx;
    size_t u = strlen(g_warnings);
    snprintf(g_warnings + u, sizeof g_warnings - u, "%s\n", line);
}

static const char *fake_getenv(const char *name)
{
    if (strcmp(name, "SAFE_NAME") == 0)
        return "safe";
    if (strcmp(name, "LC_ALL") == 0)
        return "C";
    return "canary-7d3e"; /* every other name "has" a credential value */
}

static ph_env_block build_with(const char *list_text, const ph_sandbox_network *net,
                              const char *(*getenv_fn)(const char *))
{
    char *dir = ph_test_mkdtemp();
    char path[512];
    snprintf(path, sizeof path, "%s/list", dir);
    if (list_text)
        assert_int_equal(ph_test_write_file(path, list_text, strlen(list_text)), 0);
    ph_env_inputs in = {.lease = "L1", .network = net, .passthrough_file = path,
                        .getenv_fn = getenv_fn, .log = collect};
    g_warnings[0] = '\0';
    ph_env_block env = {0};
    assert_int_equal(ph_env_build(&in, &env, NULL), PH_OK);
    ph_test_rmtree(dir);
    free(dir);
    return env;
}

static ph_env_block build(const char *list_text, const ph_sandbox_network *net)
{
    return build_with(list_text, net, fake_getenv);
}

static bool has_canary(const ph_env_block *env)
{
    for (size_t i = 0; i < env->count; i++)
        if (strstr(env->vars[i], "canary-7d3e"))
            return true;
    return false;
}

/* The tier-0 rule's test table: names refused and allowed, values refused
 * (with the rule that refuses them) and allowed. */
static const char *const refused_names[] = {
    "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "OPENAI_API_KEY", "ANTHROPIC_API_KEY",
    "GITHUB_TOKEN", "github_token", "GH_TOKEN", "DATABASE_URL", "MY_PASSWORD", "db_passwd",
    "STRIPE_SECRET", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_ID", "NPM_TOKEN",
    "SSH_AUTH_SOCK", "PINHOLE_GRANT_KEY", "SIGNING_KEY", "SENTRY_DSN", "HF_TOKEN", "VAULT_ADDR",
    "KUBECONFIG", "DOCKER_HOST", "x_api_key", "MYSQL_PWD", "DB_PASS", "KEYSTORE_PASSPHRASE",
    "SLACK_WEBHOOK_URL", "JWT", "session_jwt", "PGPASSFILE", "smtp_pass",
    /* Each of these passed an older, pattern-only rule. */
    "LDAP_BIND_PW", "SMTP_PW", "DB_PW", "AUTHORIZATION", "HTTP_AUTHORIZATION", "AUTH_HEADER",
    "BEARER", "REGISTRY_CREDS", "STRIPE_SK", "SLACK_HOOK", "DISCORD_HOOK_URL", "KRB5CCNAME",
    "COOKIE", "SESSIONID",
    /* The words wherever they sit, any case, digits after them. */
    "db_pw2", "dbPw", "X-Auth-Token", "PROXY_AUTH", "OAUTH_CLIENT", "AUTHN_URL", "cookie_jar",
    "SESSION_ID", "APP_SESSION", "DEPLOY_KEY", "KEY", "ENCRYPTION_KEYS", "KEYTAB", "GH_PAT",
    "KRB5_KTNAME", "XAUTHORITY", "MFA_TOTP", "REGISTRY_CRED", "NETRC",
    /* A credential word run together with a qualifier, and pre-shared keys. */
    "DBPW", "ROOTPW", "MASTERPW", "MASTERKEY", "SIGNINGKEY", "SSHKEY", "DEPLOYKEY", "WIFI_PSK",
    "ADMINPASSWD_FILE", "app_dbpw2",
};

static const char *const allowed_names[] = {
    "PATH", "LANG", "HOME", "TERM", "TZ", "LC_ALL", "USER", "SHELL", "EDITOR", "SAFE_NAME",
    "MONKEY", "KEYBOARD", "PYTHONPATH", "GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "JAVA_HOME",
    "GOPATH", "NODE_ENV", "CI", "MAKEFLAGS", "CFLAGS", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
    "CERT_AUTHORITY", "PIP_INDEX_URL", "DEBIAN_FRONTEND", "SOURCE_DATE_EPOCH", "COLUMNS",
    "TASK", "DISK_SIZE", "HOOKS_DIR", "SKIP", "PATTERN", "COOKBOOK_DIR", "XDG_SESSION_TYPE",
    "DBUS_SESSION_BUS_ADDRESS", "SESSION_MANAGER",
    /* A shell's bookkeeping, and words that merely end in KEY or PW. */
    "PWD", "OLDPWD", "SHLVL", "_", "TURKEY", "HOTKEY", "DONKEY", "WHISKEY", "KEYBOARD_LAYOUT",
    "MASTER", "DB_HOST", "ROOT_DIR", "DEPLOY_ENV", "SSH", "USER_HOME",
};

static const struct {
    const char *name, *value, *rule;
} refused_values[] = {
    {"JDBC", "jdbc:postgresql://db:5432/app?user=app&password=canary-7d3e", "credential_parameter"},
    {"JDBC2", "jdbc:sqlserver://db;user=app;password=canary-7d3e", "credential_parameter"},
    {"PG_CONN", "host=db port=5432 dbname=app user=app password=canary-7d3e",
     "credential_parameter"},
    {"ADO", "Server=db;Database=app;User ID=app;Password=canary-7d3e;", "credential_parameter"},
    {"ADO2", "Server=db;Password = 'canary-7d3e';", "credential_parameter"},
    {"ODBC", "DRIVER={x};SERVER=db;UID=app;PWD=canary-7d3e", "credential_parameter"},
    {"AZ_STORE", "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=canary-7d3e",
     "credential_parameter"},
    {"SIGNED", "https://b.s3.amazonaws.com/o?X-Amz-Credential=canary-7d3e&X-Amz-Signature=1",
     "credential_parameter"},
    {"SAS", "https://a.blob.core.windows.net/c?sv=2020&sig=canary-7d3e", "credential_parameter"},
    {"CALLBACK", "https://example.com/cb?access_token=canary-7d3e", "credential_parameter"},
    {"FLAGS", "--verbose --password=canary-7d3e", "credential_parameter"},
    {"CERT", "-----BEGIN RSA PRIVATE KEY-----\nMIIcanary-7d3e\n-----END RSA PRIVATE KEY-----",
     "private_key_block"},
    {"CERT2", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3canary-7d3e", "private_key_block"},
    {"CERT3", "-----BEGIN PRIVATE KEY-----MIIcanary-7d3e", "private_key_block"},
    {"STRIPE", "sk_live_canary7d3eabcdef0123456789", "issuer_token"},
    {"GHT", "ghp_canary7d3eabcdef0123456789ABCDEFGH", "issuer_token"},
    {"GHFG", "github_pat_11canary7d3e_abcdef0123456789", "issuer_token"},
    {"SLACK", "xoxb-123456789012-canary-7d3e", "issuer_token"},
    {"AWSID", "AKIAIOSFODNN7EXAMPLE", "issuer_token"},
    {"HEADER", "Authorization: Bearer xoxp-1234567890-canary7d3e", "issuer_token"},
    {"GLAB", "glpat-canary7d3eabcdef012345", "issuer_token"},
    {"POSTGRES_URL", "postgres://app:canary-7d3e@db.internal:5432/app", "url_userinfo"},
    {"UPSTREAMS", "a.example.com,https://u:canary-7d3e@b.example.com/x", "url_userinfo"},
    {"SERVICE_URI", "https://canary-7d3e@git.example.com/repo.git", "url_userinfo"},
    /* Each of these passed the rule before JSON, YAML, bearer, connect
     * string and webhook values were read. */
    {"FTP_PROXY", "http://canary-7d3e@proxy.example:3128", "url_userinfo"},
    {"git_https_proxy", "http://canary-7d3e:@proxy.example", "url_userinfo"},
    {"CONFIG_JSON", "{\"password\":\"canary-7d3e\"}", "credential_field"},
    {"CONFIG_JSON2", "{\"user\": \"a\", \"client_secret\" : \"canary-7d3e\"}",
     "credential_field"},
    {"CONFIG_YAML", "user: app\npassword: canary-7d3e\n", "credential_field"},
    {"CONFIG_YAML2", "db:\n  api_key: 'canary-7d3e'", "credential_field"},
    {"HDR", "Authorization: Basic Y2FuYXJ5LTdkM2U=", "credential_field"},
    {"HDR2", "Authorization: Bearer canary", "credential_field"},
    {"UPSTREAM_HEADER", "Bearer canary7d3eabcdef0123456789", "bearer_token"},
    {"CURL_ARGS", "-H 'X: bearer  canary7d3eabcdef0123456789'", "bearer_token"},
    {"OIDC_ID",
     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnktN2QzZSJ9.c2lnbmF0dXJlY2FuYXJ5N2QzZQ",
     "bearer_token"},
    {"ORACLE", "scott/canary-7d3e@//db.example:1521/ORCL", "connect_string"},
    {"SQLPLUS_ARGS", "-S app/canary-7d3e@db.example:1521/svc", "connect_string"},
    {"ORA_DESC", "app/canary-7d3e@(DESCRIPTION=(ADDRESS=(HOST=db)))", "connect_string"},
    {"NOTIFY", "https://hooks.slack.com/services/T000/B000/canary7d3e", "webhook_url"},
    {"ALERTS", "https://discord.com/api/webhooks/1234/canary-7d3e", "webhook_url"},
    {"LEGACY_LLM", "sk-canary7d3eabcdef0123456789ABCDEFGHIJKLMNOPQRSTUV", "issuer_token"},
    {"LLM_SVC", "sk-svcacct-canary7d3eabcdef0123", "issuer_token"},
    {"SHOPIFY", "shpat_canary7d3eabcdef0123456789ab", "issuer_token"},
    {"AGE", "AGE-SECRET-KEY-1CANARY7D3EQQQQQQQQQQQQQQQQQQQQQ", "issuer_token"},
    {"SLACK_SHORT", "xoxb-canary", "issuer_token"},
    {"CERT4", "-----BEGIN  PRIVATE  KEY-----\nMIIcanary-7d3e", "private_key_block"},
    {"CERT5", "-----BEGIN\tEC PRIVATE\tKEY-----\nMIIcanary-7d3e", "private_key_block"},
};

static const struct {
    const char *name, *value;
} allowed_values[] = {
    {"PATH", "/usr/local/bin:/usr/bin:/bin"},
    {"LANG", "C.UTF-8"},
    {"TZ", "Europe/Paris"},
    {"PIP_INDEX_URL", "https://pypi.org/simple"},
    {"MIRROR_URL", "https://mirror.example.com:8443/debian?arch=amd64#top"},
    {"HOMEPAGE", "https://me@example.com/"},            /* user only, not a URL name */
    {"NOTE", "mail root@example.com, see http://example.com/a:b@c"},
    {"ANALYTICS_URL", "https://db.internal:5432/app?q=a@b"},
    {"MAKEFLAGS", "-j2 --jobserver-auth=3,4"},
    {"QUERY", "https://example.com/search?q=keyboard&page=2&sort=asc"},
    {"PG_CONN", "host=db port=5432 dbname=app user=app password="},   /* empty */
    {"ADO", "Server=db;Password='';"},                                 /* empty */
    {"LS_COLORS", "rs=0:di=01;34:ln=01;36:mh=00:pi=40;33:so=01;35:ow=34;42:st=37;44"},
    {"CA", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"},
    {"PUB", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----"},
    {"BRANCH", "task/ghp_fix"},                          /* too short for a token */
    {"WORD", "MASKIAIOSFODNN7EXAMPLEX"},                 /* not at a token start */
    {"GREETING", "sk-good"},
    {"HOME", "/home/dev"},
    {"TERM", "xterm-256color"},
    {"PWD", "/home/dev/src/app@2/build"},
    {"OLDPWD", "/srv/repo@main/x"},
    {"SHLVL", "2"},
    {"_", "/usr/bin/env"},
    {"SETTINGS", "{\"a\":1}"},
    {"SETTINGS2", "{\"keyboard\": \"us\", \"author\": \"me\", \"password\": \"\"}"},
    {"YAMLISH", "name: app\nport: 8080\n"},
    {"NO_PROXY", "localhost,127.0.0.1,.internal"},
    {"HTTP_PROXY", "http://proxy.example:3128"},
    {"SRC", "src/pkg@v1.2/x"},                           /* a path with '/' and '@' */
    {"MODULES", "node_modules/@types/node"},
    {"GOFLAGS", "-mod=mod example.com/m@v1.2.3"},
    {"TAGLINE", "bearer of good news"},
    {"DOCS", "https://api.slack.com/messaging/webhooks"},
    {"B64", "eyJhIjoxfQ=="},                             /* a base64 JSON object, no JWT */
    {"DATE", "time: 12:30"},
};

static void test_tier0_table(void **state)
{
    (void)state;
    /* Every wrong row is printed, then counted: the figure says how far the
     * rule is from the table. */
    size_t wrong = 0;
    for (size_t i = 0; i < sizeof refused_names / sizeof refused_names[0]; i++)
        if (!ph_env_name_is_credential(refused_names[i]))
            print_message("%s should be a tier-0 credential name\n", refused_names[i]), wrong++;
    for (size_t i = 0; i < sizeof allowed_names / sizeof allowed_names[0]; i++)
        if (ph_env_name_is_credential(allowed_names[i]))
            print_message("%s should not be a credential name\n", allowed_names[i]), wrong++;
    for (size_t i = 0; i < sizeof refused_values / sizeof refused_values[0]; i++) {
        const char *rule =
            ph_env_value_credential_rule(refused_values[i].name, refused_values[i].value);
        if (rule == NULL || strcmp(rule, refused_values[i].rule) != 0)
            print_message("%s: want rule %s, got %s\n", refused_values[i].name,
                          refused_values[i].rule, rule ? rule : "none"),
                wrong++;
    }
    for (size_t i = 0; i < sizeof allowed_values / sizeof allowed_values[0]; i++) {
        const char *rule =
            ph_env_value_credential_rule(allowed_values[i].name, allowed_values[i].value);
        if (rule != NULL)
            print_message("%s should pass, refused by %s\n", allowed_values[i].name, rule),
                wrong++;
    }
    print_message("tier-0 table: %zu row(s) wrong\n", wrong);
    assert_int_equal(wrong, 0);
    assert_non_null(strstr(ph_env_credential_patterns_text(), "prefix AWS_ name"));
}

/* docs/sandbox.md's tier-0 table holds every row of the rule, as
 * "| kind | `text` |": the page says what the code refuses. */
static void test_tier0_table_is_documented(void **state)
{
    (void)state;
    size_t len = 0;
    char *doc = ph_test_read_file(ph_test_source_path("docs/sandbox.md"), &len);
    assert_non_null(doc);
    char *rows = strdup(ph_env_credential_patterns_text());
    for (char *save = NULL, *line = strtok_r(rows, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char kind[32], text[64];
        assert_int_equal(sscanf(line, "%31s %63s", kind, text), 2);
        char want[128];
        snprintf(want, sizeof want, "| %s | `%s` |", kind, text);
        if (strstr(doc, want) == NULL)
            fail_msg("docs/sandbox.md lacks the tier-0 row \"%s\"", want);
    }
    free(rows);
    free(doc);
}

/* Every dropped variable is named in a warning, and no warning carries a
 * value. */
static const char *table_getenv(const char *name)
{
    for (size_t i = 0; i < sizeof refused_values / sizeof refused_values[0]; i++)
        if (strcmp(name, refused_values[i].name) == 0)
            return refused_values[i].value;
    for (size_t i = 0; i < sizeof allowed_values / sizeof allowed_values[0]; i++)
        if (strcmp(name, allowed_values[i].name) == 0)
            return allowed_values[i].value;
    return "canary-7d3e";
}

static void test_each_dropped_variable_is_named(void **state)
{
    (void)state;
    char list[8192] = "";
    for (size_t i = 0; i < sizeof refused_names / sizeof refused_names[0]; i++)
        if (strchr(refused_names[i], '-') == NULL) /* a list holds names only */
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s\n", refused_names[i]);
    for (size_t i = 0; i < sizeof refused_values / sizeof refused_values[0]; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\n", refused_values[i].name);
    /* A list is a set of names: one of each (DATABASE_URL style duplicates
     * would make the whole list malformed). */
    ph_env_block env = build_with(list, NULL, table_getenv);
    assert_false(has_canary(&env));
    assert_null(strstr(g_warnings, "canary"));
    for (size_t i = 0; i < sizeof refused_names / sizeof refused_names[0]; i++) {
        char want[128];
        snprintf(want, sizeof want, "\"name\":\"%s\"", refused_names[i]);
        if (strchr(refused_names[i], '-') == NULL && strstr(g_warnings, want) == NULL)
            fail_msg("no warning names %s", refused_names[i]);
    }
    for (size_t i = 0; i < sizeof refused_values / sizeof refused_values[0]; i++) {
        char want[160];
        snprintf(want, sizeof want,
                 "\"event\":\"passthrough_credential_value_refused\",\"name\":\"%s\"",
                 refused_values[i].name);
        if (strstr(g_warnings, want) == NULL)
            fail_msg("want %s", want);
    }
    ph_env_block_clear(&env);
}

/* Values: the userinfo of a URL is a credential whatever the name holding it. */
static const char *url_getenv(const char *name)
{
    static const struct {
        const char *name, *value;
    } values[] = {
        {"POSTGRES_URL", "postgres://app:canary-7d3e@db.internal:5432/app"},
        {"CACHE_URL", "redis://:canary-7d3e@cache:6379/0"},
        {"SERVICE_URI", "https://canary-7d3e@git.example.com/repo.git"}, /* user only, *_URI */
        {"UPSTREAMS", "a.example.com,https://u:canary-7d3e@b.example.com/x"}, /* any name */
        {"MIRROR", "see HTTPS://who:canary-7d3e@mirror.example"},
        {"ANALYTICS_URL", "https://db.internal:5432/app?q=a@b"}, /* a port, '@' in the query */
        {"HOMEPAGE", "https://me@example.com/"}, /* user only, not a URL name: kept */
        {"NOTE", "mail root@example.com, see http://example.com/a:b@c"},
    };
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        if (strcmp(name, values[i].name) == 0)
            return values[i].value;
    return NULL;
}

static void test_values_carrying_userinfo_are_refused(void **state)
{
    (void)state;
    ph_env_block env = build_with("POSTGRES_URL\nCACHE_URL\nSERVICE_URI\nUPSTREAMS\nMIRROR\n"
                                  "ANALYTICS_URL\nHOMEPAGE\nNOTE\n",
                                  NULL, url_getenv);
    assert_false(has_canary(&env));
    const char *refused[] = {"POSTGRES_URL", "CACHE_URL", "SERVICE_URI", "UPSTREAMS", "MIRROR"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        assert_null(ph_env_get(&env, refused[i]));
        char want[128];
        snprintf(want, sizeof want,
                 "\"event\":\"passthrough_credential_value_refused\",\"name\":\"%s\"",
                 refused[i]);
        if (strstr(g_warnings, want) == NULL)
            fail_msg("want %s in: %s", want, g_warnings);
    }
    assert_non_null(ph_env_get(&env, "ANALYTICS_URL"));
    assert_non_null(ph_env_get(&env, "HOMEPAGE"));
    assert_non_null(ph_env_get(&env, "NOTE"));
    ph_env_block_clear(&env);
    assert_true(ph_env_value_is_credential("X", "ftp://a:b@h"));
    assert_false(ph_env_value_is_credential("X", "ftp://a:@h"));   /* no secret */
    assert_true(ph_env_value_is_credential("X_DSN", "ftp://a:@h")); /* URL name: any userinfo */
    assert_false(ph_env_value_is_credential("X", "://a:b@h"));     /* no scheme */
    assert_false(ph_env_value_is_credential("X_URL", "plain"));
    /* A proxy variable: any userinfo (pinhole-execd's own HTTP_PROXY too). */
    assert_string_equal(ph_env_value_credential_rule("HTTP_PROXY", "http://u@proxy:3128"),
                        "url_userinfo");
    assert_null(ph_env_value_credential_rule("HTTP_PROXY", "http://proxy:3128"));
}

static void test_operator_cannot_configure_a_credential_in(void **state)
{
    (void)state;
    ph_env_block env = build("SAFE_NAME\nAWS_SECRET_ACCESS_KEY\nMY_TOKEN\nLC_ALL\nHOME\n", NULL);
    assert_string_equal(ph_env_get(&env, "SAFE_NAME"), "safe");
    assert_string_equal(ph_env_get(&env, "LC_ALL"), "C");
    assert_string_equal(ph_env_get(&env, "HOME"), "/workspace"); /* tier 2 wins */
    assert_null(ph_env_get(&env, "AWS_SECRET_ACCESS_KEY"));
    assert_null(ph_env_get(&env, "MY_TOKEN"));
    assert_false(has_canary(&env));
    assert_non_null(strstr(g_warnings, "\"name\":\"AWS_SECRET_ACCESS_KEY\""));
    assert_non_null(strstr(g_warnings, "\"name\":\"MY_TOKEN\""));
    assert_non_null(strstr(g_warnings, "passthrough_synthesized_refused"));
    ph_env_block_clear(&env);
}

static void expect_tier2_alone(const char *list_text, const char *warning)
{
    ph_env_block env = build(list_text, NULL);
    assert_int_equal(env.count, 5);
    const char *want[] = {"PATH", "HOME", "TMPDIR", "LANG", "PWD"};
    for (size_t i = 0; i < 5; i++)
        assert_non_null(ph_env_get(&env, want[i]));
    assert_false(has_canary(&env));
    if (strstr(g_warnings, warning) == NULL)
        fail_msg("want warning %s, got: %s", warning, g_warnings);
    ph_env_block_clear(&env);
}

static void test_bad_lists_give_tier2_alone(void **state)
{
    (void)state;
    expect_tier2_alone(NULL, "passthrough_unreadable");                   /* missing */
    expect_tier2_alone("SAFE_NAME\nBAD NAME\n", "passthrough_malformed"); /* space */
    expect_tier2_alone("SAFE_NAME\nLC_ALL", "passthrough_malformed");     /* no final newline */
    expect_tier2_alone("SAFE_NAME\nSAFE_NAME\n", "passthrough_malformed"); /* duplicate */
    expect_tier2_alone("SAFE_NAME\n1ABC\n", "passthrough_malformed");
    expect_tier2_alone(" SAFE_NAME\n", "passthrough_malformed");
    expect_tier2_alone("SAFE_NAME=1\n", "passthrough_malformed");
    /* A directory is not a list. */
    char *dir = ph_test_mkdtemp();
    ph_env_inputs in = {.lease = "L1", .passthrough_file = dir, .getenv_fn = fake_getenv,
                        .log = collect};
    g_warnings[0] = '\0';
    ph_env_block env = {0};
    assert_int_equal(ph_env_build(&in, &env, NULL), PH_OK);
    assert_int_equal(env.count, 5);
    assert_non_null(strstr(g_warnings, "passthrough_unreadable"));
    ph_env_block_clear(&env);
    ph_test_rmtree(dir);
    free(dir);
}

/* Counts the opens inotify saw on the watched path (read without waiting). */
static int opens_seen(int ino)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    int opens = 0;
    ssize_t n;
    while ((n = read(ino, buf, sizeof buf)) > 0)
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            opens += (ev->mask & IN_OPEN) != 0;
            p += sizeof *ev + ev->len;
        }
    return opens;
}

/* A FIFO or a device named as the list is refused without being opened:
 * opening a FIFO for reading releases a writer blocked in open(2) (the one
 * who made it learns the service read its list), and opening a device can
 * act (rewind a tape, claim a terminal). inotify reports every open. */
static void expect_not_opened(const char *path, const char *type)
{
    int ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    assert_true(ino >= 0);
    assert_true(inotify_add_watch(ino, path, IN_OPEN) >= 0);
    ph_env_inputs in = {.lease = "L1", .passthrough_file = path, .getenv_fn = fake_getenv,
                        .log = collect};
    g_warnings[0] = '\0';
    ph_env_block env = {0};
    assert_int_equal(ph_env_build(&in, &env, NULL), PH_OK);
    assert_int_equal(env.count, 5);
    int opens = opens_seen(ino);
    print_message("%s as the passthrough list: opened %d times; warnings: %s", type, opens,
                  g_warnings);
    assert_int_equal(opens, 0);
    assert_non_null(strstr(g_warnings, "passthrough_unreadable"));
    assert_non_null(strstr(g_warnings, type));
    assert_null(strstr(g_warnings, path)); /* the host path stays out of the warning */
    ph_env_block_clear(&env);
    close(ino);
}

static void test_special_files_are_not_opened(void **state)
{
    (void)state;
    char *dir = ph_test_mkdtemp();
    char path[512];
    snprintf(path, sizeof path, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    expect_not_opened(path, "a FIFO");
    snprintf(path, sizeof path, "%s/null", dir);
    if (mknod(path, S_IFCHR | 0600, makedev(1, 3)) == 0) /* root only: /dev/null's numbers */
        expect_not_opened(path, "a character device");
    else
        print_message("not root: the device case is not run (%s)\n", strerror(errno));
    ph_test_rmtree(dir);
    free(dir);
}

static void test_no_list_no_network_is_tier2(void **state)
{
    (void)state;
    ph_env_inputs in = {.lease = "L1", .getenv_fn = fake_getenv, .log = collect};
    ph_env_block env = {0};
    g_warnings[0] = '\0';
    assert_int_equal(ph_env_build(&in, &env, NULL), PH_OK);
    assert_int_equal(env.count, 5);
    assert_string_equal(g_warnings, "");
    assert_null(env.vars[env.count]); /* execve-ready */
    ph_env_block_clear(&env);
}

static void test_proxy_variables_carry_the_grant(void **state)
{
    (void)state;
    ph_sandbox_network net = {.grant_token = "a/b+c=", .proxy_socket_path = "/s",
                              .proxy_port = 0};
    ph_env_block env = build("SAFE_NAME\n", &net);
    const char *url = "http://L1:a%2Fb%2Bc%3D@127.0.0.1:3128";
    const char *vars[] = {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        assert_string_equal(ph_env_get(&env, vars[i]), url);
    assert_string_equal(ph_env_get(&env, "NO_PROXY"), "");
    ph_env_block_clear(&env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tier0_table),
        cmocka_unit_test(test_tier0_table_is_documented),
        cmocka_unit_test(test_each_dropped_variable_is_named),
        cmocka_unit_test(test_operator_cannot_configure_a_credential_in),
        cmocka_unit_test(test_values_carrying_userinfo_are_refused),
        cmocka_unit_test(test_bad_lists_give_tier2_alone),
        cmocka_unit_test(test_special_files_are_not_opened),
        cmocka_unit_test(test_no_list_no_network_is_tier2),
        cmocka_unit_test(test_proxy_variables_carry_the_grant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
