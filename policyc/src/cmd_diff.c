/* cmd_diff.c - placeholder: policyc diff is being written. */
#include <stdio.h>

#include "commands.h"

int pc_cmd_diff(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("policyc diff: not implemented yet\n", stderr);
    return 2;
}
