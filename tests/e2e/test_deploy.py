"""The files under deploy/, run or checked as a user would use them.

deploy/local-replicas is run with the command docs/deploy.md shows (its
model, port and binary substituted): the documented request and two-turn
conversations go through sglang-router, each conversation's turns land on
one replica (its second turn reports cached prompt tokens), and a SIGTERM,
a Ctrl-C (SIGINT to the script's process group) or a SIGKILL of the script
leaves no replica or router running. Bad options, a missing or unreadable
model, a router that refuses its options and a busy port each give one
line on stderr and a non-zero exit.

deploy/k8s/*.yaml: the built-in kinds validate against the Kubernetes
OpenAPI schemas (kubernetes-validate, strict, oldest and newest version it
ships); the InferencePool has what its v1 API (inference.networking.k8s.io)
requires; the objects refer to each other consistently (selectors, named
ports, RBAC, the router's discovery flags); and a real `pasada serve`
started with the Deployment's arguments accepts every flag, answers the
probes' paths, serves under /metrics the names the manifests and
docs/deploy.md mention, and drains within the Pod's grace period."""
import copy
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import requests

from conftest import ROOT, SMOLLM2
from test_router import PROTOCOL, _free_port, samples, types_of, wait_for
from test_server import Server, chat_msgs

SCRIPT = ROOT / "deploy" / "local-replicas"
K8S = ROOT / "deploy" / "k8s"
DOC = ROOT / "docs" / "deploy.md"
STOP_BOUND = 15  # seconds: replicas drain 2 s (--drain-delay 2), then stop
CHATS = 'pasada_requests_total{endpoint="/v1/chat/completions",status="200"}'


# ---- deploy/local-replicas ----

def doc_example():
    """The local-replicas command and the curl request of docs/deploy.md's
    "On one machine" block, each as an argument list."""
    text = DOC.read_text().split("## On one machine", 1)[1]
    block = text.split("```", 2)[1].replace("\\\n", " ")
    lines = [line.strip() for line in block.splitlines()]
    cmd = next(shlex.split(line) for line in lines if line.startswith("deploy/local-replicas"))
    curl = next(shlex.split(line) for line in lines if line.startswith("curl "))
    return cmd, curl


def free_port_range(n):
    """A port P with P..P+n all free on loopback."""
    for _ in range(50):
        base = _free_port()
        if base + n > 65535:
            continue
        try:
            for p in range(base, base + n + 1):
                with socket.socket() as so:
                    so.bind(("127.0.0.1", p))
        except OSError:
            continue
        return base
    raise AssertionError(f"no {n + 1} consecutive free ports")


def refused(port):
    with socket.socket() as so:
        so.settimeout(2)
        return so.connect_ex(("127.0.0.1", port)) != 0


