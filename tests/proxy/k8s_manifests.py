"""k8s_manifests.py - the Kubernetes manifests of examples/kubernetes/
(docs/deploy.md, Kubernetes) parse as YAML (Debian's python3-yaml; no API
server runs here) and say what the docs say they say: a RuntimeClass gvisor
with handler runsc; the proxy as a Deployment and a Service, its settings
(every key a pinhole-proxy option) and its table in ConfigMaps, its grant
keys in a Secret mounted 0400; sandbox pods under gvisor whose only egress
is the proxy's port; agent-sandbox's SandboxTemplate, SandboxWarmPool and
SandboxClaim, no claim carrying an environment. docs/deploy.md names every
file.
Usage: k8s_manifests.py SOURCE_DIR PINHOLE_PROXY"""
import glob
import os
import re
import subprocess
import sys

import yaml

src, proxy = sys.argv[1], sys.argv[2]
FAILS = []


def check(name, cond, detail=""):
    print(("ok - " if cond else "FAIL - ") + name + ("" if cond else ": %s" % detail))
    if not cond:
        FAILS.append(name)


files = sorted(glob.glob(os.path.join(src, "examples/kubernetes/*.yaml")))
docs = {}
for f in files:
    try:
        objs = [d for d in yaml.safe_load_all(open(f)) if d is not None]
    except yaml.YAMLError as e:
        check("%s parses" % os.path.basename(f), False, e)
        continue
    check("%s parses (%d objects)" % (os.path.basename(f), len(objs)), len(objs) > 0)
    for o in objs:
        ok = isinstance(o, dict) and o.get("apiVersion") and o.get("kind") and \
            o.get("metadata", {}).get("name")
        check("%s: %s has apiVersion, kind, name" % (os.path.basename(f), o.get("kind")), ok, o)
        docs.setdefault(o["kind"], []).append(o)

one = lambda kind: (docs.get(kind) or [{}])[0]
rc = one("RuntimeClass")
check("RuntimeClass gvisor, handler runsc", rc.get("metadata", {}).get("name") == "gvisor"
      and rc.get("handler") == "runsc", rc)

dep = [d for d in docs.get("Deployment", []) if d["metadata"]["name"] == "pinhole-proxy"]
check("the proxy is a Deployment", len(dep) == 1)
pod = dep[0]["spec"]["template"]["spec"] if dep else {}
vols = {v["name"]: v for v in pod.get("volumes", [])}
secret_vols = [v for v in vols.values() if "secret" in v]
check("grant keys from a Secret, mounted 0400", len(secret_vols) == 1
      and secret_vols[0]["secret"].get("defaultMode") == 0o400, secret_vols)
check("the Secret exists", any(s["metadata"]["name"] == secret_vols[0]["secret"]["secretName"]
                               for s in docs.get("Secret", [])) if secret_vols else False)
table = [v for v in vols.values() if v.get("configMap", {}).get("name", "").startswith("pinhole-table-")]
check("the table from a ConfigMap named by its policy id",
      len(table) == 1 and re.fullmatch(r"pinhole-table-[0-9a-f]{12}", table[0]["configMap"]["name"]),
      table)
svc = one("Service")
check("a Service selects the proxy pods", svc.get("spec", {}).get("selector") ==
      dep[0]["spec"]["selector"]["matchLabels"] if dep else False, svc)

settings = [c for c in docs.get("ConfigMap", []) if c["metadata"]["name"] == "pinhole-proxy-settings"]
help_text = subprocess.run([proxy, "--help"], capture_output=True, text=True).stdout
options = set(re.findall(r"--([a-z0-9-]+)", help_text))
if settings:
    conf = yaml.safe_load(settings[0]["data"]["proxy.yaml"])
    unknown = [k for k in conf if k.replace("_", "-") not in options]
    check("every proxy setting is a pinhole-proxy option", not unknown and len(conf) > 3, unknown)
    commented = re.findall(r"#\s*([a-z_]+):", settings[0]["data"]["proxy.yaml"])
    check("commented settings are options too",
          all(k.replace("_", "-") in options for k in commented), commented)
else:
    check("the proxy's settings ConfigMap", False)

tmpl = one("SandboxTemplate")
tpod = tmpl.get("spec", {}).get("podTemplate", {}).get("spec", {})
check("sandbox pods run under gvisor", tpod.get("runtimeClassName") == "gvisor", tpod)
check("sandbox pods get no service account token", tpod.get("automountServiceAccountToken") is False)
check("a claim may carry no environment",
      tmpl.get("spec", {}).get("envVarsInjectionPolicy") == "Disallowed", tmpl.get("spec"))
pool = one("SandboxWarmPool")
check("a warm pool of the template", pool.get("spec", {}).get("sandboxTemplateRef", {}).get("name")
      == tmpl.get("metadata", {}).get("name"), pool)
for c in docs.get("SandboxClaim", []):
    check("claim %s: no env (a cold start, and the grant in the API server)" % c["metadata"]["name"],
          "env" not in c["spec"] and c["spec"]["sandboxTemplateRef"]["name"] == tmpl["metadata"]["name"],
          c["spec"])
for kind in ("SandboxTemplate", "SandboxWarmPool", "SandboxClaim"):
    check("%s in extensions.agents.x-k8s.io" % kind,
          one(kind).get("apiVersion", "").startswith("extensions.agents.x-k8s.io/"))

sbx_ns = tmpl.get("metadata", {}).get("namespace")
pols = [p for p in docs.get("NetworkPolicy", []) if p["metadata"].get("namespace") == sbx_ns]
check("one NetworkPolicy over every sandbox pod", len(pols) == 1 and pols[0]["spec"]["podSelector"] == {}
      and set(pols[0]["spec"]["policyTypes"]) == {"Ingress", "Egress"}, pols)
if pols:
    eg = pols[0]["spec"].get("egress", [])
    proxy_port = dep[0]["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] if dep else None
    ok = len(eg) == 1 and len(eg[0].get("to", [])) == 1 and "ipBlock" not in eg[0]["to"][0] \
        and eg[0]["to"][0].get("podSelector", {}).get("matchLabels") == dep[0]["spec"]["selector"]["matchLabels"] \
        and eg[0].get("ports") == [{"protocol": "TCP", "port": proxy_port}]
    check("sandbox egress: the proxy pods' port and nothing else", ok, eg)
    check("nothing connects to a sandbox", pols[0]["spec"].get("ingress") == [], pols[0]["spec"])

deploy = open(os.path.join(src, "docs/deploy.md")).read()
for f in files:
    rel = "examples/kubernetes/" + os.path.basename(f)
    check("docs/deploy.md names %s" % rel, rel in deploy)

print("%d failure(s)" % len(FAILS) if FAILS else "all passed")
sys.exit(1 if FAILS else 0)
