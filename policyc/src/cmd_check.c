/* cmd_check.c - placeholder: policyc check is being written. */
#include <stdio.h>

#include "commands.h"

int pc_cmd_check(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("policyc check: not implemented yet\n", stderr);
    return 2;
}
