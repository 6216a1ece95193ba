/* cmd_dump.c - placeholder: policyc dump is being written. */
#include <stdio.h>

#include "commands.h"

int pc_cmd_dump(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("policyc dump: not implemented yet\n", stderr);
    return 2;
}
