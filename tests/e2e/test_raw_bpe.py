"""BPE over UTF-8 characters with <0xNN> byte fallback, against the
`tokenizers` library: Sarvam's SentencePiece-style BPE (tokenizer.ggml.pre
"sarvam-moe": spaces as "\\u2581", lines and runs of newlines, none of
Gemma 4's rules) and the "whitespace" model (Jina's v2 zh: Hugging Face's
Whitespace pre-tokenizer, which drops whitespace and keeps words apart from
other characters, with the Lowercase normalizer when
tokenizer.ggml.normalizer.lowercase says so). Fixtures:
tests/fixtures/tokenizer/raw-bpe/ (scripts/make-raw-bpe-fixtures.py: the
vocabularies, the library's ids of tricky strings and their decodings); the
GGUF files are written here, vocabulary only."""
import json
import subprocess

import pytest

from conftest import ASAN_BUILD, BUILD, FIXTURES
from test_tokenizer import SAN_MARKS
from test_tokenizer import serve as tok_serve

RAW = FIXTURES / "tokenizer" / "raw-bpe"


def fixture(name):
    return json.loads((RAW / f"{name}.json").read_text(encoding="utf-8"))


def vocab_gguf(path, arch, model, pre, tokens, types, merges=None, keys=None):
    """A vocabulary-only GGUF: tokenizer.ggml.model, .pre (None: left out),
    .tokens, .token_type, .merges (when given), and `keys` (full key ->
    value: an int as uint32, a bool as bool, None left out)."""
    import gguf
    w = gguf.GGUFWriter(str(path), arch=arch)
    w.add_tokenizer_model(model)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    if merges is not None:
        w.add_token_merges(merges)
    for key, value in (keys or {}).items():
        if isinstance(value, bool):
            w.add_bool(key, value)
        elif value is not None:
            w.add_uint32(key, value)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_gguf(path, doc, model, pre, add_bos=False, lowercase=None):
    return vocab_gguf(path, "llama", model, pre, doc["tokens"], doc["types"], doc["merges"],
                      {"tokenizer.ggml.bos_token_id": doc["bos"], "tokenizer.ggml.eos_token_id": doc["eos"],
                       "tokenizer.ggml.add_bos_token": add_bos, "tokenizer.ggml.normalizer.lowercase": lowercase})


def serve(kind, gguf_path, requests):
    """tok_tool's `info` of the file and its answers to the requests."""
    exe = (BUILD if kind == "release" else ASAN_BUILD) / "tok_tool"
    answers = tok_serve(exe, gguf_path, requests, timeout=120)
    info = subprocess.run([str(exe), str(gguf_path), "info"], capture_output=True, text=True, timeout=60)
    assert info.returncode == 0 and not any(m in info.stderr for m in SAN_MARKS), info.stderr[-3000:]
    return json.loads(info.stdout), answers


def check_cases(kind, gguf_path, doc, decode):
    cases = doc["cases"]
    reqs = ["encs " + json.dumps(t) for t, _, _ in cases]
    if decode:
        reqs += ["decs " + " ".join(map(str, ids)) for _, ids, _ in cases]
    info, got = serve(kind, gguf_path, reqs)
    wrong = [f"{t!r}: tokenizers {want}, pasada {ids}" for (t, want, _), ids in zip(cases, got) if ids != want]
    if decode:
        wrong += [f"decode {ids}: tokenizers {want!r}, pasada {text!r}"
                  for (_, ids, want), text in zip(cases, got[len(cases):]) if text != want]
    assert not wrong, "\n".join(wrong)
    return info


@pytest.mark.parametrize("kind", ["release", "asan"])
def test_sarvam_moe_encodes_and_decodes_as_the_tokenizers_library(kind, tmp_path):
    doc = fixture("sarvam-moe")
    path = write_gguf(tmp_path / "sarvam.gguf", doc, "gpt2", "sarvam-moe")
    info = check_cases(kind, path, doc, decode=True)
    assert info["pre"] == "sarvam-moe", info


