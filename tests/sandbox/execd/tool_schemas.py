#!/usr/bin/python3
"""execd.tool_schemas - the builtin tools' JSON schemas (sandbox/schemas/)
against pinhole-execd: model inputs the schema accepts run through the
service, the ones it refuses are the shapes the ADR forbids (a shell string,
a host path, '..'), and every result the service returns for them, including
non-UTF-8 output and file names, validates against run_command's
output_schema.

    tool_schemas.py PINHOLE-EXECD SOURCE-DIR
Exit 77 when python3-jsonschema is missing."""
import json
import os
import sys
import tempfile

import execd_testlib
from pinhole.execd import Client

try:
    import jsonschema
except ImportError:
    print("SKIP: python3-jsonschema is not installed")
    sys.exit(77)

execd, src = sys.argv[1], sys.argv[2]
run = json.load(open(os.path.join(src, "sandbox/schemas/sandbox.run_command.json")))
export = json.load(open(os.path.join(src, "sandbox/schemas/artifact.export.json")))
V = jsonschema.Draft202012Validator
for doc in (run, export):
    V.check_schema(doc["input_schema"])
    V.check_schema(doc["output_schema"])
run_in, run_out = V(run["input_schema"]), V(run["output_schema"])
exp_in, exp_out = V(export["input_schema"]), V(export["output_schema"])


failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


with tempfile.TemporaryDirectory() as tmp:
    daemon, sock_path = execd_testlib.start_daemon(execd, tmp)
    c = Client.unix(sock_path)
    env = c.create("t1", "l1")

    accepted = [
        {"argv": ["true"]},
        {"argv": ["sh", "-c", "echo hi; printf '\\377' >&2; printf x > \"$(printf 'bad\\377')\";"
                  " mkdir -p sub; echo y > sub/ok.txt"]},
        {"argv": ["sleep", "5"], "timeout_seconds": 1},
        {"argv": ["pwd"], "cwd": "sub"},
        {"argv": ["cat"], "stdin": "piped \u00e9\n"},
        {"argv": ["sh", "-c", "exit 3"]},
    ]
    for tool_input in accepted:
        errs = list(run_in.iter_errors(tool_input))
        expect(not errs, "input refused: %s %s" % (tool_input, [e.message for e in errs]))
        req = {"op": "environment.execute", "tenant": "t1", "environment": env,
               "argv": tool_input["argv"]}
        for k in ("cwd", "timeout_seconds"):
            if k in tool_input:
                req[k] = tool_input[k]
        if "stdin" in tool_input:
            req["stdin"] = tool_input["stdin"]
        c.send(req)  # raw: the result exactly as the service sends it
        resp = c.recv()
        expect(resp.get("ok"), "execute %s: %s" % (tool_input, resp))
        result = resp.get("result", {})
        errs = list(run_out.iter_errors(result))
        expect(not errs, "result does not fit output_schema: %s %s"
               % (result, [e.message for e in errs]))
        if tool_input["argv"][0] == "sh" and "bad" in tool_input["argv"][2]:
            expect("stderr_base64" in result, "non-UTF-8 stderr carried as base64")
            expect(any("path_base64" in c for c in result["files_changed"]),
                   "non-UTF-8 name carried as path_base64")
        if tool_input.get("timeout_seconds") == 1:
            expect(result["timed_out"] and result["timeout_bound"] == "model",
                   "the model's timeout bound the command")

    refused = [
        {"argv": "ls -l /"},                      # a shell string
        {"argv": []},
        {"argv": ["ls"], "cwd": "/etc"},          # a host path
        {"argv": ["ls"], "cwd": "../.."},
        {"argv": ["ls"], "shell": True},
        {"argv": ["ls"], "timeout_seconds": 0},
    ]
    for tool_input in refused:
        expect(not run_in.is_valid(tool_input), "input accepted: %s" % tool_input)

    expect(exp_in.is_valid({"path": "out/report.txt", "filename": "Report.txt",
                            "content_type": "text/plain; charset=utf-8"}), "export input")
    for bad in ({"path": "/etc/passwd"}, {"path": "a/../../b"}, {"path": ""},
                {"filename": "x"}, {"path": "a", "tenant": "t2"}):
        expect(not exp_in.is_valid(bad), "export input accepted: %s" % bad)
    expect(exp_out.is_valid({"artifact_id": "0123456789abcdef0123456789abcdef",
                             "filename": "report.txt", "content_type": "text/plain",
                             "size": 516, "sha256": "ab" * 32, "expires_at": 1767225600}),
           "export output")
    c.destroy("t1", env)
    c.close()
    expect(execd_testlib.stop_daemon(daemon) == 0, "pinhole-execd stopped cleanly")

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
