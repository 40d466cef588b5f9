"""SentencePiece-style tokenizer.json in Hugging Face folders (-m DIR): a BPE
with byte_fallback whose spaces become "\u2581" (Llama 2's and Mistral's
legacy normalizer Prepend + Replace, transformers' Metaspace pre-tokenizer,
Gemma's Replace) reads as a "llama" (SentencePiece) vocabulary: scores from
the merges' ranks, <0xNN> byte pieces, the space prefix as the definition
says (src/format/hf_tokenizer.c).

Fixtures (scripts/make-hf-fixtures.py): one vocabulary trained with the
`tokenizers` library, merges as transformers' converters write them;
tests/fixtures/hf/llama-spm/ the tiny llama (BF16) with the legacy
tokenizer, spm-metaspace/ and spm-gemma/ the other two definitions of the
same vocabulary; spm-cases.json the `tokenizers` library's ids of tricky
strings (BOS added, special-token text parsed); llama-spm.json
transformers' greedy continuation of a prompt and its last logits.
"""
import json
import shutil

import numpy as np
import pytest

import gguf

from hf_folder import HF
from test_arch_parity import relative_error, run_eval
from test_hf import pasada

CASES = json.loads((HF / "spm-cases.json").read_text())


def folder_of(style, tmp_path):
    """llama-spm's folder with the style's tokenizer files."""
    if style == "legacy":
        return HF / "llama-spm"
    d = tmp_path / style
    shutil.copytree(HF / "llama-spm", d)
    for f in (HF / f"spm-{style}").iterdir():
        shutil.copy(f, d / f.name)
    return d


@pytest.mark.parametrize("style", sorted(CASES))
def test_ids_equal_the_tokenizers_library(style, tmp_path):
    folder = folder_of(style, tmp_path)
    bad = []
    for text, want in CASES[style]:
        got = [int(t) for t in pasada("tokenize", "-m", folder, "-p", text).stdout.split()]
        if got != want:
            bad.append(f"{text!r}: tokenizers {want}, pasada {got}")
    assert not bad, "\n".join(bad)
    assert any(3 <= i < 259 for _, ids in CASES[style] for i in ids), "no case falls back to bytes"


def test_converted_vocabulary_is_sentencepiece(tmp_path):
    """convert writes the llama vocabulary: scores, byte-typed <0xNN>
    pieces, no merges; the prefix rule as the definition says; and the
    converted file tokenizes as the folder does."""
    for style, prefix, first in (("legacy", True, False), ("metaspace", True, True), ("gemma", False, False)):
        out = tmp_path / f"{style}.gguf"
        pasada("convert", folder_of(style, tmp_path), out)
        r = gguf.GGUFReader(str(out))
        f = r.fields
        assert bytes(f["tokenizer.ggml.model"].parts[-1]).decode() == "llama"
        assert "tokenizer.ggml.merges" not in f
        assert bool(f["tokenizer.ggml.add_space_prefix"].parts[-1][0]) == prefix
        assert ("pasada.tokenizer.space_prefix_first" in f) == first
        types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data]
        assert types[3:259] == [6] * 256 and types[1] == 3  # <0xNN> byte, <s> control
        scores = [float(f["tokenizer.ggml.scores"].parts[i][0]) for i in f["tokenizer.ggml.scores"].data]
        assert len(scores) == len(types) and min(scores) < 0
        for text, want in CASES[style][:6]:
            assert [int(t) for t in pasada("tokenize", "-m", out, "-p", text).stdout.split()] == want


def test_llama_folder_runs_end_to_end(tmp_path):
    """The tiny llama with the legacy tokenizer: the prompt's ids, the last
    logits (BF16 weights: within test_hf's tolerance of transformers read
    back in F32) and the greedy text are transformers'."""
    ref = json.loads((HF / "llama-spm.json").read_text())
    folder = HF / "llama-spm"
    ids = [int(t) for t in pasada("tokenize", "-m", folder, "-p", ref["prompt"]).stdout.split()]
    assert ids == ref["prompt_ids"]
    logits = run_eval("logits", folder, [np.array(ids)], tmp_path, ("--kv-type", "f32", "--backend", "cpu"))[0]
    err = relative_error(logits[-1], np.array(ref["last_logits"], np.float32))
    print(f"\n  llama-spm last logits: rel err {err:.2e}")
    assert err <= 1e-4
    text = pasada("run", "-m", folder, "-p", ref["prompt"], "-n", str(len(ref["ids"])), "--temp", "0",
                  "--no-stats").stdout
    assert text == ref["text"]


@pytest.mark.parametrize("case", ["metaspace-split", "always-scheme", "lowercase-normalizer"])
def test_unrecognised_spm_definition_is_one_line(case, tmp_path):
    folder = folder_of("metaspace", tmp_path)
    tj = json.loads((folder / "tokenizer.json").read_text())
    if case == "metaspace-split":
        tj["pre_tokenizer"]["split"] = True
    elif case == "always-scheme":
        tj["pre_tokenizer"]["prepend_scheme"] = "always"
    else:
        tj["normalizer"] = {"type": "Lowercase"}
    (folder / "tokenizer.json").write_text(json.dumps(tj))
    res = pasada("tokenize", "-m", folder, "-p", "x", check=False)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1 and "SentencePiece-style" in lines[0], res.stderr
