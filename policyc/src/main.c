/* main.c - policyc: validate allowlists and compile them into tables. */
#include <stdio.h>
#include <string.h>

#include "pinhole/version.h"
#include "commands.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"check", pc_cmd_check, "validate allowlists, reporting every error"},
    {"compile", pc_cmd_compile, "compile an allowlist into a table"},
    {"explain", pc_cmd_explain, "show the verdict and the rule for HOST:PORT"},
    {"test", pc_cmd_test, "check expectations (CASES.yaml) against a policy"},
    {"dump", pc_cmd_dump, "print a table's canonical policy as YAML"},
    {"diff", pc_cmd_diff, "destinations added and removed between two policies"},
    {"fleet-status", pc_cmd_fleet_status, "which policy each pinhole-proxy serves; 0 once all agree"},
    {"replay", pc_cmd_replay, "decide logged connections again on a new table"},
};

static void usage(FILE *out)
{
    fputs("Usage: policyc COMMAND [OPTIONS] ARGS...\n\nCommands:\n", out);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fputs("\nRun 'policyc COMMAND --help' for a command's options.\n"
          "Exit status: 0 success, 1 invalid policy or failed check (fleet-status: not\n"
          "converged), 2 usage or I/O error.\n",
          out);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("policyc %s\n", ph_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "policyc: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
