"""`pasada embed` against an independent computation: the final hidden states
of the tiny parity models (tests/fixtures/tiny, made by
scripts/make-tiny-models.py) from the numpy forward pass of
test_arch_parity.reference_forward (which reads only the GGUF), pooled (last,
mean, cls) and L2-normalised here. pasada runs with an F16 KV cache and its
fast kernels, so the bound is test_arch_parity's for F16 (3e-3 of the largest
value; measured worst in the test's output with -s)."""
import json
import subprocess

import numpy as np
import pytest

from conftest import FIXTURES
from test_arch_parity import reference_forward

TEXTS = ["hello world", "the quick brown fox jumps over the lazy dog, twice over", "a"]


def run_embed(pasada_bin, model, *args, stdin=None):
    return subprocess.run([str(pasada_bin), "embed", "-m", str(model), *args], input=stdin,
                          capture_output=True, text=True, timeout=120)


def token_ids(pasada_bin, model, text):
    p = subprocess.run([str(pasada_bin), "tokenize", "-m", str(model), "-p", text], capture_output=True,
                       text=True, timeout=60, check=True)
    return [int(t) for t in p.stdout.split()]


def pool(h, how, normalize):
    v = {"last": h[-1], "mean": h.mean(axis=0), "cls": h[0]}[how]
    return v / np.linalg.norm(v) if normalize else v


@pytest.mark.parametrize("arch", ["llama", "qwen3", "gemma3"])
@pytest.mark.parametrize("how", ["last", "mean", "cls"])
def test_embed_equals_reference_hidden_states(pasada_bin, arch, how, tmp_path):
    model = FIXTURES / "tiny" / f"{arch}.gguf"
    inputs = tmp_path / "in.txt"
    inputs.write_text("\n".join(TEXTS) + "\n")
    for normalize in (True, False):
        p = run_embed(pasada_bin, model, "-f", str(inputs), "--pooling", how,
                      "--normalize" if normalize else "--no-normalize")
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        assert len(lines) == len(TEXTS)
        for text, line in zip(TEXTS, lines):
            got = np.array(json.loads(line), np.float64)
            want = pool(reference_forward(model, token_ids(pasada_bin, model, text), hidden=True), how,
                        normalize)
            assert got.shape == want.shape
            err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
            print(f"{arch} {how} normalize={normalize} {text[:12]!r}: {err:.2e}")
            assert err <= 3e-3, (text, err)
            if normalize:
                assert abs(np.linalg.norm(got) - 1.0) < 1e-5


def test_embed_prompt_stdin_and_crlf_agree(pasada_bin):
    model = FIXTURES / "tiny" / "qwen3.gguf"
    one = run_embed(pasada_bin, model, "-p", TEXTS[0])
    lines = run_embed(pasada_bin, model, stdin=TEXTS[0] + "\r\n" + TEXTS[1])
    assert one.returncode == 0 and lines.returncode == 0, one.stderr + lines.stderr
    out = lines.stdout.splitlines()
    assert len(out) == 2 and out[0] == one.stdout.strip()
    assert out[1] != out[0]


def test_embed_usage_errors(pasada_bin):
    model = FIXTURES / "tiny" / "qwen3.gguf"
    h = subprocess.run([str(pasada_bin), "embed", "--help"], capture_output=True, text=True)
    assert h.returncode == 0 and "--pooling" in h.stdout and "--no-normalize" in h.stdout
    bad = run_embed(pasada_bin, model, "-p", "x", "--pooling", "max")
    assert bad.returncode == 2 and "--pooling" in bad.stderr and "max" in bad.stderr
    both = run_embed(pasada_bin, model, "-p", "x", "-f", "y")
    assert both.returncode == 2
    # an empty line is an input without tokens (these models add no BOS)
    empty = run_embed(pasada_bin, model, stdin="a\n\nb\n")
    assert empty.returncode == 1 and "input 2" in empty.stderr


def test_embed_on_vulkan(pasada_bin, vulkan_device, tmp_path):
    """Decoder embeddings (the output norm's hidden states) on Vulkan."""
    model = FIXTURES / "tiny" / "qwen3.gguf"
    p = run_embed(pasada_bin, model, "-p", TEXTS[1], "--pooling", "mean", "--device", vulkan_device)
    assert p.returncode == 0, p.stderr
    got = np.array(json.loads(p.stdout), np.float64)
    want = pool(reference_forward(model, token_ids(pasada_bin, model, TEXTS[1]), hidden=True), "mean", True)
    assert float(np.max(np.abs(got - want)) / np.max(np.abs(want))) <= 3e-3
