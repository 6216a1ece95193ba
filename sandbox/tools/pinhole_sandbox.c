/* pinhole_sandbox.c - the pinhole-sandbox CLI: create, exec, files, read,
 * destroy and run over the ExecutionEnvironment and WorkspaceFiles ports.
 * See docs/sandbox.md for the manual. Handles live in a process, so an
 * environment made by `create` is found again by `exec` through its id in
 * the state directory (the spec is saved there, mode 0600). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pinhole/sandbox.h"
#include "pinhole/sandbox_lease.h"
#include "pinhole/version.h"
#include "pinhole/utf8.h"
#include "pinhole/workspace.h"
#include "sandbox-int.h"

/* Exit codes of the non-exec commands. */
enum { EXIT_OK = 0, EXIT_NOT_FOUND = 1, EXIT_USAGE = 2, EXIT_REFUSED = 3, EXIT_FAILURE_ = 4 };
/* exec and run exit with the command's status; these are theirs. */
enum { EXIT_TIMED_OUT = 124, EXIT_TOOL_FAILED = 125 };

#define STDIN_CAP (16 * 1024 * 1024)
#define READ_CAP (64 * 1024 * 1024)

static const char usage_text[] =
    "Usage: pinhole-sandbox [GLOBAL OPTIONS] COMMAND [OPTIONS] [-- ARGV...]\n"
    "\n"
    "Commands:\n"
    "  create [SPEC OPTIONS]              make an environment; prints its id\n"
    "  exec [EXEC OPTIONS] ID -- ARGV...  run ARGV in environment ID\n"
    "  files [--json] ID [DIR]            list a workspace directory\n"
    "  read ID PATH                       print a workspace file\n"
    "  destroy ID                         remove the environment and its workspace\n"
    "  run [SPEC OPTIONS] [EXEC OPTIONS] -- ARGV...   create, exec, destroy\n"
    "\n"
    "Global options:\n"
    "  --mechanism NAME     gvisor, docker or fake (default: $PINHOLE_SANDBOX_MECHANISM or gvisor)\n"
    "  --mode MODE          production or development (default: $PINHOLE_SANDBOX_MODE or\n"
    "                       production; production refuses docker and fake)\n"
    "  --state-dir DIR      where environments live (default: $PINHOLE_SANDBOX_STATE_DIR, else\n"
    "                       /var/lib/pinhole/sandbox as root, $XDG_STATE_HOME/pinhole/sandbox);\n"
    "                       created 0700, or refused unless it is this user's, 0700, no symlink;\n"
    "                       never pinhole-execd's (its <state>/owner names the owner)\n"
    "  --hard-cap SECONDS   the service hard cap on any command (default 600)\n"
    "  --workspace-total-max BYTES   workspace bytes all environments of the state\n"
    "                       directory may reserve (default: half its filesystem's size)\n"
    "  --workspace-tenant-max BYTES  the same for one tenant's (default: a quarter of that)\n"
    "  --json               print results as JSON\n"
    "  --help, --version\n"
    "\n"
    "Spec options (create, run):\n"
    "  --tenant T --lease L --wall-clock-ms N --output-bytes N --memory-bytes N --pids N\n"
    "  --cpu-millis N --workspace-bytes N --workspace-inodes N (default 1 GiB; 100000, at\n"
    "  most one per 4 KiB of the workspace)\n"
    "  --passthrough FILE --grant TOKEN --proxy-socket PATH --proxy-port N\n"
    "Exec options (exec, run):\n"
    "  --cwd DIR --timeout SECONDS --budget-ms N --stdin (pass this program's stdin)\n"
    "\n"
    "Exit status: exec and run exit with the command's status (128+N when killed by\n"
    "signal N, 124 when timed out, 125 when pinhole-sandbox itself failed). Other\n"
    "commands: 0 ok, 1 not found, 2 usage, 3 refused, 4 other failure.\n";

typedef struct cli {
    ph_service_config cfg;
    bool json;
    ph_environment_spec spec;
    ph_execution_command cmd;
    bool use_stdin;
} cli;

static int status_exit(ph_status st)
{
    switch (st) {
    case PH_OK: return EXIT_OK;
    case PH_E_NOT_FOUND: return EXIT_NOT_FOUND;
    case PH_E_INVAL: return EXIT_USAGE;
    case PH_E_DENIED: return EXIT_REFUSED;
    default: return EXIT_FAILURE_;
    }
}

