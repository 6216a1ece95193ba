/* test_config.c - pinhole-proxy settings: defaults, the strict YAML file
 * (positioned errors, a bad file changes nothing) and the command line
 * overriding the file. */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "test_support.h"

static const char *write_yaml(const char *text)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/proxy.yaml", ph_test_dir);
    assert_int_equal(ph_test_write_file(path, text, strlen(text)), 0);
    return path;
}

/* Loads text; returns the status and leaves the message in diag. */
static ph_status load(const char *text, px_config *cfg, ph_diag *diag)
{
    px_config_defaults(cfg);
    memset(diag, 0, sizeof *diag);
    return px_config_load_yaml(write_yaml(text), cfg, diag);
}

static void assert_error_at(const char *text, const char *where, const char *what)
{
    px_config cfg;
    ph_diag d;
    assert_int_equal(load(text, &cfg, &d), PH_E_INVAL);
    if (strstr(d.message, where) == NULL || strstr(d.message, what) == NULL)
        fail_msg("got '%s', want '%s' and '%s'", d.message, where, what);
    /* Nothing changed. */
    px_config def;
    px_config_defaults(&def);
    assert_memory_equal(&cfg, &def, sizeof cfg);
}

static void test_a_good_file_sets_every_kind_of_value(void **state)
{
    (void)state;
    px_config cfg;
    ph_diag d;
    assert_int_equal(load("listen:\n  - 127.0.0.1:1\n  - \"[::1]:2\"\nworkers: 3\n"
                          "unix_socket: /tmp/x.sock\nunix_socket_mode: 0600\n",
                          &cfg, &d),
                     PH_OK);
    assert_int_equal(cfg.listen_count, 2);
    assert_string_equal(cfg.listen[1], "[::1]:2");
    assert_int_equal(cfg.workers, 3);
    assert_int_equal(cfg.unix_socket_mode, 0600);
    assert_string_equal(cfg.unix_socket, "/tmp/x.sock");
    assert_int_equal(cfg.dns_timeout_ms, 5000); /* untouched default */
}

static void test_booleans_are_plain_true_or_false(void **state)
{
    (void)state;
    px_config cfg;
    ph_diag d;
    assert_int_equal(load("keep_tunnels_on_reload: true\nready_file: /tmp/r\n"
                          "max_connections_per_peer: 7\nmax_head_connections: 9\n"
                          "max_head_connections_per_peer: 3\nmax_admin_connections: 2\n",
                          &cfg, &d),
                     PH_OK);
    assert_int_equal(cfg.max_head_connections_per_peer, 3);
    assert_int_equal(cfg.max_admin_connections, 2);
    assert_int_equal(cfg.keep_tunnels_on_reload, 1);
    assert_string_equal(cfg.ready_file, "/tmp/r");
    assert_int_equal(cfg.max_connections_per_peer, 7);
    assert_int_equal(cfg.max_head_connections, 9);
    px_config_defaults(&cfg);
    assert_int_equal(cfg.keep_tunnels_on_reload, 0);
    assert_int_equal(cfg.max_connections_per_peer, 1024);
    assert_int_equal(cfg.max_head_connections, 4096);
    assert_int_equal(cfg.max_head_connections_per_peer, 64);
    assert_int_equal(cfg.max_admin_connections, 8);
    assert_error_at("keep_tunnels_on_reload: yes\n", ":1:25:", "expected true or false");
    assert_error_at("keep_tunnels_on_reload: \"true\"\n", ":1:25:", "must be an unquoted value");
}

static void test_errors_are_positioned_and_change_nothing(void **state)
{
    (void)state;
    assert_error_at("workers: 1\nbogus: 2\n", ":2:1:", "unknown setting 'bogus'");
    assert_error_at("workers: 1\nworkers: 2\n", ":2:1:", "duplicate setting 'workers'");
    assert_error_at("workers: \"4\"\n", ":1:10:", "unquoted");
    assert_error_at("workers: -1\n", ":1:10:", "non-negative integer");
    assert_error_at("workers: 100000\n", ":1:10:", "out of range");
    assert_error_at("workers: &a 1\nheader_timeout_ms: *a\n", ":1:10:", "anchors");
    assert_error_at("workers: !!int 1\n", ":1:10:", "tags");
    assert_error_at("workers: 1\n---\nworkers: 2\n", ":2:1:", "one YAML document");
    assert_error_at("- a\n", ":1:1:", "mapping");
    assert_error_at("workers: [1]\n", ":1:10:", "single value");
    assert_error_at("listen: [127.0.0.1]\n", ":1:10:", "ADDR:PORT");
    assert_error_at("workers: 1\n\tbad: 2\n", ":2:", "");
}

