/* test_gvisor_oci_bundle.c - the OCI documents the gvisor mechanism hands
 * to runsc, and the exact runsc argv: read-only root, the workspace and
 * nothing else of the host, no capability, no new privileges, a non-root
 * user, limits with gVisor's floors, an exact process environment, and
 * refusals for what must never be configured. Pure functions: no runsc. */
#include "test_support.h"

#include <string.h>

#include "oci_bundle-int.h"
#include "runsc_cli-int.h"

static ph_oci_sandbox base_sandbox(void)
{
    ph_oci_sandbox s = {
        .rootfs = "/srv/rootfs",
        .workspace = "/var/lib/pinhole/env-1/workspace",
        .forwarder = "/usr/libexec/pinhole/pinhole-forwarder",
        .uid = 1000,
        .gid = 1000,
        .cgroups_path = "/pinhole-env-1",
        .memory_bytes = 512ull << 20,
        .pids = 2048,
        .cpu_millis = 1500,
    };
    return s;
}

static json_t *mount_at(json_t *config, const char *dest)
{
    json_t *m;
    size_t i;
    json_array_foreach(json_object_get(config, "mounts"), i, m)
    {
        if (strcmp(json_string_value(json_object_get(m, "destination")), dest) == 0)
            return m;
    }
    return NULL;
}

static bool has_option(json_t *mount, const char *opt)
{
    json_t *o;
    size_t i;
    json_array_foreach(json_object_get(mount, "options"), i, o)
    {
        if (strcmp(json_string_value(o), opt) == 0)
            return true;
    }
    return false;
}

static void config_is_locked_down(void **state)
{
    (void)state;
    ph_oci_sandbox s = base_sandbox();
    json_t *c = NULL;
    assert_int_equal(ph_oci_config_new(&s, &c, NULL), PH_OK);
    json_t *root = json_object_get(c, "root");
    assert_string_equal(json_string_value(json_object_get(root, "path")), "/srv/rootfs");
    assert_true(json_is_true(json_object_get(root, "readonly")));

    /* Exactly these mounts; the only host paths are the workspace (rw) and
     * the forwarder binary (ro). */
    assert_int_equal(json_array_size(json_object_get(c, "mounts")), 6);
    json_t *ws = mount_at(c, "/workspace");
    assert_non_null(ws);
    assert_string_equal(json_string_value(json_object_get(ws, "source")), s.workspace);
    assert_true(has_option(ws, "rw"));
    json_t *tmp = mount_at(c, "/tmp");
    assert_string_equal(json_string_value(json_object_get(tmp, "type")), "tmpfs");
    json_t *fwd = mount_at(c, "/run/pinhole/forwarder");
    assert_true(has_option(fwd, "ro"));
    assert_null(mount_at(c, "/run/pinhole/proxy.sock"));

    json_t *proc = json_object_get(c, "process");
    json_t *user = json_object_get(proc, "user");
    assert_int_equal(json_integer_value(json_object_get(user, "uid")), 1000);
    assert_int_equal(json_integer_value(json_object_get(user, "gid")), 1000);
    assert_true(json_is_true(json_object_get(proc, "noNewPrivileges")));
    json_t *caps = json_object_get(proc, "capabilities");
    const char *sets[] = {"bounding", "effective", "inheritable", "permitted", "ambient"};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(json_array_size(json_object_get(caps, sets[i])), 0);
    /* The init has an empty environment: nothing to read in /proc/1/environ. */
    assert_int_equal(json_array_size(json_object_get(proc, "env")), 0);
    json_t *args = json_object_get(proc, "args");
    assert_string_equal(json_string_value(json_array_get(args, 0)), "/run/pinhole/forwarder");
    assert_string_equal(json_string_value(json_array_get(args, 1)), "--init");
    assert_int_equal(json_array_size(args), 2);

    json_t *lx = json_object_get(c, "linux");
    bool net = false;
    json_t *n;
    size_t i;
    json_array_foreach(json_object_get(lx, "namespaces"), i, n)
    {
        if (strcmp(json_string_value(json_object_get(n, "type")), "network") == 0)
            net = true;
    }
    assert_true(net);
    assert_string_equal(json_string_value(json_object_get(lx, "cgroupsPath")), "/pinhole-env-1");
    json_t *res = json_object_get(lx, "resources");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "memory"), "limit")),
                     512ll << 20);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "pids"), "limit")),
                     2048);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "cpu"), "quota")),
                     150000);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "cpu"), "period")),
                     100000);
    json_decref(c);
}

