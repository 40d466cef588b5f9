"""Qwen3.5-MoE (arch qwen35moe): the tiny fixture (tests/fixtures/tiny/qwen35moe.gguf
and its transformers folder tests/fixtures/hf/qwen35moe, made by
scripts/make-tiny-models.py from transformers' Qwen3_5MoeForCausalLM: two
Gated DeltaNet layers and one gated attention layer, each FFN a mixture of
8 experts of which 2 per token plus a gated shared expert) against
transformers' logits with an F32 cache, batched and token by token, on the
host backends, the Vulkan test device and split across it and the CPU, and
from the folder; the server's continuous batching against lone requests,
its prefix reuse and prompt lookup's drafts; defective files refused with
one line."""
import concurrent.futures as cf
import subprocess

import numpy as np
import pytest
import requests

from conftest import FIXTURES
from test_arch_parity import TOLERANCE, load_fixture, relative_error, run_eval
from test_qwen35 import _complete, _device, refused_with_one_line
from test_server import Server

MODEL = FIXTURES / "tiny" / "qwen35moe.gguf"
FOLDER = FIXTURES / "hf" / "qwen35moe"


def _check(mode, model, backend, tmp_path):
    fixture = load_fixture("qwen35moe")
    got = run_eval(mode, model, [ids for ids, _ in fixture], tmp_path, ("--kv-type", "f32", "--backend", backend))
    for i, ((ids, ref), out) in enumerate(zip(fixture, got)):
        err = relative_error(out, ref)
        print(f"\n  qwen35moe {mode} {backend} seq{i} n={len(ids)}: rel err {err:.2e}", end="")
        assert err <= TOLERANCE["f32"], f"seq{i}: rel err {err:.2e}"
        assert (out.argmax(1) == ref.argmax(1)).all(), f"seq{i}: argmax differs"


@pytest.mark.parametrize("backend", ["cpu", "ref", "vulkan", "split"])
@pytest.mark.parametrize("mode", ["logits", "logits-steps"])
def test_qwen35moe_parity(mode, backend, tmp_path, request):
    """pasada's logits are transformers' within 1e-4 of the largest (F32
    cache), and the argmax is the same at every position ("split": the two
    linear layers on the Vulkan device, the attention layer on the CPU)."""
    _check(mode, MODEL, _device(backend, request), tmp_path)


def test_qwen35moe_folder_parity(tmp_path):
    """The transformers folder (per-expert tensors, the shared expert and
    its gate as save_pretrained writes them) gives the same logits."""
    _check("logits", FOLDER, "cpu", tmp_path)


@pytest.mark.parametrize("backend", ["cpu", "vulkan"])
def test_qwen35moe_server_batching_equals_lone_requests(pasada_bin, backend, request):
    """Three requests at once (one batch of several sequences, each routed
    token by token and with its own recurrent state) give each the greedy
    text a lone request gives, on the CPU and the Vulkan test device."""
    prompts = {k: ids for k, (ids, _) in zip("abc", load_fixture("qwen35moe"))}
    srv = Server(pasada_bin, MODEL, "--parallel", "4", "--device", _device(backend, request))
    try:
        alone = {k: _complete(srv.url, p, 6)["choices"][0]["text"] for k, p in prompts.items()}
        with cf.ThreadPoolExecutor(3) as ex:
            futs = {k: ex.submit(_complete, srv.url, p, 6) for k, p in prompts.items()}
            together = {k: f.result()["choices"][0]["text"] for k, f in futs.items()}
    finally:
        srv.kill()
    assert together == alone


