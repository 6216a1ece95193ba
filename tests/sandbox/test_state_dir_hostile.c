/* test_state_dir_hostile.c - a state directory another local user prepared
 * is refused, and nothing is done through it: a pre-created directory owned
 * by someone else, a symlink, a wrong mode, an untrusted ancestor, a spec or
 * environment directory swapped between two CLI calls, a symlink planted
 * where a bundle file is written, and a proxy "socket" that is a directory.
 * The other user is simulated with chown (the test runs as root; without
 * root it exits 77). */
#include "sandbox_test_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox-int.h"

#define OTHER_UID 54321

static char *g_top; /* a private directory for each test's paths */

static int top_setup(void **state)
{
    (void)state;
    g_top = ph_test_mkdtemp();
    return g_top ? 0 : -1;
}

static int top_teardown(void **state)
{
    (void)state;
    ph_test_rmtree(g_top);
    free(g_top);
    g_top = NULL;
    return 0;
}

static int entries_in(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return n;
}

/* Opens a fake service on dir; returns the status and leaves the message. */
static ph_status open_on(const char *dir, ph_execution_service **svc, ph_diag *diag)
{
    ph_service_config cfg = {.mode = PH_SERVICE_MODE_DEVELOPMENT,
                             .mechanism = PH_MECHANISM_FAKE,
                             .hard_cap_ms = 10000,
                             .state_dir = dir};
    return ph_execution_service_open(&cfg, svc, diag);
}

static void assert_code(const ph_diag *diag, const char *code)
{
    if (strstr(diag->message, code) != diag->message)
        fail_msg("expected %s, got: %s", code, diag->message);
}

static void expect_refused(const char *dir, const char *code)
{
    ph_execution_service *svc = NULL;
    ph_diag diag = {0};
    assert_int_equal(open_on(dir, &svc, &diag), PH_E_DENIED);
    assert_null(svc);
    assert_code(&diag, code);
}

/* A service on the new directory g_top/name (its path in dir). */
static ph_execution_service *open_named(const char *name, char dir[static 512])
{
    snprintf(dir, 512, "%s/%s", g_top, name);
    ph_execution_service *svc = NULL;
    ph_diag diag = {0};
    if (open_on(dir, &svc, &diag) != PH_OK)
        fail_msg("service open: %s", diag.message);
    return svc;
}

static ph_environment_spec fake_spec(void)
{
    ph_environment_spec s;
    memset(&s, 0, sizeof s);
    s.tenant = "t1";
    s.lease = "l1";
    s.mechanism = PH_MECHANISM_FAKE;
    ph_sandbox_limits_init(&s.limits);
    return s;
}

