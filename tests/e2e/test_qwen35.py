"""Qwen3.5 (arch qwen35): the tiny fixture (tests/fixtures/tiny/qwen35.gguf,
made by scripts/make-tiny-models.py from transformers' Qwen3_5ForCausalLM:
three Gated DeltaNet linear-attention layers and one gated attention layer)
against transformers' logits, batched and token by token, on the host
backends, the Vulkan test device and split across it and the CPU; the
server's continuous batching and prefix reuse of a model whose linear
layers carry a recurrent state per sequence (docs/architecture.md,
"Recurrent layers"), on the CPU and the Vulkan test device; and defective
files refused with one line."""
import subprocess

import numpy as np
import pytest
import requests

from conftest import FIXTURES
from test_arch_parity import TOLERANCE, load_fixture, relative_error, run_eval
from test_cli import TURN_RE
from test_families import _copy_gguf
from test_server import Server

TINY = FIXTURES / "tiny"
MODEL = TINY / "qwen35.gguf"


def _device(backend, request):
    """"vulkan": the GPU tests' device (conftest.py: lavapipe where there is
    no GPU); "split": its first two layers there (two linear-attention
    layers), the third linear layer, the attention layer and the output on
    the CPU."""
    if backend not in ("vulkan", "split"):
        return backend
    dev = request.getfixturevalue("vulkan_device")
    return dev if backend == "vulkan" else f"{dev}/2"


@pytest.mark.parametrize("backend", ["cpu", "ref", "cpu:scalar", "vulkan", "split"])
@pytest.mark.parametrize("kv", ["f32", "f16"])
@pytest.mark.parametrize("mode", ["logits", "logits-steps"])
def test_qwen35_parity(mode, kv, backend, tmp_path, request):
    """pasada's logits are transformers' within the KV type's bound, and the
    argmax is the same at every position."""
    backend = _device(backend, request)
    fixture = load_fixture("qwen35")
    got = run_eval(mode, MODEL, [ids for ids, _ in fixture], tmp_path, ("--kv-type", kv, "--backend", backend))
    for i, ((ids, ref), out) in enumerate(zip(fixture, got)):
        err = relative_error(out, ref)
        print(f"\n  qwen35 {mode} {kv} {backend} seq{i} n={len(ids)}: rel err {err:.2e}", end="")
        assert err <= TOLERANCE[kv], f"seq{i}: rel err {err:.2e}"
        assert (out.argmax(1) == ref.argmax(1)).all(), f"seq{i}: argmax differs"


@pytest.mark.parametrize("backend", ["vulkan", "split"])
def test_qwen35_gpu_greedy_equals_cpu(pasada_bin, backend, request):
    """`pasada run` on the Vulkan device, whole or split with the CPU, writes
    the CPU's greedy text."""
    dev = _device(backend, request)
    args = ["--device", dev] if backend == "vulkan" else ["--device", dev.split("/")[0], "--gpu-layers", "2"]
    out = {}
    for name, dargs in (("cpu", ["--device", "cpu"]), (backend, args)):
        res = subprocess.run([str(pasada_bin), "run", "-m", str(MODEL), "-p", "hello world", "-n", "12",
                              "--temp", "0", *dargs], capture_output=True, text=True, errors="replace",
                             stdin=subprocess.DEVNULL, timeout=120)
        assert res.returncode == 0, res.stderr
        out[name] = res.stdout
    assert out[backend] == out["cpu"]