def test_qwen35moe_prefix_reuse_and_speculation(pasada_bin):
    """A prompt that continues an earlier request's sequence reuses exactly
    that sequence (its state snapshot and KV positions) and gives the text
    computed from scratch; prompt lookup's drafts, verified through the
    mixture and rolled back through the recurrent state, give the text
    without drafts."""
    (a, _), (b, _), (c, _) = load_fixture("qwen35moe")
    ext = np.concatenate([b, c[:9]])
    fresh = Server(pasada_bin, MODEL, "--parallel", "2")
    try:
        scratch = _complete(fresh.url, ext, 6)
        assert scratch["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    finally:
        fresh.kill()
    srv = Server(pasada_bin, MODEL, "--parallel", "2", "--lookup", "--draft-max", "4")
    try:
        _complete(srv.url, b, 1)  # a sequence of exactly b
        cont = _complete(srv.url, ext, 6)
        assert cont["usage"]["prompt_tokens_details"]["cached_tokens"] == len(b)
        assert cont["choices"][0]["text"] == scratch["choices"][0]["text"]
        rep = np.concatenate([a, a[1:], a[1:]])  # a prompt prompt lookup can draft from
        texts = []
        for spec in ({"mode": "off"}, {"mode": "lookup"}):
            r = requests.post(srv.url + "/v1/completions", json={
                "prompt": [int(t) for t in rep], "max_tokens": 40, "temperature": 0, "speculative": spec},
                timeout=120)
            assert r.status_code == 200, r.text
            texts.append(r.json()["choices"][0]["text"])
        assert texts[0] == texts[1]
        metrics = requests.get(srv.url + "/metrics", timeout=60).text
        drafted = [ln for ln in metrics.splitlines() if ln.startswith('pasada_spec_draft_tokens_total{mode="lookup"}')]
        assert drafted and int(drafted[0].split()[-1]) > 0, metrics
    finally:
        srv.kill()


def _defects():
    import gguf
    U32 = gguf.GGUFValueType.UINT32
    return {
        "expert count 0": (dict(set_kv={"qwen35moe.expert_count": (U32, 0)}), "expert_count"),
        "expert count 600": (dict(set_kv={"qwen35moe.expert_count": (U32, 600)}), "expert_count"),
        "more used than experts": (dict(set_kv={"qwen35moe.expert_used_count": (U32, 9)}), "expert_used_count"),
        "shared width 0": (dict(set_kv={"qwen35moe.expert_shared_feed_forward_length": (U32, 0)}),
                           "expert_shared_feed_forward_length"),
        "shared gate shape": (dict(tensor_fn=lambda n, a: a[:-1] if n == "blk.1.ffn_gate_inp_shexp.weight" else None),
                              "ffn_gate_inp_shexp"),
        "shared up shape": (dict(tensor_fn=lambda n, a: a[:-1] if n == "blk.2.ffn_up_shexp.weight" else None),
                            "ffn_up_shexp"),
        "no shared gate": (dict(drop_tensors=("blk.0.ffn_gate_inp_shexp.weight",)), "ffn_gate_inp_shexp"),
        "experts' shape": (dict(tensor_fn=lambda n, a: a[:-1] if n == "blk.0.ffn_down_exps.weight" else None),
                           "ffn_down_exps"),
    }


@pytest.mark.parametrize("case", list(_defects()))
def test_qwen35moe_defective_file_is_one_line(pasada_bin, case, tmp_path):
    """A file with one defect in what qwen35moe adds (expert counts, the
    shared expert's width, gate and shapes) is refused at load with one
    line that names it."""
    kw, hint = _defects()[case]
    refused_with_one_line(pasada_bin, MODEL, kw, hint, tmp_path)


@pytest.mark.parametrize("drop", ["shared_expert_intermediate_size", "num_experts"])
def test_qwen35moe_folder_without_a_key_is_one_line(pasada_bin, drop, tmp_path):
    """A folder whose config.json lacks a key the mixture needs is refused
    with one line naming config.json and the key."""
    import json
    import shutil
    folder = tmp_path / "qwen35moe"
    shutil.copytree(FOLDER, folder)
    cfg = json.loads((folder / "config.json").read_text())
    del cfg[drop]
    (folder / "config.json").write_text(json.dumps(cfg))
    res = subprocess.run([str(pasada_bin), "info", str(folder)], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=60)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1 and "config.json" in lines[0] and drop in lines[0], res.stderr