/* A unix socket bound at path (not listening). */
static int bound_socket(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(fd >= 0 && strlen(path) < sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

static void test_precreated_by_another_user(void **state)
{
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/owned", g_top);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(chown(dir, OTHER_UID, OTHER_UID), 0);
    expect_refused(dir, "state_dir_wrong_owner:");
    assert_int_equal(entries_in(dir), 0); /* nothing made in it */
}

static void test_symlinked_state_dir(void **state)
{
    (void)state;
    char real[512], link[512];
    snprintf(real, sizeof real, "%s/real", g_top);
    snprintf(link, sizeof link, "%s/link", g_top);
    assert_int_equal(mkdir(real, 0700), 0);
    assert_int_equal(symlink(real, link), 0);
    expect_refused(link, "state_dir_symlink:");
    assert_int_equal(entries_in(real), 0);
    /* A symlink among the ancestors is refused the same way. */
    char below[600];
    snprintf(below, sizeof below, "%s/sub", link);
    expect_refused(below, "state_dir_symlink:");
    assert_int_equal(entries_in(real), 0);
}

static void test_wrong_mode(void **state)
{
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/open", g_top);
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(chmod(dir, 0755), 0);
    expect_refused(dir, "state_dir_wrong_mode:");
    assert_int_equal(chmod(dir, 0770), 0);
    expect_refused(dir, "state_dir_wrong_mode:");
    assert_int_equal(entries_in(dir), 0);
}

static void test_untrusted_ancestor(void **state)
{
    (void)state;
    /* A directory another user owns (and so can rename things in), then one
     * anyone can write without the sticky bit: either could swap the state
     * directory under the service. */
    char theirs[512], dir[600];
    snprintf(theirs, sizeof theirs, "%s/theirs", g_top);
    snprintf(dir, sizeof dir, "%s/state", theirs);
    assert_int_equal(mkdir(theirs, 0755), 0);
    assert_int_equal(chown(theirs, OTHER_UID, OTHER_UID), 0);
    expect_refused(dir, "state_dir_untrusted_ancestor:");
    assert_int_equal(entries_in(theirs), 0);
    assert_int_equal(chown(theirs, 0, 0), 0);
    assert_int_equal(chmod(theirs, 0777), 0);
    expect_refused(dir, "state_dir_untrusted_ancestor:");
    assert_int_equal(entries_in(theirs), 0);
    /* Sticky and world-writable, like /tmp: fine, because the entry in it
     * is ours and the sticky bit stops others from renaming it. */
    assert_int_equal(chmod(theirs, 01777), 0);
    ph_execution_service *svc = NULL;
    ph_diag diag = {0};
    assert_int_equal(open_on(dir, &svc, &diag), PH_OK);
    ph_execution_service_close(&svc);
    struct stat sb;
    assert_int_equal(stat(dir, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0700);
    /* "..": refused rather than resolved. */
    char dotdot[700];
    snprintf(dotdot, sizeof dotdot, "%s/../theirs/state", theirs);
    assert_int_equal(open_on(dotdot, &svc, &diag), PH_E_INVAL);
}

static void test_mount_in_a_shared_dir(void **state)
{
    (void)state;
    /* Another user makes the state directory's name in a sticky, shared
     * directory (like /tmp) and mounts over it a filesystem whose root
     * claims root's ownership and 0700 (a FUSE mount can; a tmpfs with
     * uid=0,mode=0700 plays it here). fstat of what the walk opens sees the
     * mounted root only: that must not pass for the service's own. */
    char shared[512], dir[600];
    snprintf(shared, sizeof shared, "%s/shared", g_top);
    snprintf(dir, sizeof dir, "%s/state", shared);
    assert_int_equal(mkdir(shared, 01777), 0);
    assert_int_equal(chmod(shared, 01777), 0);
    assert_int_equal(mkdir(dir, 0755), 0);
    assert_int_equal(chown(dir, OTHER_UID, OTHER_UID), 0);
    if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "uid=0,gid=0,mode=0700") != 0)
        fail_msg("cannot mount a tmpfs to play the other user's mount: %s", strerror(errno));
    ph_execution_service *svc = NULL;
    ph_diag diag = {0};
    ph_status st = open_on(dir, &svc, &diag);
    ph_execution_service_close(&svc);
    assert_int_equal(umount2(dir, MNT_DETACH), 0);
    assert_int_equal(st, PH_E_DENIED);
    assert_code(&diag, "state_dir_mount_in_shared_dir:");
}

static void test_created_when_absent(void **state)
{
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/a/b/state", g_top);
    ph_execution_service *svc = NULL;
    ph_diag diag = {0};
    assert_int_equal(open_on(dir, &svc, &diag), PH_OK);
    ph_execution_service_close(&svc);
    struct stat sb;
    assert_int_equal(lstat(dir, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));
    assert_int_equal(sb.st_mode & 07777, 0700);
    assert_int_equal(sb.st_uid, geteuid());
    /* The default leaves /tmp. */
    char *def = NULL;
    assert_int_equal(ph_state_dir_default(&def, &diag), PH_OK);
    if (geteuid() == 0)
        assert_string_equal(def, "/var/lib/pinhole/sandbox");
    assert_null(strstr(def, "/tmp"));
    free(def);
}

/* A CLI-style environment: created, spec saved, handle detached. */
static void make_detached(ph_execution_service *svc, char id[32])
{
    ph_environment_spec s = fake_spec();
    ph_environment *env = NULL;
    ph_diag diag = {0};
    assert_int_equal(ph_environment_create(svc, &s, &env, &diag), PH_OK);
    assert_int_equal(ph_environment_persist_spec(env, &diag), PH_OK);
    snprintf(id, 32, "%s", ph_environment_id(env));
    ph_environment_detach(&env);
}

static void expect_reattach_refused(ph_execution_service *svc, const char *id, const char *code)
{
    ph_environment *env = NULL;
    ph_diag diag = {0};
    ph_status st = ph_environment_reattach(svc, id, &env, &diag);
    assert_int_not_equal(st, PH_OK);
    assert_null(env);
    assert_code(&diag, code);
}

static void test_swapped_spec(void **state)
{
    (void)state;
    char dir[512], spec[600], evil[600];
    ph_execution_service *svc = open_named("svc", dir);
    ph_diag diag = {0};
    char id[32];
    make_detached(svc, id);
    snprintf(spec, sizeof spec, "%s/%s/spec.json", dir, id);
    snprintf(evil, sizeof evil, "%s/evil.json", g_top);

    /* What the attacker wants the service to read: the proxy socket "/"
     * (which would be bind-mounted read-write). */
    char *orig = ph_test_read_file(spec, NULL);
    assert_non_null(orig);
    FILE *f = fopen(evil, "w");
    assert_non_null(f);
    fprintf(f, "{\"tenant\":\"t1\",\"lease\":\"l1\",\"mechanism\":\"fake\",\"grant_token\":\"x\","
               "\"proxy_socket_path\":\"/\",\"host_id\":%u}",
            PH_SANDBOX_ID_DEFAULT_FIRST);
    fclose(f);

    /* 1. the spec replaced by a file of another owner */
    assert_int_equal(chown(spec, OTHER_UID, OTHER_UID), 0);
    expect_reattach_refused(svc, id, "state_file_wrong_owner:");
    assert_int_equal(chown(spec, 0, 0), 0);
    /* 2. a symlink to the attacker's file */
    assert_int_equal(unlink(spec), 0);
    assert_int_equal(symlink(evil, spec), 0);
    expect_reattach_refused(svc, id, "state_file_symlink:");
    assert_int_equal(unlink(spec), 0);
    /* 3. readable by others (not what the service writes) */
    f = fopen(spec, "w");
    assert_non_null(f);
    fputs(orig, f);
    fclose(f);
    assert_int_equal(chmod(spec, 0644), 0);
    expect_reattach_refused(svc, id, "state_file_wrong_mode:");
    /* 4. a hard link to someone else's content is not the service's file */
    assert_int_equal(chmod(spec, 0600), 0);
    char hard[600];
    snprintf(hard, sizeof hard, "%s/hard.json", g_top);
    assert_int_equal(link(spec, hard), 0);
    expect_reattach_refused(svc, id, "state_file_wrong_mode:");
    assert_int_equal(unlink(hard), 0);
    /* the genuine file still works */
    ph_environment *env = NULL;
    assert_int_equal(ph_environment_reattach(svc, id, &env, &diag), PH_OK);
    ph_environment_detach(&env);

    /* 5. the environment directory itself swapped for a symlink */
    char envdir[600], moved[600];
    snprintf(envdir, sizeof envdir, "%s/%s", dir, id);
    snprintf(moved, sizeof moved, "%s/moved", g_top);
    assert_int_equal(rename(envdir, moved), 0);
    assert_int_equal(symlink(moved, envdir), 0);
    expect_reattach_refused(svc, id, "state_open_failed:");
    assert_int_equal(unlink(envdir), 0);
    assert_int_equal(rename(moved, envdir), 0);
    /* 6. ... or owned by another user */
    assert_int_equal(chown(envdir, OTHER_UID, OTHER_UID), 0);
    expect_reattach_refused(svc, id, "state_dir_wrong_owner:");
    assert_int_equal(chown(envdir, 0, 0), 0);

    assert_int_equal(ph_environment_reattach(svc, id, &env, &diag), PH_OK);
    ph_environment_destroy(&env);
    assert_int_equal(entries_in(dir), 0);
    ph_execution_service_close(&svc);
    free(orig);
}

/* A development fake service on g_top/<name> whose id range is the one
 * uid: every environment probes the same id. dir receives the path. */
static ph_execution_service *one_id_service(const char *name, uint32_t uid, char dir[static 512])
{
    snprintf(dir, 512, "%s/%s", g_top, name);
    ph_service_config cfg = {.mode = PH_SERVICE_MODE_DEVELOPMENT,
                             .mechanism = PH_MECHANISM_FAKE,
                             .hard_cap_ms = 10000,
                             .state_dir = dir,
                             .id_first = uid,
                             .id_count = 1};
    ph_execution_service *svc = NULL;
    ph_diag diag = {0};
    assert_int_equal(ph_execution_service_open(&cfg, &svc, &diag), PH_OK);
    return svc;
}

static void test_stale_destroy_keeps_another_claim(void **state)
{
    (void)state;
    /* Two handles on one environment (two CLI processes): the second
     * destroy must not release the host id that another environment has
     * claimed since, or a third one would share it. One id in the range
     * makes every environment probe the same id. */
    char dir[512];
    ph_execution_service *svc =
        one_id_service("ids-svc", 3000000u + (uint32_t)getpid() % 100000u, dir);
    ph_diag diag = {0};
    char id[32];
    make_detached(svc, id);
    ph_environment *first = NULL, *stale = NULL, *other = NULL, *third = NULL;
    assert_int_equal(ph_environment_reattach(svc, id, &first, &diag), PH_OK);
    assert_int_equal(ph_environment_reattach(svc, id, &stale, &diag), PH_OK);
    ph_environment_destroy(&first);
    ph_environment_spec s = fake_spec();
    assert_int_equal(ph_environment_create(svc, &s, &other, &diag), PH_OK);
    ph_environment_destroy(&stale);
    /* The id is still the other environment's: the range is exhausted. */
    assert_int_equal(ph_environment_create(svc, &s, &third, &diag), PH_E_LIMIT);
    assert_null(third);
    assert_code(&diag, "id_range_exhausted");
    ph_environment_destroy(&other);
    assert_int_equal(entries_in(dir), 0);
    ph_execution_service_close(&svc);
}

static void test_two_state_dirs_never_share_an_id(void **state)
{
    (void)state;
    /* Two services with their own state directories (two execd, the CLI
     * beside one) and the same one-id range: as root the claim is
     * host-wide, so the second create is refused rather than given the
     * uid the first environment runs as. */
    if (geteuid() != 0)
        skip();
    uint32_t first = 3200000u + (uint32_t)getpid() % 100000u;
    ph_execution_service *svc[2] = {NULL, NULL};
    ph_environment *env[2] = {NULL, NULL};
    ph_diag diag = {0};
    char dir[2][512];
    ph_environment_spec s = fake_spec();
    for (int i = 0; i < 2; i++) {
        snprintf(dir[i], sizeof dir[i], "%s/ids-host-%d", g_top, i);
        ph_service_config cfg = {.mode = PH_SERVICE_MODE_DEVELOPMENT,
                                 .mechanism = PH_MECHANISM_FAKE,
                                 .hard_cap_ms = 10000,
                                 .state_dir = dir[i],
                                 .id_first = first,
                                 .id_count = 1};
        assert_int_equal(ph_execution_service_open(&cfg, &svc[i], &diag), PH_OK);
    }
    assert_int_equal(ph_environment_create(svc[0], &s, &env[0], &diag), PH_OK);
    ph_status st = ph_environment_create(svc[1], &s, &env[1], &diag);
    printf("  second state directory, same one-id range: %s\n",
           st == PH_OK ? "created (shares the uid)" : diag.message);
    assert_int_equal(st, PH_E_LIMIT);
    assert_null(env[1]);
    assert_code(&diag, "id_range_exhausted");
    /* Released on destroy: the other service may take it then. */
    ph_environment_destroy(&env[0]);
    assert_int_equal(ph_environment_create(svc[1], &s, &env[1], &diag), PH_OK);
    ph_environment_destroy(&env[1]);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(entries_in(dir[i]), 0);
        ph_execution_service_close(&svc[i]);
    }
}