def _stat(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def descendants(pid):
    """Every process below pid, found through /proc's parent links."""
    kids = {}
    for d in os.listdir("/proc"):
        st = _stat(d) if d.isdigit() else None
        if st:
            kids.setdefault(int(st[1]), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def alive(pid):
    st = _stat(pid)
    return st is not None and st[0] not in "ZX"


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class LocalReplicas:
    """deploy/local-replicas ARGS in a session of its own (so SIGINT to its
    process group is a terminal's Ctrl-C); up once it prints where the
    router listens, with its replicas and router recorded."""

    def __init__(self, args, log_dir, replicas):
        env = dict(os.environ, LOG_DIR=str(log_dir), PYTHON=sys.executable)
        self.log_dir = log_dir
        self.proc = subprocess.Popen([str(SCRIPT), *map(str, args)], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     errors="replace", env=env, start_new_session=True)
        self.lines = []
        threading.Thread(target=self._read, daemon=True).start()
        self.children = {}
        try:
            wait_for(lambda: self.proc.poll() is not None or "behind sglang-router" in self.stderr,
                     timeout=90, what="local-replicas to start")
            assert self.proc.poll() is None, self.stderr
            self.children = {p: cmdline(p) for p in descendants(self.proc.pid)}
            serving = [c for c in self.children.values() if " serve " in c]
            routers = [c for c in self.children.values() if "sglang" in c]
            assert len(serving) == replicas and len(routers) == 1, self.children
        except BaseException:
            self.kill()
            raise

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line)

    @property
    def stderr(self):
        return "".join(self.lines)

    def log(self, name):
        return (self.log_dir / name).read_text(errors="replace")

    def left(self):
        return {p: c for p, c in self.children.items() if alive(p)}

    def kill(self):
        """Clean-up after a failure: SIGKILL to what this test started."""
        for p in [self.proc.pid, *self.children]:
            if alive(p):
                os.kill(p, signal.SIGKILL)
        self.proc.wait(10)


def replica_chats(url):
    return samples(requests.get(url + "/metrics", timeout=10).text).get(CHATS, 0)


@pytest.fixture(scope="module")
def sglang():
    pytest.importorskip("sglang_router", reason="sglang-router is not installed "
                        "(scripts/setup-deps puts it in the test venv)")


def test_local_replicas_as_documented(sglang, pasada_bin, smollm2, tmp_path):
    import openai
    cmd, curl = doc_example()
    args = cmd[1:]
    assert cmd[0] == "deploy/local-replicas" and args[args.index("-m") + 1].endswith(SMOLLM2.name)
    n = int(args[args.index("-n") + 1])
    doc_port = args[args.index("--port") + 1]
    base = free_port_range(n)
    args[args.index("-m") + 1] = smollm2
    args[args.index("--port") + 1] = base
    args[args.index("--"):args.index("--")] = ["--bin", pasada_bin]
    lr = LocalReplicas(args, tmp_path / "logs", n)
    try:
        router = f"http://127.0.0.1:{base}"
        replicas = [f"http://127.0.0.1:{base + i}" for i in range(1, n + 1)]
        for u in replicas:  # PORT+1..PORT+N, each ready
            assert requests.get(u + "/ready", timeout=10).status_code == 200

        # the documented request, sent where the documented port stands
        url = curl[1]
        assert url.startswith(f"http://127.0.0.1:{doc_port}/")
        body = json.loads(curl[curl.index("-d") + 1])
        r = requests.post(url.replace(f":{doc_port}/", f":{base}/"), json=body, timeout=120)
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["message"]["content"]

        # two-turn conversations: both turns on one replica, the second
        # finding the first's prompt in that replica's prefix cache
        client = openai.OpenAI(base_url=router + "/v1", api_key="unused", max_retries=0,
                               timeout=120)
        for topic in ("a red kite", "a lost key", "a quiet harbour"):
            msgs = chat_msgs(f"Write one sentence about {topic}.")
            served = []
            for turn in range(2):
                before = [replica_chats(u) for u in replicas]
                out = client.chat.completions.create(model="m", messages=msgs, max_tokens=8,
                                                     temperature=0)

                def counted():
                    d = [replica_chats(u) - b for u, b in zip(replicas, before)]
                    return d if sum(d) == 1 else None
                served.append(wait_for(counted, timeout=10, what="the request counted").index(1))
                if turn == 0:
                    first = out.usage.prompt_tokens
                    msgs += [{"role": "assistant", "content": out.choices[0].message.content},
                             {"role": "user", "content": "And one more, please."}]
            assert served[0] == served[1], (topic, served)
            cached = out.usage.prompt_tokens_details.cached_tokens
            assert cached >= min(16, first), (topic, cached, first)
    except BaseException:
        lr.kill()
        raise
    t0 = time.time()
    lr.proc.send_signal(signal.SIGTERM)
    assert lr.proc.wait(STOP_BOUND) == 0, lr.stderr
    assert lr.left() == {}, f"still running after local-replicas exited: {lr.left()}"
    assert time.time() - t0 < STOP_BOUND
    for i in range(1, n + 1):  # drained in order, not killed
        log = lr.log(f"replica-{i}.log")
        assert "SIGTERM: draining for 2 s" in log and "stopped" in log, log
    assert all(refused(p) for p in range(base, base + n + 1))


@pytest.mark.parametrize("how", ["ctrl-c", "sigkill"])
def test_local_replicas_leave_nothing_running(sglang, pasada_bin, smollm2, tmp_path, how):
    """Ctrl-C: the script stops every replica (each drains on SIGTERM) and
    the router, then exits 0. SIGKILL of the script itself: with setpriv,
    the replicas and the router get SIGTERM from the kernel and stop."""
    if how == "sigkill" and not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) is not installed")
    base = free_port_range(2)
    lr = LocalReplicas(["-m", smollm2, "-n", 2, "--port", base, "--bin", pasada_bin, "--",
                        "--parallel", 2, "--kv-memory", 64], tmp_path / "logs", 2)
    t0 = time.time()
    try:
        if how == "ctrl-c":
            os.killpg(lr.proc.pid, signal.SIGINT)
            assert lr.proc.wait(STOP_BOUND) == 0, lr.stderr
            assert lr.left() == {}, f"still running after local-replicas exited: {lr.left()}"
        else:
            lr.proc.kill()
            lr.proc.wait(10)
            wait_for(lambda: not lr.left(), timeout=STOP_BOUND,
                     what=f"the orphans to stop: {lr.left()}")
    except BaseException:
        lr.kill()
        raise
    assert time.time() - t0 < STOP_BOUND
    for i in (1, 2):
        log = lr.log(f"replica-{i}.log")
        assert "SIGTERM: draining" in log and "stopped" in log, log
    assert all(refused(p) for p in range(base, base + 3))