static void grant_mounts_the_socket_and_relays(void **state)
{
    (void)state;
    ph_oci_sandbox s = base_sandbox();
    s.proxy_socket = "/run/pinhole-proxy/proxy.sock";
    s.forwarder_port = 3129;
    json_t *c = NULL;
    assert_int_equal(ph_oci_config_new(&s, &c, NULL), PH_OK);
    json_t *sock = mount_at(c, "/run/pinhole/proxy.sock");
    assert_non_null(sock);
    assert_string_equal(json_string_value(json_object_get(sock, "source")), s.proxy_socket);
    json_t *args = json_object_get(json_object_get(c, "process"), "args");
    assert_int_equal(json_array_size(args), 6);
    assert_string_equal(json_string_value(json_array_get(args, 3)), "127.0.0.1:3129");
    assert_string_equal(json_string_value(json_array_get(args, 5)), "/run/pinhole/proxy.sock");
    json_decref(c);
}

/* gVisor's kernel lives inside the cgroup: smaller limits are raised to
 * the floor under which a sandbox cannot start. */
static void limits_below_the_floor_are_raised(void **state)
{
    (void)state;
    ph_oci_sandbox s = base_sandbox();
    s.memory_bytes = 16ull << 20;
    s.pids = 10;
    s.cpu_millis = 1;
    json_t *c = NULL;
    assert_int_equal(ph_oci_config_new(&s, &c, NULL), PH_OK);
    json_t *res = json_object_get(json_object_get(c, "linux"), "resources");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "memory"), "limit")),
                     (json_int_t)PH_OCI_MEMORY_FLOOR);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "pids"), "limit")),
                     (json_int_t)PH_OCI_PIDS_FLOOR);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(res, "cpu"), "quota")),
                     1000);
    json_decref(c);
}

static void config_refusals(void **state)
{
    (void)state;
    json_t *c = NULL;
    ph_diag d = {0};
    ph_oci_sandbox s = base_sandbox();
    s.uid = 0;
    assert_int_equal(ph_oci_config_new(&s, &c, &d), PH_E_INVAL);
    assert_null(c);
    s = base_sandbox();
    s.gid = 0;
    assert_int_equal(ph_oci_config_new(&s, &c, &d), PH_E_INVAL);
    s = base_sandbox();
    s.rootfs = "relative/rootfs";
    assert_int_equal(ph_oci_config_new(&s, &c, &d), PH_E_INVAL);
    s = base_sandbox();
    s.proxy_socket = "/x.sock";
    s.forwarder_port = 0;
    assert_int_equal(ph_oci_config_new(&s, &c, &d), PH_E_INVAL);
    assert_null(c);
}

static void process_document_is_exact(void **state)
{
    (void)state;
    const char *argv[] = {"/run/pinhole/forwarder", "--run", "--", "printf", "%s\\n",
                          "a b", "\"quoted\" 'x'", "", NULL};
    const char *env[] = {"PATH=/usr/bin:/bin", "HOME=/workspace", "X=1=2"};
    json_t *p = NULL;
    assert_int_equal(ph_oci_process_new(argv, 8, env, 3, "/workspace/src", 1000, 1000, &p, NULL),
                     PH_OK);
    json_t *args = json_object_get(p, "args");
    assert_int_equal(json_array_size(args), 8);
    for (size_t i = 0; i < 8; i++)
        assert_string_equal(json_string_value(json_array_get(args, i)), argv[i]);
    json_t *e = json_object_get(p, "env");
    assert_int_equal(json_array_size(e), 3);
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(json_string_value(json_array_get(e, i)), env[i]);
    assert_string_equal(json_string_value(json_object_get(p, "cwd")), "/workspace/src");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(p, "user"), "uid")), 1000);
    assert_true(json_is_true(json_object_get(p, "noNewPrivileges")));
    json_decref(p);

    ph_diag d = {0};
    const char *bad_utf8[] = {"printf", "\xff\xfe", NULL};
    assert_int_equal(ph_oci_process_new(bad_utf8, 2, env, 3, "/workspace", 1000, 1000, &p, &d),
                     PH_E_INVAL);
    assert_non_null(strstr(d.message, "argument 1"));
    assert_null(p);
    assert_int_equal(ph_oci_process_new(argv, 8, env, 3, "/workspace", 0, 1000, &p, &d),
                     PH_E_INVAL);
    assert_int_equal(ph_oci_process_new(argv, 8, env, 3, "workspace", 1000, 1000, &p, &d),
                     PH_E_INVAL);
    assert_int_equal(ph_oci_process_new(argv, 0, env, 3, "/workspace", 1000, 1000, &p, &d),
                     PH_E_INVAL);
}

