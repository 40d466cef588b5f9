"""The Vulkan backend end to end, on the GPU tests' device (conftest.py's
vulkan_device: the default GPU, else a CPU implementation such as Mesa's
lavapipe):
- verify: the device against the reference path (F32 weights, double sums)
  on SmolLM2 and Gemma 3 passes, with KL and layer errors far under
  verify's tolerances (the shaders dequantize weights as they read them and
  keep activations and sums in float, so they track the reference closely);
- greedy: `run --temp 0` on the device prints the same 32 tokens as on the
  CPU for the logit fixtures' prompts (16 on a CPU implementation of
  Vulkan), or the two part at a near-tie, which the test shows token by
  token (see test_greedy_run_matches_cpu);
- serve on the device: 8 concurrent greedy completions each equal to the
  same request sent alone, a chat request and a streamed one;
- errors: a device that is not there, --device vulkan without a GPU, no
  Vulkan loader, no Vulkan driver: one line on stderr and exit status 1.
Lavapipe is slow (per token about 0.4 s on SmolLM2 and 1.3 s on Gemma 3,
whose 262144-entry vocabulary dominates), so prompts are cut, generations
kept short, and on a device of type cpu the greedy generations are half as
long: the file then takes about 3.5 minutes on an otherwise idle 2-core
machine (5 to 6 minutes of CPU time)."""
import json
import os
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import requests

from conftest import BUILD, FIXTURES
from test_server import Server, chat_msgs, stream_text

MODELS = ("smollm2", "gemma3")
# The work of the two long tests, on a GPU and on a CPU-type device such as
# lavapipe, where a decode step of these models takes 0.1-1 s (the output
# matrix of Gemma 3's 262144 tokens dominates): there, fewer prompts and
# tokens; every path (prefill, decode, batching, the near-tie analysis) is
# still taken.
GREEDY_TOKENS, GREEDY_PROMPTS = 32, 5
GREEDY_TOKENS_CPU_DEVICE, GREEDY_PROMPTS_CPU_DEVICE = 10, 2
SERVER_WORK = (8, 16)  # prompts sent at once, tokens each
SERVER_WORK_CPU_DEVICE = (4, 8)


def cli(binary, *args, env=None, timeout=900):
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env=env, timeout=timeout)


def one_line_error(res):
    """The single stderr line of a command that failed at run time (exit 1)."""
    lines = res.stderr.splitlines()
    assert res.returncode == 1, f"exit {res.returncode}: {res.stderr}"
    assert len(lines) == 1 and lines[0].startswith("pasada: error: "), f"expected one line: {res.stderr!r}"
    return lines[0]


@pytest.fixture(scope="module")
def cpu_type_device(devices, vulkan_device):
    return next(d["type"] for d in devices["vulkan"]["devices"] if d["device"] == vulkan_device) == "cpu"


@pytest.fixture(scope="module")
def greedy_tokens(cpu_type_device):
    return GREEDY_TOKENS_CPU_DEVICE if cpu_type_device else GREEDY_TOKENS


@pytest.fixture(scope="module")
def greedy_prompts(cpu_type_device):
    return GREEDY_PROMPTS_CPU_DEVICE if cpu_type_device else GREEDY_PROMPTS


# ---- verify: the device against the reference path ----

# Measured on lavapipe with -n 8 (4 built-in prompts, 32 positions): KL mean
# 4.8e-7 (SmolLM2) and 1.5e-7 (Gemma 3), top-1 agreement 1, worst layer's
# mean relative error 2.4e-4 and 8.5e-5; verify's own tolerances are 0.03
# nats and 0.05. The bounds below are a few times the measurements: float
# sums in another order (a real GPU) move them by little, while a wrong
# shader moves them by orders of magnitude.
VERIFY_KL_MEAN = 2e-6
VERIFY_LAYER_MEAN = {"smollm2": 1e-3, "gemma3": 5e-4}


