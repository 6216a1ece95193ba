/* cmd_test.c - placeholder: policyc test is being written. */
#include <stdio.h>

#include "commands.h"

int pc_cmd_test(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("policyc test: not implemented yet\n", stderr);
    return 2;
}
