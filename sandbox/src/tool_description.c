/* tool_description.c - what the model is told about sandbox.run_command.
 * Decision 1 makes the workspace a cache; a model that is not told so will
 * treat it as durable, and no retry logic repairs that (ADR consequences). */
#include "pinhole/sandbox.h"

const char ph_sandbox_tool_description[] =
    "Runs one program in an isolated sandbox and returns its exit status, its "
    "output and the files it changed. Pass the program and its arguments as a "
    "list (argv); no shell is involved unless you run one yourself, e.g. "
    "[\"sh\", \"-c\", \"...\"]. The working directory is /workspace or a "
    "directory under it.\n"
    "The workspace is NOT durable. It is a scratch area that exists only while "
    "this run holds its worker: it may be emptied when the run waits a long "
    "time for an approval, and a resumed run always starts with an empty "
    "workspace. Anything you need to keep must be exported as an artifact "
    "(artifact.export) before the run ends.\n"
    "Commands have no network unless network access was approved; then only the "
    "allowlisted destinations are reachable, through the configured proxy. "
    "timeout_seconds can shorten the time limit, never lengthen it.";
