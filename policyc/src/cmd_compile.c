/* cmd_compile.c - placeholder: policyc compile is being written. */
#include <stdio.h>

#include "commands.h"

int pc_cmd_compile(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("policyc compile: not implemented yet\n", stderr);
    return 2;
}
