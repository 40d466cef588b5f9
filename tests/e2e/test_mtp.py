"""Multi-token prediction (MTP): the tiny Qwen3.5 with an MTP layer (the
folder hf_folder.py writes from tests/fixtures/tiny/qwen35.gguf plus the
mtp.* tensors of tests/fixtures/tiny/qwen35.mtp.safetensors, seeded values;
scripts/make-mtp-fixtures.py).

- The MTP layer's logits against transformers' (the layer assembled from
  its Qwen3_5DecoderLayer and Qwen3_5RMSNorm, tests/fixtures/tiny/
  qwen35.mtp.npz): every entry of three prompts and a chained second draft
  step, in one batch and one entry per call, on ref, cpu and vulkan within
  1e-4 of the largest logit with an F32 cache (measured 2e-6 to 1.3e-5),
  3e-3 with the F16 cache (1.3e-4), argmax equal. The MTP layer's cache
  takes the target's type.
- `pasada convert` keeps the layer under llama.cpp's nextn names
  (block_count 5, nextn_predict_layers 1), and the GGUF file gives the
  folder's MTP logits bit for bit.
- Greedy text with --mtp is the text without it, in `run` (CPU, Vulkan),
  `serve` (1 and 4 users) and `bench --mtp`; sampling with MTP drafts runs
  the rejection rule (accepted drafts, the run completes); a model without
  the layer, or a split backend, is a one-line error; a request asking for
  "mtp" from a server without --mtp is a 400.

The MTP layer's weights are random, so its greedy drafts are rarely the
target's: greedy runs exercise rejections and their rollback (Qwen3.5's
recurrent state included), sampled runs acceptances. CI runs 4 prompts of
80 tokens and 4 users; PASADA_SPEC_FULL=1 runs 20 prompts of 256 tokens
(a 640-position context past the tiny model's 128 trained ones) and 8
users."""
import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import requests

from hf_folder import add_safetensors, read_safetensors, write_f32_folder
from test_server import Server

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TINY = FIXTURES / "tiny"
BUILD = Path(__file__).resolve().parents[2] / "build"
FULL = os.environ.get("PASADA_SPEC_FULL") == "1"
N_TOKENS, USERS, CTX = (256, 8, 640) if FULL else (80, 4, 256)
PROMPTS = ["the cat sat on the mat the cat sat on the mat", "one two three four five six",
           "hello", "a b a b a b a b"]
if FULL:
    PROMPTS += [f"{w} " * (i % 5 + 1) + f"item {i}: {w}, then {w[::-1]}" for i, w in enumerate(
        ["river", "solar", "stack", "query", "paris", "rainbow", "spider", "haiku", "cook", "print",
         "return", "select", "class", "value", "order", "number"])]


@pytest.fixture(scope="module")
def mtp_model(tmp_path_factory):
    folder = write_f32_folder(TINY / "qwen35.gguf", "qwen35", tmp_path_factory.mktemp("mtp") / "qwen35-mtp")
    add_safetensors(folder, read_safetensors(TINY / "qwen35.mtp.safetensors"))
    return folder