static int fail(const char *what, ph_status st, const ph_diag *diag)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "level", "error", "module", "sandbox", "event",
                          what, "status", ph_strerror(st));
    if (o) {
        ph_json_set_bytes(o, "message", "message_base64", diag->message, strlen(diag->message));
        char *line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        fprintf(stderr, "%s\n", line ? line : "");
        free(line);
        json_decref(o);
    }
    return status_exit(st);
}

static bool parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

enum {
    OPT_MECHANISM = 256, OPT_MODE, OPT_STATE_DIR, OPT_HARD_CAP, OPT_JSON, OPT_HELP, OPT_VERSION,
    OPT_TENANT, OPT_LEASE, OPT_WALL, OPT_OUTPUT, OPT_MEMORY, OPT_PIDS, OPT_CPU, OPT_PASSTHROUGH,
    OPT_GRANT, OPT_SOCKET, OPT_PORT, OPT_CWD, OPT_TIMEOUT, OPT_BUDGET, OPT_STDIN,
    OPT_WS_BYTES, OPT_WS_INODES, OPT_WS_TOTAL, OPT_WS_TENANT,
};

static const struct option global_opts[] = {
    {"mechanism", required_argument, NULL, OPT_MECHANISM},
    {"mode", required_argument, NULL, OPT_MODE},
    {"state-dir", required_argument, NULL, OPT_STATE_DIR},
    {"hard-cap", required_argument, NULL, OPT_HARD_CAP},
    {"workspace-total-max", required_argument, NULL, OPT_WS_TOTAL},
    {"workspace-tenant-max", required_argument, NULL, OPT_WS_TENANT},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

static const struct option command_opts[] = {
    {"tenant", required_argument, NULL, OPT_TENANT},
    {"lease", required_argument, NULL, OPT_LEASE},
    {"wall-clock-ms", required_argument, NULL, OPT_WALL},
    {"output-bytes", required_argument, NULL, OPT_OUTPUT},
    {"memory-bytes", required_argument, NULL, OPT_MEMORY},
    {"pids", required_argument, NULL, OPT_PIDS},
    {"cpu-millis", required_argument, NULL, OPT_CPU},
    {"workspace-bytes", required_argument, NULL, OPT_WS_BYTES},
    {"workspace-inodes", required_argument, NULL, OPT_WS_INODES},
    {"passthrough", required_argument, NULL, OPT_PASSTHROUGH},
    {"grant", required_argument, NULL, OPT_GRANT},
    {"proxy-socket", required_argument, NULL, OPT_SOCKET},
    {"proxy-port", required_argument, NULL, OPT_PORT},
    {"cwd", required_argument, NULL, OPT_CWD},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"budget-ms", required_argument, NULL, OPT_BUDGET},
    {"stdin", no_argument, NULL, OPT_STDIN},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static int usage_error(const char *msg)
{
    fprintf(stderr, "pinhole-sandbox: %s\nTry 'pinhole-sandbox --help'.\n", msg);
    return EXIT_USAGE;
}

/* Parses command options into c; returns -1 to go on, else an exit code. */
static int parse_command_opts(cli *c, int argc, char **argv, bool spec_ok, bool exec_ok)
{
    optind = 1;
    int opt;
    while ((opt = getopt_long(argc, argv, "+", command_opts, NULL)) != -1) {
        int64_t v;
        bool spec_opt = opt >= OPT_TENANT && opt <= OPT_PORT;
        bool exec_opt = opt >= OPT_CWD && opt <= OPT_STDIN;
        if ((spec_opt && !spec_ok) || (exec_opt && !exec_ok))
            return usage_error("option not valid for this command");
        switch (opt) {
        case OPT_TENANT: c->spec.tenant = optarg; break;
        case OPT_LEASE: c->spec.lease = optarg; break;
        case OPT_PASSTHROUGH: c->spec.passthrough_file = optarg; break;
        case OPT_GRANT: c->spec.network.grant_token = optarg; break;
        case OPT_SOCKET: c->spec.network.proxy_socket_path = optarg; break;
        case OPT_CWD: c->cmd.cwd = optarg; break;
        case OPT_STDIN: c->use_stdin = true; break;
        case OPT_JSON: c->json = true; break;
        case OPT_HELP: fputs(usage_text, stdout); return EXIT_OK;
        case OPT_WALL: case OPT_OUTPUT: case OPT_MEMORY: case OPT_PIDS: case OPT_CPU:
        case OPT_PORT: case OPT_TIMEOUT: case OPT_BUDGET: case OPT_WS_BYTES: case OPT_WS_INODES:
            if (!parse_i64(optarg, opt == OPT_TIMEOUT ? INT32_MIN : 0,
                           opt == OPT_PORT ? 65535 : INT64_MAX / 1000, &v))
                return usage_error("a numeric option has a bad value");
            if (opt == OPT_WALL) c->spec.limits.wall_clock_ms = v;
            if (opt == OPT_OUTPUT) c->spec.limits.output_bytes = v;
            if (opt == OPT_MEMORY) c->spec.limits.memory_bytes = v;
            if (opt == OPT_PIDS) c->spec.limits.pids = v;
            if (opt == OPT_CPU) c->spec.limits.cpu_millis = v;
            if (opt == OPT_WS_BYTES) c->spec.limits.workspace_bytes = v;
            if (opt == OPT_WS_INODES) c->spec.limits.workspace_inodes = v;
            if (opt == OPT_PORT) c->spec.network.proxy_port = (uint16_t)v;
            if (opt == OPT_TIMEOUT) c->cmd.timeout_seconds = v;
            if (opt == OPT_BUDGET) c->cmd.run_budget_ms = v;
            break;
        default:
            return EXIT_USAGE;
        }
    }
    return -1;
}

static uint8_t *slurp_stdin(size_t *len)
{
    size_t cap = 65536;
    uint8_t *buf = malloc(cap);
    *len = 0;
    while (buf) {
        ssize_t n = read(0, buf + *len, cap - *len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n == 0 ? buf : (free(buf), NULL);
        *len += (size_t)n;
        if (*len == cap) {
            if (cap >= STDIN_CAP) {
                free(buf);
                return NULL;
            }
            uint8_t *nb = realloc(buf, cap * 2);
            if (nb == NULL)
                free(buf);
            buf = nb;
            cap *= 2;
        }
    }
    return NULL;
}

static json_t *output_json(const ph_output *o)
{
    json_t *obj = json_object();
    ph_json_set_bytes(obj, "text", "base64", o->data, o->len);
    json_object_set_new(obj, "truncated", json_boolean(o->truncated));
    return obj;
}

/* Prints s to f with control characters escaped (byte_strings.c). */
static void put_escaped(FILE *f, const char *s)
{
    char *e = ph_text_escape(s, strlen(s));
    fputs(e ? e : "?", f);
    free(e);
}

/* The reason codes of the ph_fc_gap bits in gaps. */
static json_t *gaps_json(unsigned gaps)
{
    json_t *a = json_array();
    for (unsigned bit = 1; bit && bit <= gaps; bit <<= 1)
        if (gaps & bit)
            json_array_append_new(a, json_string(ph_fc_gap_name(bit)));
    return a;
}

static int print_result(const cli *c, const ph_execution_result *r)
{
    if (c->json) {
        json_t *o = json_object();
        json_object_set_new(o, "exited", json_boolean(r->exited));
        if (r->exited)
            json_object_set_new(o, "exit_code", json_integer(r->exit_code));
        else
            json_object_set_new(o, "signal", json_integer(r->term_signal));
        json_object_set_new(o, "timed_out", json_boolean(r->timed_out));
        json_object_set_new(o, "timeout_ms", json_integer(r->timeout_ms));
        json_object_set_new(o, "timeout_bound",
                            json_string(ph_timeout_bound_code(r->timeout_bound)));
        json_object_set_new(o, "duration_ms", json_integer(r->duration_ms));
        json_object_set_new(o, "stdout", output_json(&r->out));
        json_object_set_new(o, "stderr", output_json(&r->err));
        json_t *fc = json_array();
        for (size_t i = 0; i < r->files_changed_count; i++) {
            const ph_file_change *ch = &r->files_changed[i];
            json_t *e = json_object();
            ph_json_set_bytes(e, "path", "path_base64", ch->path, strlen(ch->path));
            json_object_set_new(e, "change", json_string(ph_change_kind_name(ch->kind)));
            json_object_set_new(e, "size", json_integer((json_int_t)ch->size));
            json_array_append_new(fc, e);
        }
        json_object_set_new(o, "files_changed", fc);
        json_object_set_new(o, "files_changed_truncated",
                            json_boolean(r->files_changed_truncated));
        json_object_set_new(o, "files_changed_truncated_reasons",
                            gaps_json(r->files_changed_gaps));
        json_object_set_new(o, "workspace_full", json_boolean(r->workspace_full));
        json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        json_decref(o);
    } else {
        fwrite(r->out.data, 1, r->out.len, stdout);
        fwrite(r->err.data, 1, r->err.len, stderr);
        fflush(stdout);
        if (r->out.truncated || r->err.truncated)
            fprintf(stderr, "# output truncated at the cap\n");
        for (size_t i = 0; i < r->files_changed_count; i++) {
            fprintf(stderr, "# %s ", ph_change_kind_name(r->files_changed[i].kind));
            put_escaped(stderr, r->files_changed[i].path);
            fprintf(stderr, " (%llu bytes)\n", (unsigned long long)r->files_changed[i].size);
        }
        if (r->files_changed_truncated) {
            fprintf(stderr, "# files_changed truncated:");
            for (unsigned bit = 1; bit && bit <= r->files_changed_gaps; bit <<= 1)
                if (r->files_changed_gaps & bit)
                    fprintf(stderr, " %s", ph_fc_gap_name(bit));
            fputc('\n', stderr);
        }
        if (r->workspace_full)
            fprintf(stderr, "# workspace full: the command hit the workspace's byte or inode limit\n");
        if (r->timed_out)
            fprintf(stderr, "# timed out after %lld ms (%s)\n", (long long)r->timeout_ms,
                    ph_timeout_bound_code(r->timeout_bound));
    }
    if (r->timed_out)
        return EXIT_TIMED_OUT;
    return r->exited ? r->exit_code : 128 + r->term_signal;
}

static int do_exec(cli *c, ph_environment *env, int argc, char **argv)
{
    if (optind >= argc || strcmp(argv[optind - 1], "--") != 0) {
        usage_error("put the command's argv after '--'");
        return EXIT_TOOL_FAILED;
    }
    c->cmd.argv = (const char *const *)&argv[optind];
    uint8_t *in = NULL;
    size_t in_len = 0;
    if (c->use_stdin) {
        in = slurp_stdin(&in_len);
        if (in == NULL) {
            fprintf(stderr, "pinhole-sandbox: cannot read stdin (cap %d bytes)\n", STDIN_CAP);
            return EXIT_TOOL_FAILED;
        }
        c->cmd.stdin_data = in;
        c->cmd.stdin_len = in_len;
    }
    ph_execution_result *r = NULL;
    ph_diag diag = {0};
    ph_status st = ph_environment_execute(env, &c->cmd, &r, &diag);
    free(in);
    if (st != PH_OK) {
        fail("execute_failed", st, &diag);
        return EXIT_TOOL_FAILED;
    }
    int rc = print_result(c, r);
    ph_execution_result_free(&r);
    return rc;
}

static int do_files(cli *c, ph_environment *env, const char *dir)
{
    ph_workspace *ws = NULL;
    ph_ws_list *list = NULL;
    ph_diag diag = {0};
    ph_status st = ph_environment_workspace(env, &ws, &diag);
    if (st == PH_OK)
        st = ph_workspace_list(ws, dir ? dir : ".", 100000, &list, &diag);
    ph_workspace_close(&ws);
    if (st != PH_OK)
        return fail("list_failed", st, &diag);
    json_t *arr = c->json ? json_array() : NULL;
    for (size_t i = 0; i < list->count; i++) {
        const ph_ws_entry *e = &list->entries[i];
        if (arr) {
            json_t *o = json_object();
            ph_json_set_bytes(o, "name", "name_base64", e->name, strlen(e->name));
            json_object_set_new(o, "type", json_string(ph_ws_file_type_name(e->st.type)));
            json_object_set_new(o, "size", json_integer((json_int_t)e->st.size));
            json_object_set_new(o, "mtime", json_integer((json_int_t)e->st.mtime_sec));
            json_object_set_new(o, "mode", json_integer((json_int_t)e->st.mode));
            json_array_append_new(arr, o);
        } else {
            printf("%-7s %04o %10llu ", ph_ws_file_type_name(e->st.type), e->st.mode,
                   (unsigned long long)e->st.size);
            put_escaped(stdout, e->name);
            putchar('\n');
        }
    }
    if (arr) {
        json_t *o = json_pack("{s:o, s:b}", "entries", arr, "truncated", list->truncated);
        json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        json_decref(o);
    } else if (list->truncated) {
        fprintf(stderr, "# listing truncated\n");
    }
    ph_ws_list_free(&list);
    return EXIT_OK;
}

static int do_read(cli *c, ph_environment *env, const char *path)
{
    ph_workspace *ws = NULL;
    uint8_t *data = NULL;
    size_t len = 0;
    ph_diag diag = {0};
    ph_status st = ph_environment_workspace(env, &ws, &diag);
    if (st == PH_OK)
        st = ph_workspace_read(ws, path, READ_CAP, &data, &len, &diag);
    ph_workspace_close(&ws);
    if (st != PH_OK)
        return fail("read_failed", st, &diag);
    if (c->json) {
        ph_output o = {.data = data, .len = len};
        json_t *obj = json_object();
        ph_json_set_bytes(obj, "path", "path_base64", path, strlen(path));
        json_object_set_new(obj, "size", json_integer((json_int_t)len));
        json_object_set_new(obj, "content", output_json(&o));
        json_dumpf(obj, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
        json_decref(obj);
    } else {
        fwrite(data, 1, len, stdout);
    }
    free(data);
    return EXIT_OK;
}

static int print_id(const cli *c, const char *id)
{
    if (c->json)
        printf("{\"environment\": \"%s\"}\n", id); /* id is [a-z0-9-] */
    else
        printf("%s\n", id);
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    cli c;
    memset(&c, 0, sizeof c);
    c.cfg.mode = PH_SERVICE_MODE_PRODUCTION;
    c.cfg.mechanism = PH_MECHANISM_GVISOR;
    c.cfg.hard_cap_ms = 600 * 1000;
    c.cfg.state_dir = getenv("PINHOLE_SANDBOX_STATE_DIR");
    ph_diag diag = {0};
    const char *env_mech = getenv("PINHOLE_SANDBOX_MECHANISM");
    const char *env_mode = getenv("PINHOLE_SANDBOX_MODE");
    if (env_mech && ph_sandbox_mechanism_from_name(env_mech, &c.cfg.mechanism, &diag) != PH_OK)
        return usage_error(diag.message);
    if (env_mode && ph_service_mode_from_name(env_mode, &c.cfg.mode, &diag) != PH_OK)
        return usage_error(diag.message);
    int opt;
    while ((opt = getopt_long(argc, argv, "+", global_opts, NULL)) != -1) {
        int64_t v;
        switch (opt) {
        case OPT_MECHANISM:
            if (ph_sandbox_mechanism_from_name(optarg, &c.cfg.mechanism, &diag) != PH_OK)
                return usage_error(diag.message);
            break;
        case OPT_MODE:
            if (ph_service_mode_from_name(optarg, &c.cfg.mode, &diag) != PH_OK)
                return usage_error(diag.message);
            break;
        case OPT_STATE_DIR: c.cfg.state_dir = optarg; break;
        case OPT_HARD_CAP:
            if (!parse_i64(optarg, 1, 86400, &v))
                return usage_error("--hard-cap takes 1..86400 seconds");
            c.cfg.hard_cap_ms = v * 1000;
            break;
        case OPT_WS_TOTAL:
        case OPT_WS_TENANT:
            if (!parse_i64(optarg, 1, INT64_MAX, &v))
                return usage_error("--workspace-total-max and --workspace-tenant-max take a "
                                   "number of bytes > 0");
            *(opt == OPT_WS_TOTAL ? &c.cfg.workspace_total_max_bytes
                                  : &c.cfg.workspace_tenant_max_bytes) = (uint64_t)v;
            break;
        case OPT_JSON: c.json = true; break;
        case OPT_HELP: fputs(usage_text, stdout); return EXIT_OK;
        case OPT_VERSION: printf("pinhole-sandbox %s\n", ph_version()); return EXIT_OK;
        default: return EXIT_USAGE;
        }
    }
    if (optind >= argc)
        return usage_error("no command given");
    const char *command = argv[optind];
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    bool is_exec = strcmp(command, "exec") == 0, is_run = strcmp(command, "run") == 0;
    bool is_create = strcmp(command, "create") == 0;
    if (!is_exec && !is_run && !is_create && strcmp(command, "files") != 0 &&
        strcmp(command, "read") != 0 && strcmp(command, "destroy") != 0)
        return usage_error("unknown command");

    c.spec.tenant = "cli";
    c.spec.lease = "cli";
    c.spec.mechanism = c.cfg.mechanism;
    ph_sandbox_limits_init(&c.spec.limits);
    c.cmd.timeout_seconds = PH_SANDBOX_UNSET;
    c.cmd.run_budget_ms = PH_SANDBOX_UNSET;
    int rc = parse_command_opts(&c, sub_argc, sub_argv, is_create || is_run, is_exec || is_run);
    if (rc >= 0)
        return rc;
    int tool_fail = (is_exec || is_run) ? EXIT_TOOL_FAILED : -1;

    ph_execution_service *svc = NULL;
    ph_status st = ph_execution_service_open(&c.cfg, &svc, &diag);
    if (st != PH_OK) {
        rc = fail("startup_refused", st, &diag);
        return tool_fail >= 0 ? tool_fail : rc;
    }
    /* Environments outlive this process: never in pinhole-execd's state
     * directory, whose start destroys every environment there. */
    if ((st = ph_execution_service_claim_for_cli(svc, &diag)) != PH_OK) {
        ph_execution_service_close(&svc);
        rc = fail(strncmp(diag.message, "state_dir_owned:", 16) == 0 ? "state_dir_owned"
                                                                      : "startup_refused",
                  st, &diag);
        return tool_fail >= 0 ? tool_fail : rc;
    }
    ph_environment *env = NULL;
    if (is_create || is_run) {
        if (optind != sub_argc && !(is_run && strcmp(sub_argv[optind - 1], "--") == 0)) {
            ph_execution_service_close(&svc);
            return is_run ? (usage_error("put the command's argv after '--'"), EXIT_TOOL_FAILED)
                          : usage_error("create takes no operands");
        }
        st = ph_environment_create(svc, &c.spec, &env, &diag);
        if (st == PH_OK && is_create)
            st = ph_environment_persist_spec(env, &diag);
        if (st != PH_OK) {
            ph_environment_destroy(&env);
            ph_execution_service_close(&svc);
            rc = fail("create_failed", st, &diag);
            return tool_fail >= 0 ? tool_fail : rc;
        }
        if (is_create) {
            rc = print_id(&c, ph_environment_id(env));
            ph_environment_detach(&env);
        } else {
            rc = do_exec(&c, env, sub_argc, sub_argv);
            ph_environment_destroy(&env);
        }
        ph_execution_service_close(&svc);
        return rc;
    }

    if (optind >= sub_argc) {
        ph_execution_service_close(&svc);
        rc = usage_error("missing environment id");
        return tool_fail >= 0 ? tool_fail : rc;
    }
    const char *id = sub_argv[optind++];
    st = ph_environment_reattach(svc, id, &env, &diag);
    if (st != PH_OK) {
        ph_execution_service_close(&svc);
        rc = fail("environment_not_found", st, &diag);
        return tool_fail >= 0 ? tool_fail : rc;
    }
    if (is_exec) {
        if (optind < sub_argc && strcmp(sub_argv[optind], "--") == 0)
            optind++;
        else
            optind = sub_argc + 1; /* makes do_exec report the missing "--" */
        rc = optind > sub_argc ? (usage_error("put the command's argv after '--'"),
                                  EXIT_TOOL_FAILED)
                               : do_exec(&c, env, sub_argc, sub_argv);
        ph_environment_detach(&env);
    } else if (strcmp(command, "files") == 0) {
        rc = optind + 1 < sub_argc ? usage_error("files takes ID [DIR]")
                                   : do_files(&c, env, optind < sub_argc ? sub_argv[optind] : NULL);
        ph_environment_detach(&env);
    } else if (strcmp(command, "read") == 0) {
        rc = optind + 1 != sub_argc ? usage_error("read takes ID PATH")
                                    : do_read(&c, env, sub_argv[optind]);
        ph_environment_detach(&env);
    } else {
        rc = optind != sub_argc ? usage_error("destroy takes ID") : EXIT_OK;
        if (rc == EXIT_OK) {
            ph_environment_destroy(&env);
            if (!c.json)
                printf("destroyed %s\n", id);
            else
                printf("{\"destroyed\": \"%s\"}\n", id);
        } else {
            ph_environment_detach(&env);
        }
    }
    ph_execution_service_close(&svc);
    return rc;
}