/* The strict reader's refusals (pinhole/yaml_reader.h), each positioned and
 * each leaving the settings as they were. */
static void test_reader_refusals(void **state)
{
    (void)state;
    assert_error_at("workers: 1\ndns_timeout_ms: *t\n", ":2:17:", "aliases are not accepted");
    assert_error_at("listen: [127.0.0.1:1]\nworkers: 2\nlisten: [127.0.0.1:2]\n", ":3:1:",
                    "duplicate setting 'listen'");
    assert_error_at("table: !!str t\n", ":1:8:", "tags are not accepted");
    assert_error_at("table: !<tag:yaml.org,2002:str> t\n", ":1:8:", "tags are not accepted");
    assert_error_at("%TAG !e! tag:example.com,2000:\n---\nworkers: 1\n", ":", "%TAG directives");
    assert_error_at("%YAML 1.1\n---\nworkers: 1\n", ":", "%YAML directives");
    assert_error_at("workers: 1\n---\n", ":2:1:", "one YAML document");
    assert_error_at("? [workers]\n: 1\n", ":1:3:", "expected a setting name");
    assert_error_at("workers: 1\nworkers_x: 2\n", ":2:1:", "unknown setting 'workers_x'");
    assert_error_at("listen: [\"127.0.0.1:1\\0x\"]\n", ":1:10:", "NUL byte");
    /* Too deep: refused where the 17th collection starts (the root mapping
     * is the first), before libyaml's quadratic flow scanning gets far. */
    char deep[256] = "workers: ";
    size_t o = strlen(deep);
    for (int i = 0; i < 40; i++)
        deep[o++] = '[';
    for (int i = 0; i < 40; i++)
        deep[o++] = ']';
    deep[o++] = '\n';
    deep[o] = '\0';
    assert_error_at(deep, ":1:25:", "nested more than 16 levels deep");
    /* A scalar longer than the limit. */
    char *big = malloc(8192);
    assert_non_null(big);
    memcpy(big, "table: ", 7);
    memset(big + 7, 'x', 5000);
    memcpy(big + 5007, "\n", 2);
    assert_error_at(big, ":1:8:", "a value longer than 4096 bytes");
    free(big);
    /* The whole message: path, line, column, text. */
    px_config cfg;
    ph_diag d;
    assert_int_equal(load("workers: &w 1\n", &cfg, &d), PH_E_INVAL);
    char want[1200];
    snprintf(want, sizeof want, "%s/proxy.yaml:1:10: anchors are not accepted", ph_test_dir);
    assert_string_equal(d.message, want);
}

static void test_bad_utf8_is_positioned(void **state)
{
    (void)state;
    assert_error_at("workers: 1\ntable: \"\xff\"\n", ":2:", "");
}

static void test_command_line_overrides_the_file(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s",
             write_yaml("workers: 3\nlisten: [127.0.0.1:1]\ntable: t\ngrant_key: k\n"));
    char *argv[] = { "pinhole-proxy", "--workers=5", "--config", path,
                     "--listen", "127.0.0.1:9", NULL };
    px_config cfg;
    ph_diag d = { 0 };
    int action = -1;
    px_config_defaults(&cfg);
    assert_int_equal(px_config_from_args(6, argv, &cfg, &action, &d), PH_OK);
    assert_int_equal(action, 0);
    assert_int_equal(cfg.workers, 5);
    assert_int_equal(cfg.listen_count, 1);
    assert_string_equal(cfg.listen[0], "127.0.0.1:9");
    assert_string_equal(cfg.table, "t");
}

/* The sources that must send a PROXY header: a list of prefixes in the
 * file and on the command line (which replaces the file's), strict. */