/* The exact invocation runsc gets, global flags first. */
static void runsc_argv_is_exact(void **state)
{
    (void)state;
    ph_runsc rt = {.binary = "/usr/bin/runsc", .root = "/state/env-1/gvisor/runsc"};
    const char *tail[] = {"exec", "--process", "/b/process.json", "env-1", NULL};
    const char *argv[PH_RUNSC_ARGV_MAX];
    size_t n = ph_runsc_argv(&rt, false, tail, argv, PH_RUNSC_ARGV_MAX);
    const char *want[] = {"/usr/bin/runsc", "--root", "/state/env-1/gvisor/runsc",
                          "--platform=ptrace", "--network=none", "exec", "--process",
                          "/b/process.json", "env-1"};
    assert_int_equal(n, 9);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(argv[i], want[i]);
    assert_null(argv[n]);

    n = ph_runsc_argv(&rt, true, tail, argv, PH_RUNSC_ARGV_MAX);
    assert_int_equal(n, 10);
    assert_string_equal(argv[5], "--host-uds=open");
    assert_string_equal(argv[6], "exec");
    /* Too small a buffer is refused, never truncated. */
    assert_int_equal(ph_runsc_argv(&rt, true, tail, argv, 6), 0);
}

static bool has_namespace(json_t *c, const char *type)
{
    json_t *n;
    size_t i;
    json_array_foreach(json_object_get(json_object_get(c, "linux"), "namespaces"), i, n)
    {
        if (strcmp(json_string_value(json_object_get(n, "type")), type) == 0)
            return true;
    }
    return false;
}

/* The gofer's user namespace: ids 0 and the sandbox user's, each mapped to
 * itself, nothing else; without it, no user namespace and no maps. */
static void user_namespace_maps_two_ids(void **state)
{
    (void)state;
    ph_oci_sandbox s = base_sandbox();
    json_t *c = NULL;
    assert_int_equal(ph_oci_config_new(&s, &c, NULL), PH_OK);
    assert_false(has_namespace(c, "user"));
    assert_null(json_object_get(json_object_get(c, "linux"), "uidMappings"));
    json_decref(c);
    s.user_namespace = true;
    assert_int_equal(ph_oci_config_new(&s, &c, NULL), PH_OK);
    assert_true(has_namespace(c, "user"));
    const char *keys[] = {"uidMappings", "gidMappings"};
    for (size_t k = 0; k < 2; k++) {
        json_t *maps = json_object_get(json_object_get(c, "linux"), keys[k]);
        assert_int_equal(json_array_size(maps), 2);
        const json_int_t ids[] = {0, 1000};
        for (size_t i = 0; i < 2; i++) {
            json_t *m = json_array_get(maps, i);
            assert_int_equal(json_integer_value(json_object_get(m, "containerID")), ids[i]);
            assert_int_equal(json_integer_value(json_object_get(m, "hostID")), ids[i]);
            assert_int_equal(json_integer_value(json_object_get(m, "size")), 1);
        }
    }
    json_decref(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(config_is_locked_down),
        cmocka_unit_test(grant_mounts_the_socket_and_relays),
        cmocka_unit_test(limits_below_the_floor_are_raised),
        cmocka_unit_test(config_refusals),
        cmocka_unit_test(user_namespace_maps_two_ids),
        cmocka_unit_test(process_document_is_exact),
        cmocka_unit_test(runsc_argv_is_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
