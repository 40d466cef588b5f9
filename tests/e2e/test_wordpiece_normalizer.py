"""WordPiece (BERT) with the normalizer flags of tokenizer.ggml.normalizer:
a cased vocabulary (lowercase false, accents kept) and one that lowercases
but keeps accents, against the `tokenizers` library's ids on trained
vocabularies (tests/fixtures/tokenizer/wordpiece/, written by
scripts/make-wordpiece-fixtures.py); the GGUF files are written here,
vocabulary only, spelled as llama.cpp's converter spells BERT's ("\\u2581"
before a word-initial piece, "##" dropped). The default (both flags true)
is all-MiniLM-L6-v2's, tested in test_bert.py."""
import json
import subprocess

import pytest

from conftest import BUILD, FIXTURES
from test_raw_bpe import serve, vocab_gguf

WP = FIXTURES / "tokenizer" / "wordpiece"


def write_gguf(path, doc, lowercase, strip_accents):
    special = set(doc["special"].values())
    spelled = [t if i in special else t[2:] if t.startswith("##") else "\u2581" + t
               for i, t in enumerate(doc["tokens"])]
    ids = doc["special"]
    keys = {"tokenizer.ggml.bos_token_id": ids["[CLS]"],
            "tokenizer.ggml.seperator_token_id": ids["[SEP]"],
            "tokenizer.ggml.unknown_token_id": ids["[UNK]"],
            "tokenizer.ggml.padding_token_id": ids["[PAD]"],
            "tokenizer.ggml.normalizer.lowercase": lowercase,
            "tokenizer.ggml.normalizer.strip_accents": strip_accents}
    types = [3 if i in special else 1 for i in range(len(spelled))]
    return vocab_gguf(path, "bert", "bert", "default", spelled, types, keys=keys)


def encode_all(kind, path, texts):
    return serve(kind, path, ["encs " + json.dumps(t) for t in texts])[1]


@pytest.mark.parametrize("kind", ["release", "asan"])
@pytest.mark.parametrize("name", ["cased", "lowercase-only"])
def test_wordpiece_normalizer_flags_encode_as_the_tokenizers_library(name, kind, tmp_path):
    doc = json.loads((WP / f"{name}.json").read_text(encoding="utf-8"))
    # strip_accents absent follows lowercase (as Hugging Face's None does);
    # the cased vocabulary also with it written out
    variants = [(doc["lowercase"], None), (doc["lowercase"], doc["strip_accents"])]
    for i, (lowercase, strip) in enumerate(variants):
        if strip is None and doc["strip_accents"] != doc["lowercase"]:
            continue
        path = write_gguf(tmp_path / f"{name}-{i}.gguf", doc, lowercase, strip)
        got = encode_all(kind, path, [t for t, _ in doc["cases"]])
        wrong = [f"{t!r}: tokenizers {want}, pasada {ids}" for (t, want), ids in zip(doc["cases"], got) if ids != want]
        assert not wrong, "\n".join(wrong)


def test_wordpiece_defaults_lowercase_and_strip_accents(tmp_path):
    """No flags in the file: lowercased and accents stripped, as llama.cpp
    reads a bert vocabulary (the cased vocabulary then meets "Café" as
    "cafe")."""
    doc = json.loads((WP / "cased.json").read_text(encoding="utf-8"))
    path = write_gguf(tmp_path / "default.gguf", doc, None, None)
    folded = encode_all("release", path, ["Café NAÏVE"])[0]
    as_written = encode_all("release", path, ["cafe naive"])[0]
    assert folded == as_written


def test_wordpiece_stripping_accents_without_lowercasing_is_refused(tmp_path):
    doc = json.loads((WP / "cased.json").read_text(encoding="utf-8"))
    path = write_gguf(tmp_path / "strip-only.gguf", doc, False, True)
    res = subprocess.run([str(BUILD / "tok_tool"), str(path), "info"], capture_output=True, text=True, timeout=60)
    assert res.returncode != 0 and res.stderr.count("\n") == 1 and "strip_accents" in res.stderr, res.stderr