def test_sarvam_moe_adds_bos_only_when_the_file_says_so(tmp_path):
    """Unlike Gemma 4 (whose rules llama.cpp applies to "gemma4" and
    "granite-embed-multi-311m"), no BOS is forced."""
    doc = fixture("sarvam-moe")
    text = json.dumps("Hello world")
    for add_bos in (False, True):
        path = write_gguf(tmp_path / f"sarvam-{add_bos}.gguf", doc, "gpt2", "sarvam-moe", add_bos=add_bos)
        _, (plain, with_specials) = serve("release", path, ["encs " + text, "enca " + text])
        assert with_specials == ([doc["bos"]] if add_bos else []) + plain


def test_sarvam_moe_keeps_runs_of_newlines_to_the_merges(tmp_path):
    """Six newlines are one token of the vocabulary that no merge makes:
    Gemma 4's rule (a run of newlines that is a token stays whole) would
    pick it; Sarvam's BPE merges the run like any other text."""
    doc = fixture("sarvam-moe")
    six = doc["tokens"].index("\n" * 6)
    path = write_gguf(tmp_path / "sarvam.gguf", doc, "gpt2", "sarvam-moe")
    _, (ids,) = serve("release", path, ["encs " + json.dumps("a" + "\n" * 6 + "b")])
    assert six not in ids and len(ids) > 3, ids
    gemma = write_gguf(tmp_path / "gemma.gguf", doc, "gpt2", "granite-embed-multi-311m")
    _, (ids,) = serve("release", gemma, ["encs " + json.dumps("a" + "\n" * 6 + "b")])
    assert six in ids, ids


@pytest.mark.parametrize("kind", ["release", "asan"])
@pytest.mark.parametrize("name", ["whitespace", "whitespace-lower"])
def test_whitespace_model_encodes_as_the_tokenizers_library(name, kind, tmp_path):
    doc = fixture(name)
    path = write_gguf(tmp_path / f"{name}.gguf", doc, "whitespace", "whitespace", lowercase=doc["lowercase"])
    info = check_cases(kind, path, doc, decode=False)
    assert info["pre"] == "whitespace", info


def test_whitespace_model_lowercases_only_when_the_file_says_so(tmp_path):
    """tokenizer.ggml.normalizer.lowercase: absent is false (as llama.cpp
    reads the "whitespace" pre-tokenizer); a byte-level "gpt2" model named
    with the "whitespace" pre-tokenizer is read the same way."""
    doc = fixture("whitespace")
    for model, pre, lowercase in (("whitespace", None, None), ("whitespace", "whitespace", False),
                                  ("gpt2", "whitespace", None)):
        path = write_gguf(tmp_path / f"ws-{model}-{lowercase}.gguf", doc, model, pre, lowercase=lowercase)
        check_cases("release", path, doc, decode=False)
    path = write_gguf(tmp_path / "ws-lower.gguf", doc, "whitespace", "whitespace", lowercase=True)
    upper = "\u0130stanbul \u03a3\u039f\u03a6\u0399\u0391 \u023a"
    lower = "i\u0307stanbul \u03c3\u03bf\u03c6\u03b9\u03b1 \u2c65"
    _, got = serve("release", path, ["encs " + json.dumps(upper), "encs " + json.dumps(lower)])
    assert got[0] != [] and got[0] == got[1], got


def test_whitespace_model_decodes_its_pieces_and_bytes(tmp_path):
    """The pieces are the text itself (no byte-level map, no "\\u2581"):
    decoding joins them, <0xNN> tokens as their bytes; the whitespace the
    pre-tokenizer dropped does not come back."""
    doc = fixture("whitespace")
    path = write_gguf(tmp_path / "ws.gguf", doc, "whitespace", "whitespace")
    texts = ["snake_case a\u203fb x\u200dy", "😀 emoji 🎉!", "日本語テキスト。中文", "a\u2581b c"]
    _, got = serve("release", path, ["encs " + json.dumps(t) for t in texts])
    _, dec = serve("release", path, ["decs " + " ".join(map(str, ids)) for ids in got])
    assert dec == ["".join(t.split()) for t in texts]