def run_script(args, timeout=60):
    env = dict(os.environ, PYTHON=sys.executable)
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def assert_script_error(res, status, *words):
    where = f"exit {res.returncode}, stderr:\n{res.stderr}"
    assert res.returncode == status, where
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("local-replicas: "), where
    for w in words:
        assert w in lines[0], where


def test_local_replicas_help():
    res = run_script(["--help"])
    assert res.returncode == 0 and res.stderr == ""
    assert "deploy/local-replicas -m MODEL" in res.stdout and "Exit status" in res.stdout
    assert not re.search(r"^(set |#)", res.stdout, re.M), res.stdout  # the comment block only


@pytest.mark.parametrize("args,words", [
    (["--bogus"], ["unknown option --bogus"]),
    (["-m"], ["-m needs a value"]),
    ([], ["a model is required"]),
    (["-m", "MODEL", "-n", "0"], ["-n", "'0'"]),
    (["-m", "MODEL", "--threads", "two"], ["--threads", "'two'"]),
    (["-m", "MODEL", "--port", "65534"], ["--port", "'65534'"]),
])
def test_local_replicas_bad_options(smollm2, args, words):
    assert_script_error(run_script([smollm2 if a == "MODEL" else a for a in args]), 2, *words)


def test_local_replicas_bad_model_or_busy_port(sglang, pasada_bin, smollm2, tmp_path):
    missing = tmp_path / "missing.gguf"
    res = run_script(["-m", missing, "--bin", pasada_bin])
    assert_script_error(res, 1, str(missing), "no such file")

    # a file the replicas cannot load: the first replica's own error line
    junk = tmp_path / "junk.gguf"
    junk.write_text("junk")
    base = free_port_range(2)
    res = run_script(["-m", junk, "-n", 2, "--port", base, "--bin", pasada_bin], timeout=30)
    assert_script_error(res, 1, f"replica 1 (port {base + 1}) exited", "not a GGUF file")
    assert all(refused(p) for p in range(base, base + 3))

    # the router refusing its options: its own error line, the replica stopped
    base = free_port_range(1)
    res = run_script(["-m", smollm2, "-n", 1, "--port", base, "--bin", pasada_bin, "--policy",
                      "bogus", "--", "--kv-memory", 64], timeout=60)
    assert_script_error(res, 1, f"the router (port {base}) exited", "invalid choice: 'bogus'")
    assert refused(base + 1)

    base = free_port_range(2)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", base + 2))
        busy.listen()
        res = run_script(["-m", smollm2, "-n", 2, "--port", base, "--bin", pasada_bin])
    assert_script_error(res, 1, f"port {base + 2} is in use")
    assert all(refused(p) for p in (base, base + 1))