@pytest.mark.parametrize("name", MODELS)
def test_verify_against_reference(pasada_bin, vulkan_device, request, name):
    model = request.getfixturevalue(name)
    res = cli(pasada_bin, "verify", "-m", model, "--backend", vulkan_device, "-n", 8, "-q", "--json")
    assert res.returncode == 0, res.stdout + res.stderr
    d = json.loads(res.stdout)
    lg = d["logits"]
    worst = max(layer["mean_rel_err"] for layer in d["layers"])
    print(f"\n  {name} on {vulkan_device}: KL mean {lg['kl_mean']:.2e} max {lg['kl_max']:.2e}, top-1 "
          f"{lg['top1']:.3f}, max |diff| {lg['max_abs_diff']:.3f}, worst layer mean rel err {worst:.2e}", end="")
    assert d["backend"] == vulkan_device and d["against"] == "ref" and d["pass"], d["failure"]
    assert d["positions"] == 32
    assert lg["kl_mean"] < VERIFY_KL_MEAN
    assert lg["top1"] >= 0.96  # one flip in 32 positions at most (measured: none)
    assert worst < VERIFY_LAYER_MEAN[name]


# ---- greedy generation: the device against the CPU ----

# Where the two texts part, the test finds the step and the two tokens and
# requires a near-tie: the exact math (the reference backend) puts the
# CPU's token and the device's within REF_NEAR_TIE logits of each other,
# and the CPU's own margin between them is under CPU_NEAR_TIE. The CPU
# rounds activations to 8 bits, which moves margins by tenths of a logit
# (llama.cpp's KV precision alone moves SmolLM2's by up to 0.9:
# test_logit_parity.py), while the device computes in float and tracks the
# reference to about 0.02 logits.
# Measured on lavapipe with 32 tokens (step counted from 0 in the generated
# tokens; margins as CPU token minus device token):
#   smollm2 prompt0 step 10: reference -0.055, CPU +0.141
#   smollm2 prompt3 step 17: reference -0.123, CPU +0.601 ("372" against "377")
#   smollm2 prompt4 step 3:  reference -0.051, CPU +0.203
#   gemma3  prompt0 step 7:  reference -0.085, CPU +0.029
#   gemma3  prompt1 step 29: reference -0.226, CPU +0.084
# In each the device picked the reference's choice; the other prompts agree.
REF_NEAR_TIE = 0.5
CPU_NEAR_TIE = 1.0
CANDIDATES = 8  # the device's token is looked for among the reference's most likely


def eval_tool(*args):
    exe = BUILD / "pasada_eval"
    assert exe.exists(), f"{exe} is missing: build the project first"
    res = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, f"pasada_eval {args[0]}: {res.stderr.strip()}"
    return res.stdout


