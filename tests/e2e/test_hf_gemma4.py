"""Gemma 4 folders beyond test_hf.py's families loop (src/format/hf_gemma4.c):
the text model of a Gemma4ForConditionalGeneration folder, the config.json
spellings of the released checkpoints (global_head_dim and
num_global_key_value_heads where transformers 5 writes per_layer_config;
rope_parameters left to transformers' defaults), and Gemma 4's own
tokenizer.json (a SentencePiece-style BPE read as llama.cpp's "gemma4"
vocabulary) against the ids Hugging Face `tokenizers` gives on llama.cpp's
gemma-4 vocabulary corpus. The tiny models' own checks (F32 and BF16
folders against transformers, convert) are test_hf.py's."""
import json
import os
import pathlib
import struct
import subprocess

import numpy as np
import pytest

import gguf

from conftest import BUILD, FIXTURES
from hf_folder import read_safetensors, write_f32_folder, write_safetensors
from test_arch_parity import run_eval
from test_hf import pasada
from test_tokenizer import TOKEN_KEYS, gguf_token_texts
from test_vocab_corpus import VOCABS, cases

VOCAB_KEYS = TOKEN_KEYS + ("tokenizer.ggml.merges",)

TINY = FIXTURES / "tiny"
ARGS = ("--kv-type", "f32", "--backend", "cpu")


def _logits(folder, arch, tmp_path, tag):
    ids = np.load(TINY / f"{arch}.logits.npz")["ids1"]
    return run_eval("logits", folder, [ids], tmp_path / tag, ARGS)[0]


@pytest.mark.parametrize("arch", ["gemma4ple", "gemma4moe"])
def test_multimodal_folder_reads_its_text_model(arch, tmp_path):
    """A Gemma4ForConditionalGeneration folder (save_pretrained's layout:
    the text model's keys under text_config, its tensors under
    model.language_model., the vision and audio towers and their embedders
    beside it) runs its text model: the plain folder's logits, bit for bit;
    `pasada convert` writes the plain folder's GGUF file."""
    plain = write_f32_folder(TINY / f"{arch}.gguf", arch, tmp_path / "plain")
    mm = write_f32_folder(TINY / f"{arch}.gguf", arch, tmp_path / "mm")
    text = json.loads((plain / "config.json").read_text())
    text.pop("architectures")
    cfg = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "text_config": text,
           "vision_config": {"hidden_size": 16, "num_hidden_layers": 1}, "audio_config": {"hidden_size": 16},
           "image_token_id": 258880, "tie_word_embeddings": True}
    (mm / "config.json").write_text(json.dumps(cfg))
    t = {n.replace("model.", "model.language_model.", 1): v for n, v in read_safetensors(mm / "model.safetensors").items()}
    for name in ("model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.weight",
                 "model.audio_tower.layers.0.self_attn.q_proj.linear.weight",
                 "model.embed_vision.embedding_projection.weight", "model.embed_audio.embedding_projection.weight"):
        t[name] = np.ones((16, 16), np.float32)
    write_safetensors(mm / "model.safetensors", t)
    assert np.array_equal(_logits(plain, arch, tmp_path, "a"), _logits(mm, arch, tmp_path, "b"))
    pasada("convert", plain, tmp_path / "plain.gguf")
    pasada("convert", mm, tmp_path / "mm.gguf")
    a, b = (gguf.GGUFReader(str(tmp_path / f)) for f in ("plain.gguf", "mm.gguf"))
    assert sorted(x.name for x in a.tensors) == sorted(x.name for x in b.tensors)
    assert all(np.array_equal(x.data, y.data) for x, y in zip(sorted(a.tensors, key=lambda x: x.name),
                                                             sorted(b.tensors, key=lambda x: x.name)))


@pytest.mark.parametrize("spelling", ["global-keys", "default-rope"])
def test_config_spellings_read_as_the_same_model(spelling, tmp_path):
    """The released checkpoints' config.json names the global layers' heads
    by global_head_dim and num_global_key_value_heads (transformers 5 saves
    them as per_layer_config); a config without rope_parameters takes
    transformers' defaults (sliding: default RoPE at 1e4; full: proportional
    at 1e6 rotating a quarter: the tiny model's own). Same logits, bit for
    bit; and without attention_k_eq_v transformers gives the global layers
    the sliding layers' KV heads, so num_global_key_value_heads is not read."""
    base = write_f32_folder(TINY / "gemma4.gguf", "gemma4", tmp_path / "base")
    other = write_f32_folder(TINY / "gemma4.gguf", "gemma4", tmp_path / "other")
    cfg = json.loads((other / "config.json").read_text())
    if spelling == "global-keys":
        plc = cfg.pop("per_layer_config")
        (full,) = {json.dumps(v, sort_keys=True) for v in plc.values()}
        full = json.loads(full)
        cfg.update(global_head_dim=full["head_dim"], num_global_key_value_heads=full["num_key_value_heads"])
    else:
        assert cfg.pop("rope_parameters") == {
            "full_attention": {"partial_rotary_factor": 0.25, "rope_theta": 1000000.0, "rope_type": "proportional"},
            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}}
    (other / "config.json").write_text(json.dumps(cfg))
    assert np.array_equal(_logits(base, "gemma4", tmp_path, "a"), _logits(other, "gemma4", tmp_path, "b"))
    if spelling == "global-keys":  # without K = V the global layers keep num_key_value_heads: no longer this model
        cfg["attention_k_eq_v"] = False
        (other / "config.json").write_text(json.dumps(cfg))
        res = pasada("info", "-m", other, check=False)
        assert res.returncode == 1 and "attn_k.weight" in res.stderr and "shape" in res.stderr, res.stderr


