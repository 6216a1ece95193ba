/*
 * commands.h - policyc's subcommands. Each takes the arguments after the
 * subcommand name (argv[0] is the subcommand) and returns the process exit
 * code: 0 success, 1 the policy is invalid / a check or expectation failed /
 * a destination is denied, 2 usage, I/O or internal error.
 */
#ifndef POLICYC_COMMANDS_H
#define POLICYC_COMMANDS_H

int pc_cmd_check(int argc, char **argv);
int pc_cmd_compile(int argc, char **argv);
int pc_cmd_explain(int argc, char **argv);
int pc_cmd_test(int argc, char **argv);
int pc_cmd_dump(int argc, char **argv);
int pc_cmd_diff(int argc, char **argv);
/* 0 converged, 1 not converged, 2 usage error (cmd_fleet_status.c). */
int pc_cmd_fleet_status(int argc, char **argv);
int pc_cmd_replay(int argc, char **argv);

#endif
