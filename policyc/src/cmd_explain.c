/* cmd_explain.c - placeholder: policyc explain is being written. */
#include <stdio.h>

#include "commands.h"

int pc_cmd_explain(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("policyc explain: not implemented yet\n", stderr);
    return 2;
}