# ---- Gemma 4's tokenizer.json ----

def _gemma4_tokenizer_json(vocab_gguf):
    """tokenizer.json as transformers' GemmaTokenizer writes Gemma 4's: BPE
    with byte_fallback over the GGUF vocabulary's tokens and merges, spaces
    replaced by "\u2581" (no prefix), a Split on " " that has none left to
    split, the control and user-defined tokens as special added tokens.
    (scripts/make-hf-fixtures.py is not needed: checked once against
    `tokenizers`, which gives the corpus' reference ids on it.)"""
    kv = gguf_token_texts(vocab_gguf, VOCAB_KEYS)
    toks = [t.decode() for t in kv["tokenizer.ggml.tokens"]]
    types = list(kv["tokenizer.ggml.token_type"])
    vocab = {t: i for i, t in enumerate(toks)}
    merges = []
    for m in (b.decode() for b in kv["tokenizer.ggml.merges"]):
        k = next(k for k, ch in enumerate(m) if ch == " " and m[:k] in vocab and m[k + 1:] in vocab)
        merges.append([m[:k], m[k + 1:]])
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, (t, ty) in enumerate(zip(toks, types)) if ty in (3, 4)]
    return toks, types, {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        "pre_tokenizer": {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                          "invert": False},
        "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges}}


def test_gemma4_tokenizer_json(tmp_path):
    """A Gemma 4 folder's tokenizer.json (made from llama.cpp's gemma-4
    vocabulary) encodes the vocabulary corpus to the reference ids (Hugging
    Face tokenizers'), and `pasada convert` writes llama.cpp's "gemma4"
    vocabulary: its tokens, token types (the chat format's channel and tool
    markers user-defined) and merges."""
    vocab_gguf = VOCABS / "ggml-vocab-gemma-4.gguf"
    if not vocab_gguf.exists():
        if os.environ.get("PASADA_REQUIRE_VOCABS") == "1":
            pytest.fail(f"{vocab_gguf} is missing: run scripts/fetch-vocabs")
        pytest.skip(f"{vocab_gguf} is missing (scripts/fetch-vocabs)")
    toks, types, tok = _gemma4_tokenizer_json(vocab_gguf)
    d = tmp_path / "gemma4-vocab"
    d.mkdir()
    (d / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))
    (d / "tokenizer_config.json").write_text(json.dumps({"bos_token": "<bos>", "eos_token": "<eos>",
                                                         "pad_token": "<pad>", "unk_token": "<unk>"}))
    (d / "config.json").write_text(json.dumps({
        "architectures": ["Gemma4ForCausalLM"], "num_hidden_layers": 1, "hidden_size": 64, "intermediate_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "global_head_dim": 32,
        "vocab_size": len(toks)}))
    h = b"{}      "  # no weights: a vocabulary-only folder
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(h)) + h)
    todo = cases(vocab_gguf)
    reqs = "".join("encs " + json.dumps(t) + "\n" for t, _ in todo).encode()
    res = subprocess.run([str(BUILD / "tok_tool"), str(d), "serve"], input=reqs, capture_output=True, timeout=300)
    assert res.returncode == 0, res.stderr.decode(errors="replace")[-2000:]
    got = [json.loads(line) for line in res.stdout.decode().split("\n")[:-1]]
    wrong = [(t, want, ids) for (t, want), ids in zip(todo, got) if ids != want]
    assert len(got) == len(todo) and not wrong, f"{len(wrong)} of {len(todo)} differ, first: {wrong[:1]}"
    pasada("convert", d, tmp_path / "vocab.gguf")
    f = gguf_token_texts(tmp_path / "vocab.gguf", VOCAB_KEYS)
    assert f["tokenizer.ggml.model"] == b"gemma4"
    assert [t.decode() for t in f["tokenizer.ggml.tokens"]] == toks
    assert list(f["tokenizer.ggml.token_type"]) == types
    assert len(f["tokenizer.ggml.merges"]) == len(tok["model"]["merges"])


def test_projections_transformers_does_not_read_are_dropped(tmp_path):
    """Tensors a checkpoint may hold that transformers' Gemma 4 ignores (a
    v_proj on a global layer whose V is its K, with attention_k_eq_v; the
    KV-sharing layers' k_proj, v_proj, k_norm) leave the model as it is:
    the same logits, bit for bit."""
    base = write_f32_folder(TINY / "gemma4.gguf", "gemma4", tmp_path / "base")
    extra = write_f32_folder(TINY / "gemma4.gguf", "gemma4", tmp_path / "extra")
    t = read_safetensors(extra / "model.safetensors")
    rng = np.random.default_rng(4)
    t["model.layers.2.self_attn.v_proj.weight"] = rng.standard_normal((32, 64)).astype(np.float32)
    for name, shape in (("k_proj.weight", (32, 64)), ("v_proj.weight", (32, 64)), ("k_norm.weight", (16,))):
        t[f"model.layers.4.self_attn.{name}"] = rng.standard_normal(shape).astype(np.float32)
    write_safetensors(extra / "model.safetensors", t)
    assert np.array_equal(_logits(base, "gemma4", tmp_path, "a"), _logits(extra, "gemma4", tmp_path, "b"))