def _complete(url, prompt, n):
    r = requests.post(url + "/v1/completions", timeout=60,
                      json={"prompt": [int(t) for t in prompt], "max_tokens": n, "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("backend", ["cpu", "vulkan"])
def test_qwen35_server_batching_and_prefix_reuse(pasada_bin, backend, request):
    """Three requests at once (one batch of several sequences, each with its
    own recurrent state) give each the greedy text a lone request gives; a
    prompt that continues an earlier request's sequence reuses exactly that
    sequence (its state snapshot and KV positions) and gives the same text
    as from scratch; one that continues an earlier prompt but not its
    answer reuses that prompt (the snapshot taken where it ended); a prompt
    that only shares a part of one reuses nothing (on the GPU: the state
    snapshots are copies in device memory)."""
    dev = ("--device", _device(backend, request))
    (a, _), (b, _), (c, _) = load_fixture("qwen35")
    fresh = Server(pasada_bin, MODEL, "--parallel", "4", *dev)
    try:
        # from scratch first: each request leaves snapshots that later ones
        # extending its prompt reuse
        ext = np.concatenate([b, c[:9]])
        scratch = _complete(fresh.url, ext, 6)
        assert scratch["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        nxt = np.concatenate([a, c[3:8]])
        scratch_nxt = _complete(fresh.url, nxt, 4)
        assert scratch_nxt["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
        alone = {}
        for k, p in (("a", a), ("b", b), ("c", c)):
            r = _complete(fresh.url, p, 6)
            assert r["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
            alone[k] = r["choices"][0]["text"]
    finally:
        fresh.kill()
    srv = Server(pasada_bin, MODEL, "--parallel", "4", *dev)
    try:
        import concurrent.futures as cf
        with cf.ThreadPoolExecutor(3) as ex:
            futs = {k: ex.submit(_complete, srv.url, p, 6) for k, p in (("a", a), ("b", b), ("c", c))}
            together = {k: f.result()["choices"][0]["text"] for k, f in futs.items()}
        assert together == alone
        # b's sequence ended with its prompt and its first 5 answer tokens;
        # a prompt of b alone and then other tokens continues its prompt only
        first = _complete(srv.url, b, 1)  # a sequence of exactly b
        assert first["choices"][0]["text"] == alone["b"][:len(first["choices"][0]["text"])]
        cont = _complete(srv.url, ext, 6)
        assert cont["usage"]["prompt_tokens_details"]["cached_tokens"] == len(b)
        assert cont["choices"][0]["text"] == scratch["choices"][0]["text"]
        # a prompt that continues a's prompt but not its answer (a chat's next
        # turn, whose template renders the answer otherwise): the snapshot
        # the server took where a's prompt ended
        r = _complete(srv.url, nxt, 4)
        assert r["usage"]["prompt_tokens_details"]["cached_tokens"] == len(a)
        assert r["choices"][0]["text"] == scratch_nxt["choices"][0]["text"]
        # sharing b's first 10 tokens only: no snapshot of that prefix
        part = np.concatenate([b[:10], a[1:]])
        r = _complete(srv.url, part, 2)
        assert r["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    finally:
        srv.kill()


def test_qwen35_choices_start_from_the_first_ones_prompt(pasada_bin):
    """n choices of one prompt on a recurrent model: the first keeps its
    state one token before the prompt's end, and every other choice starts
    there and decodes only the last prompt token (prefix-cache hits of
    n_prompt - 1 each); greedy, all give the text the prompt gives alone."""
    (a, _), _, _ = load_fixture("qwen35")
    srv = Server(pasada_bin, MODEL, "--parallel", "4")
    try:
        alone = _complete(srv.url, a, 5)
        before = srv.wait_idle()["pasada_prefix_cache_hit_tokens_total"]
        # a second prompt of the same request too: each prompt's choices
        # start from their own prompt
        b = np.concatenate([a[:4], a[:3]])
        r = requests.post(srv.url + "/v1/completions", timeout=60,
                          json={"prompt": [[int(t) for t in a], [int(t) for t in b]], "n": 3,
                                "max_tokens": 5, "temperature": 0})
        assert r.status_code == 200, r.text
        texts = [c["text"] for c in sorted(r.json()["choices"], key=lambda c: c["index"])]
        assert texts[:3] == [alone["choices"][0]["text"]] * 3
        assert len(set(texts[3:])) == 1
        hits = srv.wait_idle()["pasada_prefix_cache_hit_tokens_total"] - before
        # the first choices reuse nothing (the lone request's snapshot of
        # the whole of a leaves no token to decode); the others n_prompt - 1
        assert hits == 2 * (len(a) - 1) + 2 * (len(b) - 1), hits
    finally:
        srv.kill()


def test_qwen35_chat_resumes_where_each_prompt_ended(pasada_bin):
    """`pasada chat` on a recurrent model: the tiny model's answers are
    random bytes, which the next turn's rendering may tokenize otherwise;
    each turn reuses at least the previous turn's whole prompt (the state
    snapshot taken where it ended), never more than it decoded."""
    res = subprocess.run([str(pasada_bin), "chat", "-m", str(MODEL), "--chat-template", "chatml", "-c", "1024",
                          "-n", "8", "--temp", "0"], input="hello there\nsecond turn\nthird\nfourth one\n",
                         capture_output=True, text=True, errors="replace", timeout=120)
    assert res.returncode == 0, res.stderr
    turns = [tuple(int(g) for g in m.groups()[1:]) for m in TURN_RE.finditer(res.stderr)]
    assert len(turns) == 4, res.stderr
    assert turns[0][1] == 0
    for (pre0, reused0, gen0), (pre1, reused1, gen1) in zip(turns, turns[1:]):
        assert pre0 + reused0 <= reused1 <= pre0 + reused0 + gen0, turns


def _defects():
    import gguf
    U32 = gguf.GGUFValueType.UINT32
    return {
        "conv taps": (dict(tensor_fn=lambda n, a: a[:, :3] if n == "blk.1.ssm_conv1d.weight" else None),
                      "ssm_conv1d"),
        "value heads not a multiple": (dict(set_kv={"qwen35.ssm.time_step_rank": (U32, 3)}), "value heads"),
        "state size 0": (dict(set_kv={"qwen35.ssm.state_size": (U32, 0)}), "ssm.state_size"),
        "positive A": (dict(tensor_fn=lambda n, a: -a if n == "blk.0.ssm_a" else None), "ssm_a"),
        "no gated norm": (dict(drop_tensors=("blk.2.ssm_norm.weight",)), "ssm_norm"),
        "q without its gate": (dict(tensor_fn=lambda n, a: a[:128] if n == "blk.3.attn_q.weight" else None),
                               "attn_q"),
        "state rows": (dict(tensor_fn=lambda n, a: a[:-1] if n == "blk.0.attn_qkv.weight" else None), "attn_qkv"),
        # multi-token prediction: the last block named an MTP layer without its nextn tensors,
        # two such layers, or all the blocks
        "mtp layer without nextn": (dict(set_kv={"qwen35.nextn_predict_layers": (U32, 1)}), "nextn.eh_proj"),
        "two mtp layers": (dict(set_kv={"qwen35.nextn_predict_layers": (U32, 2)}), "nextn_predict_layers"),
        "only mtp layers": (dict(set_kv={"qwen35.nextn_predict_layers": (U32, 4)}), "nextn_predict_layers"),
    }


@pytest.mark.parametrize("case", list(_defects()))
def test_qwen35_defective_file_is_one_line(pasada_bin, case, tmp_path):
    """A file with one defect in what qwen35 adds (state shapes, head counts,
    decay rates) is refused at load with one line that names it."""
    kw, hint = _defects()[case]
    refused_with_one_line(pasada_bin, MODEL, kw, hint, tmp_path)


def refused_with_one_line(pasada_bin, model, kw, hint, tmp_path):
    """A copy of `model` with the defect of _copy_gguf's arguments kw is
    refused at load (`pasada info`) with one line containing hint."""
    path = tmp_path / model.name
    _copy_gguf(model, path, **kw)
    res = subprocess.run([str(pasada_bin), "info", str(path)], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=60)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1 and lines[0].startswith("pasada: "), res.stderr
    assert hint in lines[0], lines[0]