def last_logits(model, prefixes, backend, out_dir):
    """Each token list's logits at its last position, on `backend`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    ids = out_dir / "ids.txt"
    ids.write_text("".join(" ".join(map(str, p)) + "\n" for p in prefixes))
    eval_tool("logits", model, ids, out_dir, "--backend", backend)
    rows = []
    for i, p in enumerate(prefixes):
        f = out_dir / f"prompt{i}.f32"
        rows.append(np.fromfile(f, dtype="<f4").reshape(len(p), -1)[-1].astype(np.float64))
        f.unlink()  # Gemma 3: 1 MiB per position
    return rows


def near_tie_report(pasada_bin, model, numbers, prompts, n_tokens, cpu_texts, dev_texts, tmp_path):
    """For each prompt (numbered as in the fixture by `numbers`) whose
    device text differs from the CPU's: the step
    where they part, both tokens and their margins on the CPU and the
    reference path, or an AssertionError naming what is not a near-tie.

    The CPU's greedy tokens come from pasada_eval (they must spell the CPU's
    text); a CPU server's /detokenize spells every prefix of them, so the
    step is the first whose token leaves the device's text; the device's
    token there is the candidate (among the reference's most likely) whose
    spelling continues the device's text furthest."""
    ids = []
    for p in prompts:
        res = cli(pasada_bin, "tokenize", "-m", model, "-p", p)
        assert res.returncode == 0, res.stderr
        ids.append([int(t) for t in res.stdout.split()])
    ids_file = tmp_path / "prompts.txt"
    ids_file.write_text("".join(" ".join(map(str, p)) + "\n" for p in ids))
    out = eval_tool("greedy", model, ids_file, n_tokens, "--backend", "cpu")
    cpu_tokens = [[int(t) for t in line.split()] for line in out.strip().splitlines()]
    server = Server(pasada_bin, model, "--device", "cpu", "--parallel", 1, "--ctx", 256)
    try:
        def spell(prompt_ids, generated):
            """The text `generated` adds after the prompt (a trailing
            incomplete UTF-8 character left out)."""
            def detok(toks):
                r = requests.post(server.url + "/detokenize", json={"tokens": toks}, timeout=60)
                assert r.status_code == 200, r.text
                return r.json()["content"]
            head, full = detok(prompt_ids), detok(prompt_ids + generated)
            assert full.startswith(head), (head, full)
            return full[len(head):].rstrip("\ufffd")

        cases = []
        for i, (p, c) in enumerate(zip(ids, cpu_tokens)):
            assert spell(p, c) == cpu_texts[i].rstrip("\ufffd"), \
                f"prompt{numbers[i]}: pasada_eval's CPU tokens do not spell `run --device cpu`'s text"
            step = next((k for k in range(len(c)) if not dev_texts[i].startswith(spell(p, c[:k + 1]))), None)
            assert step is not None, \
                f"prompt{numbers[i]}: the device's text {dev_texts[i]!r} continues the CPU's {cpu_texts[i]!r}"
            cases.append((i, step, p + c[:step], c[step]))
        refs = last_logits(model, [pre for _, _, pre, _ in cases], "ref", tmp_path / "ref")
        cpus = last_logits(model, [pre for _, _, pre, _ in cases], "cpu", tmp_path / "cpu")
        report, problems = [], []
        for (i, step, prefix, c), ref, cpu in zip(cases, refs, cpus):
            p = ids[i]
            done = spell(p, prefix[len(p):])
            best, best_len = None, -1
            for t in np.argsort(-ref)[:CANDIDATES]:
                t = int(t)
                if t == c:
                    continue
                s = spell(p, prefix[len(p):] + [t])
                if len(s) > len(done) and dev_texts[i].startswith(s) and len(s) > best_len:
                    best, best_len = t, len(s)
            if best is None:
                problems.append(f"prompt{numbers[i]} step {step}: the device's token is none of the reference's "
                                f"{CANDIDATES} most likely (CPU token {c})")
                continue
            ref_gap, cpu_gap = ref[c] - ref[best], cpu[c] - cpu[best]
            line = (f"prompt{numbers[i]} step {step}: CPU token {c}, device token {best}; margin (CPU token minus "
                    f"device token) on the reference {ref_gap:+.3f}, on the CPU {cpu_gap:+.3f}")
            report.append(line)
            if abs(ref_gap) >= REF_NEAR_TIE or cpu_gap >= CPU_NEAR_TIE:
                problems.append(line + f": not a near-tie (bounds {REF_NEAR_TIE}, {CPU_NEAR_TIE})")
        return report, problems
    finally:
        server.stop()


@pytest.mark.parametrize("name", MODELS)
def test_greedy_run_matches_cpu(pasada_bin, vulkan_device, greedy_tokens, greedy_prompts, request, tmp_path, name):
    """`run --temp 0 -n 32` on the device prints the CPU's text, except
    where the two part at a near-tie (the comment above)."""
    model = request.getfixturevalue(name)
    with np.load(FIXTURES / "logits" / f"{name}.npz") as f:
        prompts = [str(p) for p in f["prompts"]][:greedy_prompts]

    def gen(device, prompt):
        res = cli(pasada_bin, "run", "-m", model, "-p", prompt, "-n", greedy_tokens, "--temp", 0,
                  "--no-stats", "--device", device)
        assert res.returncode == 0, f"{device}: {res.stderr}"
        assert res.stderr == "", res.stderr
        return res.stdout

    cpu = [gen("cpu", p) for p in prompts]
    dev = [gen(vulkan_device, p) for p in prompts]
    differ = [i for i in range(len(prompts)) if cpu[i] != dev[i]]
    for i in range(len(prompts)):
        assert cpu[i].strip() and dev[i].strip(), f"prompt{i}: nothing generated"
        print(f"\n  {name} prompt{i}: " + ("differs" if i in differ else "identical"), end="")
    if not differ:
        return
    report, problems = near_tie_report(pasada_bin, model, differ, [prompts[i] for i in differ], greedy_tokens,
                                       [cpu[i] for i in differ], [dev[i] for i in differ], tmp_path)
    for line in report:
        print(f"\n  {name} {line}", end="")
    assert not problems, f"{name}: " + "; ".join(problems)


# ---- the server on the device ----

SERVER_PROMPTS = [
    "The three primary colors are",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The capital of Japan is",
    "Water boils at a temperature of",
    "1, 2, 3, 4, 5,",
    "My favourite season of the year is",
    "To make a cup of tea, first",
]


def complete(client, prompt, tokens):
    r = client.completions.create(model="m", prompt=prompt, max_tokens=tokens, temperature=0)
    c = r.choices[0]
    return c.text, c.finish_reason, r.usage.completion_tokens


def test_server_batched_equals_alone(pasada_bin, smollm2, vulkan_device, cpu_type_device):
    """8 concurrent greedy completions on the device (4 on a CPU-type
    device), each equal to the same request sent alone. Alone and together
    run on two fresh servers, so no request reuses KV blocks (the prefix
    cache) another one computed."""
    n_prompts, tokens = SERVER_WORK_CPU_DEVICE if cpu_type_device else SERVER_WORK
    prompts = SERVER_PROMPTS[:n_prompts]
    args = ("--device", vulkan_device, "--parallel", 8, "--ctx", 256)
    alone_server = Server(pasada_bin, smollm2, *args)
    try:
        client = alone_server.client()
        alone = [complete(client, p, tokens) for p in prompts]
    finally:
        assert alone_server.stop() == 0, alone_server.stderr
    server = Server(pasada_bin, smollm2, *args)
    try:
        client = server.client()
        start = threading.Barrier(len(prompts))

        def together(p):
            start.wait()
            return complete(client, p, tokens)

        before = server.metrics()
        with ThreadPoolExecutor(len(prompts)) as pool:
            batched = list(pool.map(together, prompts))
        after = server.wait_idle()
        for i, (a, b) in enumerate(zip(alone, batched)):
            assert a[0].strip(), f"{prompts[i]!r}: nothing generated"
            assert a == b, (prompts[i], a, b)
        assert len({a[0] for a in alone}) == len(alone)  # different prompts, different texts
        # they were decoded together: one after another they take a step per
        # token, `tokens` steps each (the first token comes with the prefill)
        steps = after["pasada_scheduler_steps_total"] - before["pasada_scheduler_steps_total"]
        assert steps < len(prompts) * tokens / 2, steps

        # a chat request, then the same streamed: the same answer
        kw = dict(model="m", messages=chat_msgs("What is the capital city of France? Answer in one word."),
                  max_tokens=12, temperature=0)
        r = client.chat.completions.create(**kw)
        answer = r.choices[0].message.content
        assert r.choices[0].message.role == "assistant" and answer.strip()
        assert 0 < r.usage.completion_tokens <= 12
        text, finish, usage = stream_text(client.chat.completions.create(
            **kw, stream=True, stream_options={"include_usage": True}))
        assert text == answer and finish == r.choices[0].finish_reason
        assert usage.completion_tokens == r.usage.completion_tokens
        server.wait_idle()
    finally:
        assert server.stop() == 0, server.stderr


# ---- bad input: one line, exit status 1 ----

@pytest.mark.parametrize("cmd", ["run", "verify", "serve"])
def test_device_not_there(pasada_bin, smollm2, devices, vulkan_device, cmd):
    n = len(devices["vulkan"]["devices"])
    if n > 7:
        pytest.skip(f"this machine has {n} Vulkan devices: vulkan:7 exists")
    extra = {"run": ["-p", "x", "-n", 1], "verify": ["-n", 2, "-q"], "serve": ["--port", 0]}[cmd]
    res = cli(pasada_bin, cmd, "-m", smollm2, *extra, "--device", "vulkan:7", timeout=120)
    assert res.returncode == 1, res.stderr
    if cmd == "serve":  # the server says where it listens before it loads the model
        lines = [ln for ln in res.stderr.splitlines() if " listening on " not in ln]
        assert len(lines) == 1 and lines[0].startswith("pasada serve: "), res.stderr
        line = lines[0]
    else:
        line = one_line_error(res)
    assert f"vulkan:7: this machine has {n} Vulkan device" in line, line


def test_device_vulkan_without_a_gpu(pasada_bin, smollm2, devices, vulkan_device):
    if devices["vulkan"]["default"]:
        pytest.skip(f"this machine has a GPU: {devices['vulkan']['default']}")
    line = one_line_error(cli(pasada_bin, "run", "-m", smollm2, "-p", "x", "-n", 1, "--device", "vulkan"))
    assert "--device vulkan: no GPU on this machine" in line, line
    # and it names the CPU implementation that would run when named
    cpu_devs = [d["device"] for d in devices["vulkan"]["devices"] if d["type"] == "cpu"]
    assert any(f"--device {d})" in line for d in cpu_devs), line


def without_vulkan(**over):
    env = dict(os.environ)
    for k in ("PASADA_VULKAN_LOADER", "VK_ICD_FILENAMES", "VK_DRIVER_FILES", "VK_ADD_DRIVER_FILES"):
        env.pop(k, None)
    env.update(over)
    return env


@pytest.mark.parametrize("case", ["no_loader", "no_driver"])
def test_no_loader_or_driver(pasada_bin, smollm2, vulkan_device, case):
    """No Vulkan loader (PASADA_VULKAN_LOADER names a file that is not
    there) or a loader that finds no driver (VK_ICD_FILENAMES and
    VK_DRIVER_FILES name one that is not there): the device is refused in
    one line, and `pasada devices` still lists the CPU, says why there is
    no Vulkan device and exits 0."""
    if case == "no_loader":
        env = without_vulkan(PASADA_VULKAN_LOADER="/nonexistent/libvulkan.so.1")
        want = "/nonexistent/libvulkan.so.1"
    else:
        env = without_vulkan(VK_ICD_FILENAMES="/nonexistent.json", VK_DRIVER_FILES="/nonexistent.json")
        want = "no driver"
    line = one_line_error(cli(pasada_bin, "run", "-m", smollm2, "-p", "x", "-n", 1, "--device",
                              vulkan_device, env=env))
    assert want in line, line
    res = cli(pasada_bin, "devices", "--json", env=env)
    assert res.returncode == 0, res.stderr
    vk = json.loads(res.stdout)["vulkan"]
    assert vk["devices"] == [] and vk["default"] is None
    assert want in vk["error"] and "\n" not in vk["error"], vk["error"]
    table = cli(pasada_bin, "devices", env=env)
    assert table.returncode == 0 and table.stdout.startswith("cpu "), table.stdout + table.stderr
    assert want in table.stdout, table.stdout