# ---- deploy/k8s ----

CRD_KINDS = {("inference.networking.k8s.io/v1", "InferencePool"),
             ("gateway.networking.k8s.io/v1", "HTTPRoute")}


@pytest.fixture(scope="module")
def k8s():
    """{(kind, name): object} of every manifest under deploy/k8s."""
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (it comes with "
                               "kubernetes-validate, in scripts/requirements-test.txt)")
    objs = {}
    for f in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if doc:
                key = (doc["kind"], doc["metadata"]["name"])
                assert key not in objs, f"{f.name}: {key} twice"
                objs[key] = doc
    return objs


def pod_spec(k8s, name):
    return k8s[("Deployment", name)]["spec"]["template"]["spec"]


def pasada_container(k8s):
    (c,) = [c for c in pod_spec(k8s, "pasada")["containers"] if c["name"] == "pasada"]
    return c


def arg(args, flag):
    return args[args.index(flag) + 1]


def test_k8s_builtin_kinds_match_the_openapi_schemas(k8s):
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed "
                             "(scripts/setup-deps puts it in the test venv)")
    versions = sorted({v.rsplit(".", 1)[0] for v in kv.utils.all_versions()},
                      key=lambda v: tuple(map(int, v.split("."))))
    kinds = set()
    for (kind, name), obj in k8s.items():
        if (obj["apiVersion"], kind) in CRD_KINDS:
            continue
        for v in (versions[0], versions[-1]):
            kv.validate(obj, v, strict=True)
        kinds.add(kind)
    assert kinds >= {"Deployment", "Service", "ServiceAccount", "Role", "RoleBinding"}, kinds
    # the validator does reject what a cluster would
    bad = copy.deepcopy(k8s[("Deployment", "pasada")])
    bad["spec"]["template"]["spec"]["terminationGracePeriod"] = 45
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, versions[-1], strict=True)
    bad = copy.deepcopy(k8s[("Service", "pasada")])
    bad["spec"]["ports"][0]["port"] = "eighty"
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, versions[-1], strict=True)


# The InferencePool's v1 API (inference.networking.k8s.io, Gateway API
# Inference Extension), from its published types: spec.selector.matchLabels
# (labels), spec.targetPorts (one port in v1.0, 1..65535) and
# spec.endpointPickerRef (name required; kind defaults to Service, and then
# port is required; failureMode FailOpen or FailClose) are required.
_LABEL_KEY = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?" \
             r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$"
_PORT = {"type": "object", "additionalProperties": False, "required": ["number"],
         "properties": {"number": {"type": "integer", "minimum": 1, "maximum": 65535}}}
