/* gate_sandbox_env_tiers.c - gate sandbox.env_built_in_tiers (ADR-0029
 * decision 3): the environment is built from nothing; tier 0 credentials are
 * never present and cannot be configured in; a passthrough list that cannot
 * be read or is malformed gives tier 2 alone and a warning, never the
 * parent environment and never a failure. */
#include "sandbox_test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox-int.h"

static char g_warnings[4096];

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

static void test_credential_patterns(void **state)
{
    (void)state;
    const char *creds[] = {"AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "OPENAI_API_KEY",
                           "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "github_token", "GH_TOKEN",
                           "DATABASE_URL", "MY_PASSWORD", "db_passwd", "STRIPE_SECRET",
                           "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_ID", "NPM_TOKEN",
                           "SSH_AUTH_SOCK", "PINHOLE_GRANT_KEY", "SIGNING_KEY", "SENTRY_DSN",
                           "HF_TOKEN", "VAULT_ADDR", "KUBECONFIG", "DOCKER_HOST", "x_api_key",
                           "MYSQL_PWD", "DB_PASS", "KEYSTORE_PASSPHRASE", "SLACK_WEBHOOK_URL",
                           "JWT", "session_jwt", "PGPASSFILE", "smtp_pass"};
    for (size_t i = 0; i < sizeof creds / sizeof creds[0]; i++)
        if (!ph_env_name_is_credential(creds[i]))
            fail_msg("%s should be a tier-0 credential name", creds[i]);
    const char *plain[] = {"LC_ALL", "TZ", "SAFE_NAME", "MONKEY", "KEYBOARD", "TERM", "PYTHONPATH"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (ph_env_name_is_credential(plain[i]))
            fail_msg("%s should not be a credential name", plain[i]);
    assert_non_null(strstr(ph_env_credential_patterns_text(), "prefix AWS_"));
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
        cmocka_unit_test(test_credential_patterns),
        cmocka_unit_test(test_operator_cannot_configure_a_credential_in),
        cmocka_unit_test(test_values_carrying_userinfo_are_refused),
        cmocka_unit_test(test_bad_lists_give_tier2_alone),
        cmocka_unit_test(test_no_list_no_network_is_tier2),
        cmocka_unit_test(test_proxy_variables_carry_the_grant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