static void test_proxy_protocol_prefixes(void **state)
{
    (void)state;
    px_config cfg;
    ph_diag d;
    assert_int_equal(load("proxy_protocol:\n  - 10.0.0.0/8\n  - 127.0.0.1\n  - \"2001:db8::/32\"\n",
                          &cfg, &d),
                     PH_OK);
    assert_int_equal(cfg.proxy_protocol_count, 3);
    assert_int_equal(cfg.proxy_protocol[0].bits, 8);
    assert_int_equal(cfg.proxy_protocol[1].bits, 32);
    assert_int_equal(cfg.proxy_protocol[2].bits, 32);
    px_sockaddr a;
    assert_int_equal(px_sockaddr_parse("10.200.3.4:1", &a, NULL), PH_OK);
    assert_true(px_prefix_contains(&cfg.proxy_protocol[0], (struct sockaddr *)&a.ss));
    assert_false(px_prefix_contains(&cfg.proxy_protocol[1], (struct sockaddr *)&a.ss));
    assert_int_equal(px_sockaddr_parse("11.0.0.1:1", &a, NULL), PH_OK);
    assert_false(px_prefix_contains(&cfg.proxy_protocol[0], (struct sockaddr *)&a.ss));
    assert_int_equal(px_sockaddr_parse("[2001:db8:ffff::1]:1", &a, NULL), PH_OK);
    assert_true(px_prefix_contains(&cfg.proxy_protocol[2], (struct sockaddr *)&a.ss));
    assert_int_equal(px_sockaddr_parse("[::ffff:10.0.0.1]:1", &a, NULL), PH_OK);
    assert_false(px_prefix_contains(&cfg.proxy_protocol[0], (struct sockaddr *)&a.ss));
    assert_int_equal(load("proxy_protocol: 192.168.1.0/25\n", &cfg, &d), PH_OK);
    assert_int_equal(cfg.proxy_protocol_count, 1);
    assert_int_equal(px_sockaddr_parse("192.168.1.127:1", &a, NULL), PH_OK);
    assert_true(px_prefix_contains(&cfg.proxy_protocol[0], (struct sockaddr *)&a.ss));
    assert_int_equal(px_sockaddr_parse("192.168.1.128:1", &a, NULL), PH_OK);
    assert_false(px_prefix_contains(&cfg.proxy_protocol[0], (struct sockaddr *)&a.ss));

    assert_error_at("proxy_protocol: [10.0.0.1/8]\n", ":1:18:", "bits set past");
    assert_error_at("proxy_protocol: [0.0.0.0/0]\n", ":1:18:", "/0");
    assert_error_at("proxy_protocol: [\"::/0\"]\n", ":1:18:", "/0");
    assert_error_at("proxy_protocol: [10.0.0.0/33]\n", ":1:18:", "out of range");
    assert_error_at("proxy_protocol: [10.0.0.0/]\n", ":1:18:", "prefix length");
    assert_error_at("proxy_protocol: [10.0.0.0/+8]\n", ":1:18:", "prefix length");
    assert_error_at("proxy_protocol: [lb.example]\n", ":1:18:", "numeric");
    assert_error_at("proxy_protocol: [\"[::1]\"]\n", ":1:18:", "numeric");
    assert_error_at("proxy_protocol: [010.0.0.0/8]\n", ":1:18:", "numeric");
    /* An IPv4-mapped prefix would match no source (IPv6 listeners are
     * IPv6-only, an IPv4 source is AF_INET): a balancer listed so would be
     * refused, so the prefix is an error naming the IPv4 form. */
    assert_error_at("proxy_protocol: [\"::ffff:10.0.1.0/120\"]\n", ":1:18:", "IPv4-mapped");
    assert_error_at("proxy_protocol: [\"::ffff:127.0.0.1\"]\n", ":1:18:", "IPv4-mapped");

    char path[1024];
    snprintf(path, sizeof path, "%s",
             write_yaml("proxy_protocol: [10.0.0.0/8, 10.1.0.0/16]\ntable: t\ngrant_key: k\n"));
    char *argv[] = { "pinhole-proxy", "--config", path, "--proxy-protocol", "127.0.0.1",
                     "--proxy-protocol=::1", NULL };
    int action = -1;
    px_config_defaults(&cfg);
    assert_int_equal(px_config_from_args(6, argv, &cfg, &action, &d), PH_OK);
    assert_int_equal(cfg.proxy_protocol_count, 2);
    assert_int_equal(cfg.proxy_protocol[0].family, AF_INET);
    assert_int_equal(cfg.proxy_protocol[1].family, AF_INET6);
}