/* A child that runs as uid (gid the same, no groups) and waits; returned
 * once it does. */
static pid_t spawn_as(uint32_t uid)
{
    int ready[2];
    assert_int_equal(pipe(ready), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        close(ready[0]);
        if (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
            setresuid(uid, uid, uid) != 0)
            _exit(1);
        close(ready[1]);
        for (;;)
            pause();
    }
    close(ready[1]);
    char c;
    assert_int_equal(read(ready[0], &c, 1), 0); /* closed once it runs as uid */
    close(ready[0]);
    return child;
}

/* Whether child was killed (and reaped); a child still running is killed
 * and reaped here, and false returned. */
static bool was_killed(pid_t child)
{
    int status = 0;
    if (waitpid(child, &status, WNOHANG) == child)
        return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return false;
}

/* Fails unless the leftover child of uid was killed by what (recovery,
 * destroy) before it released the uid's claim. */
static void assert_leftover_killed(pid_t child, uint32_t uid, const char *what)
{
    bool killed = was_killed(child);
    printf("  leftover of uid %u after %s: %s\n", (unsigned)uid, what,
           killed ? "killed" : "still running");
    if (!killed)
        fail_msg("%s released uid %u while a process still ran as it", what, (unsigned)uid);
}

static void test_recovery_ends_the_uids_processes(void **state)
{
    (void)state;
    /* A crash leaves a process running as the environment's uid: recovery
     * kills it before it releases the claim, or the next environment given
     * that uid would share it with the leftover. */
    if (geteuid() != 0)
        skip();
    char dir[512];
    uint32_t uid = 3300000u + (uint32_t)getpid() % 100000u;
    ph_execution_service *svc = one_id_service("ids-leftover", uid, dir);
    ph_diag diag = {0};
    char id[32];
    make_detached(svc, id);
    pid_t child = spawn_as(uid);
    assert_int_equal(ph_environment_recover(svc, id, &diag), PH_OK);
    assert_leftover_killed(child, uid, "recovery");
    assert_int_equal(entries_in(dir), 0);
    ph_execution_service_close(&svc);
}

