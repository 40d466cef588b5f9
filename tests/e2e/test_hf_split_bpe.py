"""Byte-level BPE folders whose tokenizer.json splits as a released
tokenizer does (a Sequence of Split(regex, Isolated) and Digits(individual)
ending in ByteLevel without its own regex: Qwen3.5's, Mistral NeMo's
tekken, tiktoken o200k's gpt-4o, DeepSeek V3's three Splits with line
breaks written as characters, DeepSeek Coder's four Splits and Digits,
Llama 3's with ignore_merges (llama-bpe) and without (dbrx)) read as that
llama.cpp pre-tokenizer (src/format/hf_tokenizer.c: the regexes, in order,
of a row of src/tokenizer/pretok.c's table), and encode tricky strings to
the `tokenizers` library's ids. Fixtures: tests/fixtures/hf/split-bpe/
(scripts/make-split-bpe-fixtures.py: one 700-token vocabulary trained per
pre-tokenizer, and the library's ids); the model is the tiny llama's F32
folder with embedding and output rows for the 700 tokens."""
import json
import shutil

import numpy as np
import pytest

from conftest import FIXTURES
from hf_folder import HF, read_safetensors, write_f32_folder, write_safetensors
from test_hf import pasada

SPLIT = HF / "split-bpe"
CASES = json.loads((SPLIT / "cases.json").read_text())


def folder_of(name, tmp_path):
    d = write_f32_folder(FIXTURES / "tiny" / "llama.gguf", "llama", tmp_path / name)
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(vocab_size=700, bos_token_id=None, eos_token_id=0)
    (d / "config.json").write_text(json.dumps(cfg))
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>", "add_bos_token": False}))
    for f in ("chat_template.jinja", "generation_config.json"):
        (d / f).unlink(missing_ok=True)
    shutil.copy(SPLIT / f"{name}.tokenizer.json", d / "tokenizer.json")
    t = read_safetensors(d / "model.safetensors")
    rng = np.random.default_rng(1)
    for k in ("model.embed_tokens.weight", "lm_head.weight"):
        t[k] = (rng.standard_normal((700, t[k].shape[1])) * 0.02).astype(np.float32)
    write_safetensors(d / "model.safetensors", t)
    return d


@pytest.mark.parametrize("name", sorted(CASES))
def test_split_regex_folder_encodes_as_the_tokenizers_library(name, tmp_path):
    folder = folder_of(name, tmp_path)
    info = pasada("info", "-m", folder)
    assert f"pre-tokenizer {name}" in info.stdout + info.stderr, info.stdout
    bad = []
    for text, want in CASES[name]:
        got = [int(t) for t in pasada("tokenize", "-m", folder, "-p", text).stdout.split()] if text else []
        if got != want:
            bad.append(f"{text!r}: tokenizers {want}, pasada {got}")
    assert not bad, "\n".join(bad)


def test_another_split_regex_is_refused_with_one_line(tmp_path):
    folder = folder_of("qwen35", tmp_path)
    tj = json.loads((folder / "tokenizer.json").read_text())
    tj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] += "|x"
    (folder / "tokenizer.json").write_text(json.dumps(tj))
    res = pasada("tokenize", "-m", folder, "-p", "hi", check=False)
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "pre_tokenizer" in res.stderr, res.stderr


def test_line_breaks_match_as_escapes_or_characters(tmp_path):
    """A regex's \\r, \\n and \\t match the characters in the table's
    regexes either way; an escaped backslash before an r is not a line
    break, and another regex is refused."""
    folder = folder_of("deepseek-v3", tmp_path)
    tj = json.loads((folder / "tokenizer.json").read_text())
    words = tj["pre_tokenizer"]["pretokenizers"][2]["pattern"]
    assert "\r\n" in words["Regex"]
    for regex, ok in ((words["Regex"].replace("\r\n", r"\r\n"), True),
                      (words["Regex"].replace("\r\n", r"\\r\n"), False),
                      (words["Regex"].replace("\r\n", "\n\r"), False)):
        words["Regex"] = regex
        (folder / "tokenizer.json").write_text(json.dumps(tj))
        res = pasada("info", "-m", folder, check=False)
        if ok:
            assert res.returncode == 0 and "pre-tokenizer deepseek-v3" in res.stdout + res.stderr, res.stderr
        else:
            assert res.returncode == 1 and "pre_tokenizer" in res.stderr, res.stderr