def eval_mtp(mode, model, ids, out, *extra):
    out.mkdir(parents=True, exist_ok=True)
    (out / "ids.txt").write_text("".join(" ".join(str(int(t)) for t in p) + "\n" for p in ids))
    res = subprocess.run([str(BUILD / "pasada_eval"), mode, str(model), str(out / "ids.txt"), str(out), *extra],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return [np.fromfile(out / f"prompt{i}.f32", "<f4").reshape(len(p), -1) for i, p in enumerate(ids)]


def reference():
    d = np.load(TINY / "qwen35.mtp.npz")
    n = len([k for k in d if k.startswith("ids")])
    return [d[f"ids{i}"] for i in range(n)], [d[f"logits{i}"] for i in range(n)]


@pytest.mark.parametrize("mode", ["mtp", "mtp-steps"])
@pytest.mark.parametrize("backend,kv,tol", [("ref", "f32", 1e-4), ("cpu", "f32", 1e-4), ("cpu", "f16", 3e-3),
                                            ("vulkan", "f32", 1e-4)])
def test_mtp_logits_match_transformers(mtp_model, mode, backend, kv, tol, tmp_path, request):
    if backend == "vulkan":
        backend = request.getfixturevalue("vulkan_device")
    ids, want = reference()
    got = eval_mtp(mode, mtp_model, ids, tmp_path, "--backend", backend, "--kv-type", kv)
    for i, (g, w) in enumerate(zip(got, want)):
        err = float(np.abs(g.astype(np.float64) - w).max() / np.abs(w).max())
        print(f"\n  mtp {mode} {backend} {kv} seq{i} n={len(ids[i])}: rel err {err:.2e}", end="")
        assert err <= tol, f"seq{i}: rel err {err:.2e}"
        assert (g.argmax(1) == w.argmax(1)).all(), f"seq{i}: argmax differs"


def test_mtp_gguf_keeps_the_layer(pasada_bin, mtp_model, tmp_path):
    import gguf
    out = tmp_path / "mtp.gguf"
    res = subprocess.run([str(pasada_bin), "convert", str(mtp_model), str(out)], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    r = gguf.GGUFReader(str(out))
    names = {t.name for t in r.tensors}
    assert {f"blk.4.nextn.{n}.weight" for n in ("eh_proj", "enorm", "hnorm", "shared_head_norm")} <= names
    assert "blk.4.attn_q.weight" in names and "blk.4.ffn_down.weight" in names

    def field(k):
        f = r.fields[k]
        return f.parts[f.data[0]][0].item()
    assert field("qwen35.block_count") == 5 and field("qwen35.nextn_predict_layers") == 1
    ids, _ = reference()
    a = eval_mtp("mtp", mtp_model, ids, tmp_path / "a", "--backend", "cpu", "--kv-type", "f32")
    b = eval_mtp("mtp", out, ids, tmp_path / "b", "--backend", "cpu", "--kv-type", "f32")
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    info = subprocess.run([str(pasada_bin), "info", "-m", str(out)], capture_output=True, text=True, timeout=60)
    assert "multi-token:     1 prediction layer" in info.stdout + info.stderr


def run(pasada_bin, model, prompt, *extra):
    res = subprocess.run([str(pasada_bin), "run", "-m", str(model), "-p", prompt, "-n", str(N_TOKENS), "-t", "2",
                          "--ctx", str(CTX), *map(str, extra)], capture_output=True, timeout=600,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    return res.stdout, res.stderr.decode(errors="replace")


def stats(err):
    s = err.strip().splitlines()[-1].split("mtp: drafted ")[1]
    return int(s.split(",")[0]), int(s.split("accepted ")[1].split(" ")[0])


@pytest.mark.parametrize("where", ["cpu", "vulkan"])
def test_run_mtp_greedy_identical(pasada_bin, mtp_model, where, request):
    dev = ["--device", request.getfixturevalue("vulkan_device")] if where == "vulkan" else []
    drafted = 0
    for p in PROMPTS:
        want, _ = run(pasada_bin, mtp_model, p, "--temp", "0", *dev)
        for k in (1, 3):
            got, err = run(pasada_bin, mtp_model, p, "--temp", "0", "--mtp", "--draft-max", k, *dev)
            assert got == want, f"--mtp --draft-max {k}: output differs for prompt {p!r}"
            drafted += stats(err)[0]
    assert drafted > 0


def test_run_mtp_sampled_accepts(pasada_bin, mtp_model):
    """Sampled drafts from the MTP's distribution at the request's
    temperature: the rejection rule accepts some, the text completes."""
    accepted = 0
    for seed in (1, 2, 3):
        out, err = run(pasada_bin, mtp_model, PROMPTS[0], "--temp", "1.5", "--top-k", "0", "--top-p", "1",
                       "--min-p", "0", "--seed", seed, "--mtp", "--draft-max", "4")
        assert out
        accepted += stats(err)[1]
    assert accepted > 0


def test_mtp_refused_with_one_line(pasada_bin, mtp_model, request):
    for model, extra, hint in ((TINY / "qwen35.gguf", [], "no multi-token-prediction layer"),
                               (TINY / "qwen3.gguf", [], "no multi-token-prediction layer"),
                               (mtp_model, ["--device", request.getfixturevalue("vulkan_device"),
                                            "--gpu-layers", "2"], "split by layers"),
                               (mtp_model, ["--lookup"], "each choose how to draft")):
        res = subprocess.run([str(pasada_bin), "run", "-m", str(model), "-p", "hi", "-n", "4", "--mtp", *extra],
                             capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert res.returncode != 0 and hint in res.stderr and res.stderr.count("\n") == 1, res.stderr


def test_server_mtp_greedy_identical(pasada_bin, mtp_model):
    s = Server(pasada_bin, mtp_model, "--parallel", USERS, "--ctx", CTX, "--mtp", "--spec-max-seqs", USERS)
    try:
        def complete(prompt, spec):
            r = requests.post(s.url + "/v1/completions", json={
                "prompt": prompt, "max_tokens": N_TOKENS, "temperature": 0, "speculative": spec}, timeout=600)
            assert r.status_code == 200, r.text
            return r.json()["choices"][0]["text"]
        want = [complete(p, {"mode": "off"}) for p in PROMPTS]
        for users in (1, USERS):
            for spec in ({"mode": "mtp"}, None, {"mode": "mtp", "draft_max": 1}, {"mode": "lookup"}):
                work = PROMPTS * (2 if users > 1 else 1)
                with ThreadPoolExecutor(users) as pool:
                    got = list(pool.map(lambda p: complete(p, spec), work))
                for i, g in enumerate(got):
                    assert g == want[i % len(want)], f"{spec} at {users} users: prompt {i % len(want)} differs"
        s.wait_idle()
        metrics = requests.get(s.url + "/metrics", timeout=60).text
        drafted = [ln for ln in metrics.splitlines() if ln.startswith('pasada_spec_draft_tokens_total{mode="mtp"}')]
        assert drafted and int(drafted[0].split()[-1]) > 0, metrics
    finally:
        assert s.stop() == 0, s.stderr


def test_server_mtp_needs_the_option(pasada_bin, mtp_model):
    s = Server(pasada_bin, mtp_model, "--parallel", 2, "--ctx", 256, "--lookup")
    try:
        r = requests.post(s.url + "/v1/completions", json={
            "prompt": "hi", "max_tokens": 4, "speculative": {"mode": "mtp"}}, timeout=60)
        assert r.status_code == 400 and "--mtp" in r.json()["error"]["message"], r.text
        assert r.json()["error"]["param"] == "speculative"
    finally:
        assert s.stop() == 0, s.stderr
    res = subprocess.run([str(pasada_bin), "serve", "-m", str(TINY / "qwen35.gguf"), "--mtp", "--port", "0"],
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert res.returncode != 0 and "no multi-token-prediction layer" in res.stderr, res.stderr


def test_bench_mtp(pasada_bin, mtp_model):
    res = subprocess.run([str(pasada_bin), "bench", "-m", str(mtp_model), "--mtp", "-n", "48", "-r", "1", "-t", "2",
                          "--json"], capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stderr
    s = json.loads(res.stdout)["speculative"]
    assert s["mode"] == "mtp" and s["identical"] is True and s["drafted"] > 0, s


def test_chat_mtp_identical(pasada_bin, mtp_model):
    """`pasada chat --mtp`: three turns, the text of plain chat."""
    turns = "hello there\nand again the cat\nthird turn\n"
    out = []
    for extra in ([], ["--mtp"]):
        res = subprocess.run([str(pasada_bin), "chat", "-m", str(mtp_model), "-n", "40", "--temp", "0", "-t", "2",
                              "--chat-template", "chatml", *extra], input=turns.encode(), capture_output=True,
                             timeout=600)
        assert res.returncode == 0, res.stderr.decode(errors="replace")
        out.append(res.stdout)
    assert out[0] == out[1] and out[0].count(b"\n") >= 3