static void test_destroy_ends_the_uids_processes(void **state)
{
    (void)state;
    /* A process still running as the environment's uid at destroy (one its
     * runtime failed to end) is killed before the claim goes, as recovery
     * does: a range of one uid then serves the next environment with no
     * process of the last one left. A stale handle's destroy (another CLI
     * process) kills nothing: the uid is the next environment's by then. */
    if (geteuid() != 0)
        skip();
    char dir[512];
    uint32_t uid = 3400000u + (uint32_t)getpid() % 100000u;
    ph_execution_service *svc = one_id_service("ids-destroy", uid, dir);
    ph_diag diag = {0};
    char id[32];
    make_detached(svc, id);
    ph_environment *first = NULL, *stale = NULL, *next = NULL;
    assert_int_equal(ph_environment_reattach(svc, id, &first, &diag), PH_OK);
    assert_int_equal(ph_environment_reattach(svc, id, &stale, &diag), PH_OK);
    pid_t leftover = spawn_as(uid);
    ph_environment_destroy(&first);
    assert_leftover_killed(leftover, uid, "destroy");
    ph_environment_spec s = fake_spec();
    assert_int_equal(ph_environment_create(svc, &s, &next, &diag), PH_OK);
    pid_t of_next = spawn_as(uid);
    ph_environment_destroy(&stale);
    assert_false(was_killed(of_next)); /* the next environment's process lived */
    ph_environment_destroy(&next);
    assert_int_equal(entries_in(dir), 0);
    ph_execution_service_close(&svc);
}