static void test_command_line_errors(void **state)
{
    (void)state;
    px_config cfg;
    ph_diag d = { 0 };
    int action;
    char *missing[] = { "pinhole-proxy", "--workers=2", NULL };
    px_config_defaults(&cfg);
    assert_int_equal(px_config_from_args(2, missing, &cfg, &action, &d), PH_E_INVAL);
    assert_non_null(strstr(d.message, "--table"));
    char *bad[] = { "pinhole-proxy", "--table=t", "--grant-key=k", "--workers=x", NULL };
    px_config_defaults(&cfg);
    assert_int_equal(px_config_from_args(4, bad, &cfg, &action, &d), PH_E_INVAL);
    assert_non_null(strstr(d.message, "--workers"));
    char *unknown[] = { "pinhole-proxy", "--frobnicate", NULL };
    px_config_defaults(&cfg);
    assert_int_equal(px_config_from_args(2, unknown, &cfg, &action, &d), PH_E_INVAL);
    char *help[] = { "pinhole-proxy", "--help", NULL };
    px_config_defaults(&cfg);
    assert_int_equal(px_config_from_args(2, help, &cfg, &action, &d), PH_OK);
    assert_int_equal(action, 'h');
}

/* A config path naming a FIFO (no writer) or a device is refused at once,
 * as the table and the grant keys are (ph_open_regular). */
static void test_only_a_regular_file_is_read(void **state)
{
    (void)state;
    char fifo[1024];
    snprintf(fifo, sizeof fifo, "%s/proxy.fifo", ph_test_dir);
    unlink(fifo);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    px_config cfg;
    px_config_defaults(&cfg);
    ph_diag d = { 0 };
    alarm(10); /* SIGALRM ends a test that blocks */
    assert_int_equal(px_config_load_yaml(fifo, &cfg, &d), PH_E_INVAL);
    assert_int_equal(px_config_load_yaml("/dev/zero", &cfg, NULL), PH_E_INVAL);
    alarm(0);
    assert_non_null(strstr(d.message, "a FIFO"));
    unlink(fifo);
}

/* A listener's address has one spelling (ph_sockaddr_parse): a port with
 * a sign, a space or a leading zero, which strtol would take, is refused
 * and named. */
static void test_listen_address_spelling(void **state)
{
    (void)state;
    px_sockaddr a;
    ph_diag d = {0};
    assert_int_equal(px_sockaddr_parse("127.0.0.1:0", &a, NULL), PH_OK); /* the kernel's pick */
    static const char *const bad[] = {"127.0.0.1:+80", "127.0.0.1: 80", "127.0.0.1:080",
                                      "127.0.0.1:-0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (px_sockaddr_parse(bad[i], &a, &d) != PH_E_INVAL)
            fail_msg("%s accepted", bad[i]);
        assert_non_null(strstr(d.message, "bad port"));
        assert_non_null(strstr(d.message, bad[i]));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_good_file_sets_every_kind_of_value),
        cmocka_unit_test(test_booleans_are_plain_true_or_false),
        cmocka_unit_test(test_errors_are_positioned_and_change_nothing),
        cmocka_unit_test(test_reader_refusals),
        cmocka_unit_test(test_bad_utf8_is_positioned),
        cmocka_unit_test(test_proxy_protocol_prefixes),
        cmocka_unit_test(test_listen_address_spelling),
        cmocka_unit_test(test_command_line_overrides_the_file),
        cmocka_unit_test(test_command_line_errors),
        cmocka_unit_test(test_only_a_regular_file_is_read),
    };
    return cmocka_run_group_tests(tests, ph_test_dir_setup, ph_test_dir_teardown);
}