INFERENCE_POOL_V1 = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "inference.networking.k8s.io/v1"},
        "kind": {"const": "InferencePool"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object", "additionalProperties": False,
            "required": ["selector", "targetPorts", "endpointPickerRef"],
            "properties": {
                "selector": {
                    "type": "object", "additionalProperties": False, "required": ["matchLabels"],
                    "properties": {"matchLabels": {
                        "type": "object", "minProperties": 1, "maxProperties": 64,
                        "propertyNames": {"pattern": _LABEL_KEY, "maxLength": 253},
                        "additionalProperties": {
                            "type": "string", "maxLength": 63,
                            "pattern": r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"}}}},
                "targetPorts": {"type": "array", "minItems": 1, "maxItems": 1, "items": _PORT},
                "appProtocol": {"enum": ["http", "kubernetes.io/h2c"]},
                "endpointPickerRef": {
                    "type": "object", "additionalProperties": False, "required": ["name"],
                    "properties": {
                        "group": {"type": "string", "maxLength": 253},
                        "kind": {"type": "string", "minLength": 1, "maxLength": 63,
                                 "pattern": r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"},
                        "name": {"type": "string", "minLength": 1, "maxLength": 253},
                        "port": _PORT,
                        "failureMode": {"enum": ["FailOpen", "FailClose"]}},
                    # the API's rule: self.kind != 'Service' || has(self.port)
                    "anyOf": [{"required": ["kind"], "properties": {"kind": {"not": {"const": "Service"}}}},
                              {"required": ["port"]}]}}}}}


def test_inference_pool_has_what_its_v1_api_requires(k8s):
    jsonschema = pytest.importorskip("jsonschema")
    pool = k8s[("InferencePool", "pasada")]
    jsonschema.validate(pool, INFERENCE_POOL_V1)
    for *parents, field in (["endpointPickerRef", "port"], ["targetPorts"], ["selector"]):
        bad = copy.deepcopy(pool)
        node = bad["spec"]
        for p in parents:
            node = node[p]
        del node[field]
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, INFERENCE_POOL_V1)
    # it selects the replicas' Pods on the port the server listens on
    labels = k8s[("Deployment", "pasada")]["spec"]["template"]["metadata"]["labels"]
    assert pool["spec"]["selector"]["matchLabels"].items() <= labels.items()
    c = pasada_container(k8s)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert pool["spec"]["targetPorts"] == [{"number": ports["http"]}]
    assert int(arg(c["args"], "--port")) == ports["http"]
    # and the HTTPRoute sends to it
    (rule,) = k8s[("HTTPRoute", "pasada")]["spec"]["rules"]
    assert {"group": "inference.networking.k8s.io", "kind": "InferencePool",
            "name": pool["metadata"]["name"]} in rule["backendRefs"]


def _resolves(target, container_ports):
    return target in ({p["name"] for p in container_ports} if isinstance(target, str)
                      else {p["containerPort"] for p in container_ports})


def test_k8s_objects_refer_to_each_other(k8s):
    deps = {name: obj for (kind, name), obj in k8s.items() if kind == "Deployment"}
    for name, dep in deps.items():
        labels = dep["spec"]["template"]["metadata"]["labels"]
        assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items(), name
    # every Service selects a Deployment's Pods and targets ports they have
    for (kind, name), svc in k8s.items():
        if kind != "Service":
            continue
        (dep,) = [d for d in deps.values()
                  if svc["spec"]["selector"].items() <= d["spec"]["template"]["metadata"]["labels"].items()]
        cports = [p for c in dep["spec"]["template"]["spec"]["containers"] for p in c["ports"]]
        for p in svc["spec"]["ports"]:
            assert _resolves(p["targetPort"], cports), (name, p)
    c = pasada_container(k8s)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    events = arg(c["args"], "--kv-events")
    assert events.startswith("tcp://*:") and int(events.rsplit(":", 1)[1]) == ports["kv-events"]

    # the router finds the replicas by label, on their port, through the API
    router = pod_spec(k8s, "pasada-router")
    (rc,) = router["containers"]
    cmd = shlex.split(rc["args"][0])
    flags = cmd[cmd.index("sglang_router.launch_router") + 1:]
    key, _, value = arg(flags, "--selector").partition("=")
    pods = k8s[("Deployment", "pasada")]["spec"]["template"]["metadata"]["labels"]
    assert pods.get(key) == value
    assert int(arg(flags, "--service-discovery-port")) == ports["http"]
    assert arg(flags, "--health-check-endpoint") == c["readinessProbe"]["httpGet"]["path"]
    sa = router["serviceAccountName"]
    assert ("ServiceAccount", sa) in k8s
    binding = k8s[("RoleBinding", sa)]
    assert {"kind": "ServiceAccount", "name": sa} in binding["subjects"]
    role = k8s[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
    assert any("pods" in r["resources"] and {"get", "list", "watch"} <= set(r["verbs"])
               for r in role["rules"])
    # every flag exists in the sglang-router the test venv has
    pytest.importorskip("sglang_router", reason="sglang-router is not installed")
    res = subprocess.run([sys.executable, "-m", "sglang_router.launch_router", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    known = set(re.findall(r"--[a-z0-9][-a-z0-9]*", res.stdout))
    assert {f for f in flags if f.startswith("--")} <= known


def test_deployment_args_start_a_real_server(k8s, pasada_bin, smollm2):
    spec = pod_spec(k8s, "pasada")
    c = pasada_container(k8s)
    assert c["command"] == ["pasada"] and c["args"][0] == "serve"
    args = list(c["args"][1:])
    # every flag is one `pasada serve` documents
    res = subprocess.run([str(pasada_bin), "serve", "--help"], capture_output=True, text=True,
                         timeout=30)
    assert res.returncode == 0
    for f in (a for a in args if a.startswith("-")):
        assert re.search(rf"(^|[\s,]){re.escape(f)}\b", res.stdout + res.stderr, re.M), f
    # $(VAR) is expanded by the kubelet from the container's env
    env = {e["name"]: "pasada-0" for e in c["env"]
           if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name"}
    for i, a in enumerate(args):
        for var in re.findall(r"\$\((\w+)\)", a):
            assert var in env, f"{a}: $({var}) is not in the container's env"
            args[i] = args[i].replace(f"$({var})", env[var])
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    args[args.index("--model") + 1] = str(smollm2)
    args[args.index("--port") + 1] = "0"
    events_port = _free_port()
    args[args.index("--kv-events") + 1] = f"tcp://*:{events_port}"

    # the grace period covers the drain and the running requests' grace, and
    # a failing readiness probe takes the Pod out before the socket closes
    drain, grace = int(arg(args, "--drain-delay")), int(arg(args, "--shutdown-grace"))
    assert spec["terminationGracePeriodSeconds"] > drain + grace
    ready = c["readinessProbe"]
    assert ready["periodSeconds"] * ready.get("failureThreshold", 3) < drain

    # up within what the startup probe allows (on a loaded machine, committing
    # the 2 GiB KV pool can take a while)
    start = c["startupProbe"]
    budget = start["periodSeconds"] * start["failureThreshold"]
    s = Server(pasada_bin, smollm2, *args, ready_timeout=budget)
    try:
        wait_for(lambda: requests.get(s.url + "/ready", timeout=10).status_code == 200,
                 timeout=budget, what="/ready")
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            get = c[probe]["httpGet"]
            assert ports[get["port"]] == int(arg(c["args"], "--port"))
            r = requests.get(s.url + get["path"], timeout=10)
            assert r.status_code == 200, (probe, r.status_code, r.text)
        info = requests.get(s.url + "/server_info", timeout=10).json()
        assert info["served_model_name"] == arg(args, "--alias")
        assert info["kv_events"]["topic"] == arg(args, "--kv-events-topic") == "kv@pasada-0@model"
        assert info["max_running_requests"] == int(arg(args, "--parallel"))
        assert info["max_queued_requests"] == int(arg(args, "--max-queue"))

        # what the endpoint picker scrapes, by the names the manifests and
        # the docs give, with the protocol's types
        names = set(re.findall(r"\b(?:vllm|sglang):[a-z_]+", DOC.read_text() + "".join(
            f.read_text() for f in K8S.glob("*.yaml"))))
        assert {"vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} <= names
        types = types_of(requests.get(s.url + "/metrics", timeout=10).text)
        for name in names:
            assert types.get(name) == PROTOCOL[name], (name, types.get(name))

        # SIGTERM: out of the endpoints at once, alive for the liveness
        # probe while it drains for --drain-delay seconds
        s.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: requests.get(s.url + "/ready", timeout=10).status_code == 503,
                 timeout=1, what="/ready to turn 503")
        assert requests.get(s.url + c["livenessProbe"]["httpGet"]["path"],
                            timeout=10).status_code == 200
        wait_for(lambda: f"draining for {drain} s" in s.stderr, timeout=5, what="the drain line")
    finally:
        s.kill()