static void test_state_write_never_follows(void **state)
{
    (void)state;
    /* A symlink planted where a bundle file is written (config.json, or its
     * temporary name) is replaced, never written through. */
    char dir[512], target[600], planted[600], tmp[600];
    snprintf(dir, sizeof dir, "%s/bundle", g_top);
    snprintf(target, sizeof target, "%s/victim", g_top);
    assert_int_equal(mkdir(dir, 0700), 0);
    FILE *f = fopen(target, "w");
    assert_non_null(f);
    fputs("untouched", f);
    fclose(f);
    snprintf(planted, sizeof planted, "%s/config.json", dir);
    snprintf(tmp, sizeof tmp, "%s/.config.json.tmp", dir);
    assert_int_equal(symlink(target, planted), 0);
    assert_int_equal(symlink(target, tmp), 0);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    ph_diag diag = {0};
    assert_int_equal(ph_state_write(fd, "config.json", "{}", 2, 0600, &diag), PH_OK);
    char *text = ph_test_read_file(target, NULL);
    assert_string_equal(text, "untouched");
    free(text);
    struct stat sb;
    assert_int_equal(lstat(planted, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    assert_int_equal(sb.st_mode & 0777, 0600);
    char *back = NULL;
    assert_int_equal(ph_state_read(fd, "config.json", &back, NULL, &diag), PH_OK);
    assert_string_equal(back, "{}");
    free(back);
    close(fd);
}

static void test_proxy_socket_must_be_a_socket(void **state)
{
    (void)state;
    char dir[512], sock[600], link[600];
    ph_execution_service *svc = open_named("sock-svc", dir);
    ph_diag diag = {0};
    ph_environment_spec s = fake_spec();
    s.network.grant_token = "grant";
    ph_environment *env = NULL;
    const char *bad[] = {"/", "/etc/passwd", "/nonexistent/proxy.sock"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s.network.proxy_socket_path = bad[i];
        assert_int_equal(ph_environment_create(svc, &s, &env, &diag), PH_E_INVAL);
        assert_non_null(strstr(diag.message, "proxy_socket_"));
        assert_null(env);
    }
    snprintf(sock, sizeof sock, "%s/proxy.sock", g_top);
    int fd = bound_socket(sock);
    /* A symlink to a socket is not followed: the target could change. */
    snprintf(link, sizeof link, "%s/proxy.link", g_top);
    assert_int_equal(symlink(sock, link), 0);
    s.network.proxy_socket_path = link;
    assert_int_equal(ph_environment_create(svc, &s, &env, &diag), PH_E_INVAL);
    s.network.proxy_socket_path = sock;
    assert_int_equal(ph_environment_create(svc, &s, &env, &diag), PH_OK);
    ph_environment_destroy(&env);
    close(fd);
    assert_int_equal(entries_in(dir), 0);
    ph_execution_service_close(&svc);
}

/* A granted create with the proxy socket at path is refused with code. */
static void expect_socket_refused(ph_execution_service *svc, const char *path, const char *code)
{
    ph_environment_spec s = fake_spec();
    s.network.grant_token = "grant";
    s.network.proxy_socket_path = path;
    ph_environment *env = NULL;
    ph_diag diag = {0};
    assert_int_equal(ph_environment_create(svc, &s, &env, &diag), PH_E_INVAL);
    assert_null(env);
    if (strstr(diag.message, code) == NULL)
        fail_msg("%s: expected %s, got: %s", path, code, diag.message);
}

/* Another local user must not be able to swap the proxy socket for their
 * own (or for a symlink to the container runtime's): every directory on
 * the path is root's or ours and writable by nobody else unless sticky,
 * no component is a symlink, and in a sticky shared directory the socket
 * itself is root's or ours. */
static void test_proxy_socket_path_others_can_change(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        print_message("needs root to make another user's files; skipped part\n");
        return;
    }
    char dir[512], path[700];
    ph_execution_service *svc = open_named("sock-path-svc", dir);
    ph_environment_spec s = fake_spec();
    s.network.grant_token = "grant";
    struct {
        const char *sub;  /* a directory under g_top */
        unsigned mode;
        uid_t owner;
        uid_t sock_owner;
        const char *code; /* NULL: accepted */
    } cases[] = {
        {"open", 0777, 0, 0, "proxy_socket_untrusted_ancestor"},
        {"group-writable", 0775, 0, 0, "proxy_socket_untrusted_ancestor"},
        {"sticky-their-socket", 01777, 0, OTHER_UID, "proxy_socket_untrusted_owner"},
        {"sticky-our-socket", 01777, 0, 0, NULL},
        {"ours", 0755, 0, OTHER_UID, NULL}, /* a trusted directory: its owner put it there */
        /* The proxy's user, unprivileged, owns its runtime directory. */
        {"proxy-user", 0755, OTHER_UID, OTHER_UID, NULL},
        {"proxy-user-root-socket", 0755, OTHER_UID, 0, NULL},
        {"proxy-user-third-socket", 0755, OTHER_UID, OTHER_UID + 1, "proxy_socket_untrusted_owner"},
        {"proxy-user-shared", 01777, OTHER_UID, OTHER_UID, "proxy_socket_untrusted_ancestor"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char sub[600];
        snprintf(sub, sizeof sub, "%s/sockpath-%s", g_top, cases[i].sub);
        if (mkdir(sub, 0700) != 0)
            fail_msg("mkdir %s: %s", sub, strerror(errno));
        snprintf(path, sizeof path, "%s/proxy.sock", sub);
        int fd = bound_socket(path);
        assert_int_equal(chown(path, cases[i].sock_owner, 0), 0);
        assert_int_equal(chown(sub, cases[i].owner, 0), 0);
        assert_int_equal(chmod(sub, cases[i].mode), 0);
        s.network.proxy_socket_path = path;
        ph_environment *env = NULL;
        ph_diag diag = {0};
        ph_status st = ph_environment_create(svc, &s, &env, &diag);
        if (cases[i].code == NULL) {
            if (st != PH_OK)
                fail_msg("%s: %s", cases[i].sub, diag.message);
            ph_environment_destroy(&env);
        } else {
            assert_int_equal(st, PH_E_INVAL);
            assert_null(env);
            if (strstr(diag.message, cases[i].code) == NULL)
                fail_msg("%s: expected %s, got: %s", cases[i].sub, cases[i].code, diag.message);
        }
        close(fd);
    }
    /* Another user's directory in a shared sticky one: anyone could have
     * made it before the proxy's user did (a squat). */
    char shared[300], squat[400];
    snprintf(shared, sizeof shared, "%s/sockpath-shared", g_top);
    snprintf(squat, sizeof squat, "%s/pinhole-proxy", shared);
    if (mkdir(shared, 01777) != 0 || chmod(shared, 01777) != 0 || mkdir(squat, 0755) != 0)
        fail_msg("%s: %s", squat, strerror(errno));
    snprintf(path, sizeof path, "%s/proxy.sock", squat);
    int qfd = bound_socket(path);
    assert_int_equal(chown(path, OTHER_UID, 0), 0);
    assert_int_equal(chown(squat, OTHER_UID, 0), 0);
    expect_socket_refused(svc, path, "proxy_socket_untrusted_ancestor");
    close(qfd);
    /* A mount over another user's directory in a shared one: its root may
     * claim root's ownership (a tmpfs with uid=0 plays a FUSE mount). */
    char mnt[400];
    snprintf(mnt, sizeof mnt, "%s/mounted", shared);
    if (mkdir(mnt, 0755) != 0 || chown(mnt, OTHER_UID, 0) != 0 ||
        mount("tmpfs", mnt, "tmpfs", MS_NOSUID | MS_NODEV, "uid=0,gid=0,mode=0755") != 0)
        fail_msg("%s: %s", mnt, strerror(errno));
    snprintf(path, sizeof path, "%s/proxy.sock", mnt);
    int mfd = bound_socket(path);
    expect_socket_refused(svc, path, "proxy_socket_untrusted_ancestor");
    close(mfd);
    assert_int_equal(umount2(mnt, MNT_DETACH), 0);
    /* Another user's directory higher up: they could swap what is below. */
    char theirs[300], below[400];
    snprintf(theirs, sizeof theirs, "%s/sockpath-theirs", g_top);
    snprintf(below, sizeof below, "%s/sub", theirs);
    if (mkdir(theirs, 0755) != 0 || mkdir(below, 0755) != 0)
        fail_msg("%s: %s", below, strerror(errno));
    snprintf(path, sizeof path, "%s/proxy.sock", below);
    int tfd = bound_socket(path);
    assert_int_equal(chown(theirs, OTHER_UID, 0), 0);
    expect_socket_refused(svc, path, "proxy_socket_untrusted_ancestor");
    close(tfd);
    /* A symlinked directory on the way: its target could change. */
    char real[600], alias[600];
    snprintf(real, sizeof real, "%s/sockpath-real", g_top);
    snprintf(alias, sizeof alias, "%s/sockpath-alias", g_top);
    if (mkdir(real, 0755) != 0 || symlink(real, alias) != 0)
        fail_msg("%s: %s", real, strerror(errno));
    snprintf(path, sizeof path, "%s/proxy.sock", real);
    int fd = bound_socket(path);
    snprintf(path, sizeof path, "%s/proxy.sock", alias);
    s.network.proxy_socket_path = path;
    ph_environment *env = NULL;
    ph_diag diag = {0};
    assert_int_equal(ph_environment_create(svc, &s, &env, &diag), PH_E_INVAL);
    assert_non_null(strstr(diag.message, "proxy_socket_symlink"));
    close(fd);
    /* A second name of root's socket (the container runtime's, say) in the
     * proxy user's directory or in a sticky shared one: every owner check
     * passes, so the name count refuses it (fs.protected_hardlinks=0 lets
     * any user make such a link). */
    char runtime[600], lnk_dir[600];
    snprintf(runtime, sizeof runtime, "%s/sockpath-runtime.sock", g_top);
    snprintf(lnk_dir, sizeof lnk_dir, "%s/sockpath-linked", g_top);
    int rfd = bound_socket(runtime);
    if (mkdir(lnk_dir, 0755) != 0)
        fail_msg("%s: %s", lnk_dir, strerror(errno));
    snprintf(path, sizeof path, "%s/proxy.sock", lnk_dir);
    assert_int_equal(link(runtime, path), 0);
    assert_int_equal(chown(lnk_dir, OTHER_UID, 0), 0);
    expect_socket_refused(svc, path, "proxy_socket_linked");
    assert_int_equal(chown(lnk_dir, 0, 0), 0);
    assert_int_equal(chmod(lnk_dir, 01777), 0);
    expect_socket_refused(svc, path, "proxy_socket_linked");
    /* The same socket by its one remaining name is accepted again. */
    assert_int_equal(unlink(runtime), 0);
    s.network.proxy_socket_path = path;
    env = NULL;
    if (ph_environment_create(svc, &s, &env, &diag) != PH_OK)
        fail_msg("%s: %s", path, diag.message);
    ph_environment_destroy(&env);
    close(rfd);
    assert_int_equal(entries_in(dir), 0);
    ph_execution_service_close(&svc);
}

static void test_pinned_socket_survives_a_swap(void **state)
{
    (void)state;
    /* The proxy socket checked at create is the one the runtime mounts,
     * even if its path is swapped for a directory right after the check. */
    char dir[512], sock[600], pinned[600];
    snprintf(dir, sizeof dir, "%s/pin", g_top);
    snprintf(sock, sizeof sock, "%s/pin-proxy.sock", g_top);
    snprintf(pinned, sizeof pinned, "%s/proxy.sock", dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    int listener = bound_socket(sock);
    assert_int_equal(listen(listener, 4), 0);
    struct stat orig;
    assert_int_equal(stat(sock, &orig), 0);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    ph_diag diag = {0};
    assert_int_equal(ph_state_pin_socket(fd, "proxy.sock", sock, &diag), PH_OK);
    assert_int_equal(unlink(sock), 0);
    assert_int_equal(mkdir(sock, 0777), 0); /* the swap */
    struct stat sb;
    assert_int_equal(stat(pinned, &sb), 0);
    assert_true(S_ISSOCK(sb.st_mode));
    assert_int_equal(sb.st_ino, orig.st_ino);
    int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un pa = {.sun_family = AF_UNIX};
    assert_true(strlen(pinned) < sizeof pa.sun_path);
    memcpy(pa.sun_path, pinned, strlen(pinned) + 1);
    assert_int_equal(connect(c, (struct sockaddr *)&pa, sizeof pa), 0);
    int a = accept(listener, NULL, NULL);
    assert_true(a >= 0);
    close(a);
    close(c);
    /* A directory is refused as the socket to pin. */
    assert_int_equal(ph_state_pin_socket(fd, "other.sock", sock, &diag), PH_E_INVAL);
    ph_state_unpin(fd, dir, "proxy.sock");
    assert_int_equal(entries_in(dir), 0);
    close(fd);
    close(listener);
    assert_int_equal(rmdir(sock), 0);
}

static void test_too_long_makes_nothing(void **state)
{
    (void)state;
    /* A component over NAME_MAX is refused before any missing ancestor is
     * made: the one in front of it was taken for the state directory and
     * created (0700) on the way to the error. */
    char dir[1024], made[512];
    snprintf(made, sizeof made, "%s/made", g_top);
    int n = snprintf(dir, sizeof dir, "%s/", made);
    memset(dir + n, 'x', 300);
    dir[n + 300] = '\0';
    ph_execution_service *svc = NULL;
    ph_diag diag = {0};
    assert_int_equal(open_on(dir, &svc, &diag), PH_E_LIMIT);
    assert_null(svc);
    assert_code(&diag, "state_dir_too_long");
    struct stat sb;
    assert_int_not_equal(lstat(made, &sb), 0);
}

/* Each refusal of the walk from "/" has its stable code, for the state
 * directory and the proxy socket alike. */
static void test_walk_refusal_codes(void **state)
{
    (void)state;
    char dir[512], sock[600], file[600], link[600], longc[900], dot[700], longp[4200];
    ph_execution_service *svc = open_named("codes-svc", dir);
    snprintf(sock, sizeof sock, "%s/codes.sock", g_top);
    int fd = bound_socket(sock);
    snprintf(file, sizeof file, "%s/codes.file", g_top);
    assert_int_equal(ph_test_write_file(file, "x", 1), 0);
    snprintf(link, sizeof link, "%s/codes.link", g_top);
    assert_int_equal(symlink(sock, link), 0);
    int n = snprintf(longc, sizeof longc, "%s/", g_top);
    memset(longc + n, 'x', 300);
    snprintf(longc + n + 300, sizeof longc - (size_t)n - 300, "/proxy.sock");
    snprintf(dot, sizeof dot, "%s/./codes.sock", g_top);
    const struct {
        const char *path, *code;
    } sockets[] = {
        {"proxy.sock", "proxy_socket_not_absolute"},
        {dot, "proxy_socket_not_canonical"},
        {"/nonexistent/proxy.sock", "proxy_socket_missing"},
        {longc, "proxy_socket_missing"},
        {"/", "proxy_socket_not_socket"},
        {file, "proxy_socket_not_socket"},
        {link, "proxy_socket_not_socket"},
        {sock, NULL},
    };
    for (size_t i = 0; i < sizeof sockets / sizeof sockets[0]; i++) {
        ph_diag diag = {0};
        ph_status st = ph_state_check_socket(sockets[i].path, &diag);
        if (sockets[i].code == NULL) {
            if (st != PH_OK)
                fail_msg("%s: %s", sockets[i].path, diag.message);
            continue;
        }
        assert_int_equal(st, PH_E_INVAL);
        if (strstr(diag.message, sockets[i].code) != diag.message)
            fail_msg("%s: expected %s, got: %s", sockets[i].path, sockets[i].code, diag.message);
    }
    close(fd);
    ph_execution_service_close(&svc);
    /* The state directory's own. */
    memset(longp, 'y', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    snprintf(dot, sizeof dot, "%s/../x", g_top);
    const struct {
        const char *path, *code;
        ph_status st;
    } dirs[] = {
        {"relative/state", "state_dir_not_absolute", PH_E_INVAL},
        {dot, "state_dir_dotdot", PH_E_INVAL},
        {"/", "state_dir_is_root", PH_E_INVAL},
        {"/.", "state_dir_is_root", PH_E_INVAL},
        {longp, "state_dir_too_long", PH_E_LIMIT},
        {file, "state_dir_unopenable", PH_E_IO},
    };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        ph_diag diag = {0};
        int dfd = -1;
        char *canon = NULL;
        assert_int_equal(ph_state_dir_open(dirs[i].path, &dfd, &canon, &diag), dirs[i].st);
        assert_int_equal(dfd, -1);
        assert_null(canon);
        assert_code(&diag, dirs[i].code);
    }
}

static void test_destroy_after_proxy_socket_gone(void **state)
{
    (void)state;
    /* The proxy went away (restart, removed socket) after a CLI create: the
     * environment must still be reachable, if only to destroy it; a
     * reattach that re-checked the socket left its sandbox, volume and id
     * claim behind for good. */
    char dir[512], sock[600];
    ph_execution_service *svc = open_named("gone-svc", dir);
    snprintf(sock, sizeof sock, "%s/gone-proxy.sock", g_top);
    int fd = bound_socket(sock);
    ph_environment_spec s = fake_spec();
    s.network.grant_token = "grant";
    s.network.proxy_socket_path = sock;
    ph_environment *env = NULL;
    ph_diag diag = {0};
    assert_int_equal(ph_environment_create(svc, &s, &env, &diag), PH_OK);
    assert_int_equal(ph_environment_persist_spec(env, &diag), PH_OK);
    char id[32];
    snprintf(id, sizeof id, "%s", ph_environment_id(env));
    ph_environment_detach(&env);
    close(fd);
    assert_int_equal(unlink(sock), 0);
    if (ph_environment_reattach(svc, id, &env, &diag) != PH_OK)
        fail_msg("reattach without the proxy socket: %s", diag.message);
    ph_environment_destroy(&env);
    assert_int_equal(entries_in(dir), 0);
    ph_execution_service_close(&svc);
}

int main(void)
{
    if (geteuid() != 0) {
        printf("SKIP: the hostile-state-directory test needs root (it plays the other user "
               "with chown)\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precreated_by_another_user),
        cmocka_unit_test(test_symlinked_state_dir),
        cmocka_unit_test(test_wrong_mode),
        cmocka_unit_test(test_untrusted_ancestor),
        cmocka_unit_test(test_mount_in_a_shared_dir),
        cmocka_unit_test(test_created_when_absent),
        cmocka_unit_test(test_destroy_after_proxy_socket_gone),
        cmocka_unit_test(test_too_long_makes_nothing),
        cmocka_unit_test(test_swapped_spec),
        cmocka_unit_test(test_stale_destroy_keeps_another_claim),
        cmocka_unit_test(test_two_state_dirs_never_share_an_id),
        cmocka_unit_test(test_recovery_ends_the_uids_processes),
        cmocka_unit_test(test_destroy_ends_the_uids_processes),
        cmocka_unit_test(test_state_write_never_follows),
        cmocka_unit_test(test_proxy_socket_must_be_a_socket),
        cmocka_unit_test(test_proxy_socket_path_others_can_change),
        cmocka_unit_test(test_pinned_socket_survives_a_swap),
        cmocka_unit_test(test_walk_refusal_codes),
    };
    return cmocka_run_group_tests(tests, top_setup, top_teardown);
}
