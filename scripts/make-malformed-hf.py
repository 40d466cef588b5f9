#!/usr/bin/env python3
"""make-malformed-hf.py: the corpus of broken Hugging Face model folders that
pasada must reject with one clear error line (tests/e2e/test_malformed_hf.py).

Writes, deterministically and with the standard library only:

    tests/fixtures/malformed-hf/valid/    a tiny complete llama folder
        (config.json, tokenizer.json, tokenizer_config.json, model.safetensors:
        seeded random F32 weights, a byte-level BPE vocabulary of 258 tokens)
    tests/fixtures/malformed-hf/<case>/   that folder with one defect, named
        for it (CASES below: st-* the safetensors files and their index,
        config-* config.json, tok-* tokenizer.json and tokenizer_config.json,
        model-* a tensor the loader must refuse)

Usage: make-malformed-hf.py [--root REPO]
"""
import argparse
import json
import pathlib
import random
import shutil
import struct

N_VOCAB, N_EMBD, N_FF, N_HEAD, N_HEAD_KV, HEAD_DIM = 258, 8, 16, 2, 1, 4

CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": N_EMBD,
          "intermediate_size": N_FF, "num_attention_heads": N_HEAD, "num_key_value_heads": N_HEAD_KV,
          "head_dim": HEAD_DIM, "num_hidden_layers": 1, "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
          "rope_theta": 10000.0, "vocab_size": N_VOCAB, "tie_word_embeddings": True, "bos_token_id": 256,
          "eos_token_id": 257}


def byte_tokens():
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    out, n = [], 0
    for b in range(256):
        if b in keep:
            out.append(chr(b))
        else:
            out.append(chr(256 + n))
            n += 1
    return out


def tokenizer():
    vocab = {t: i for i, t in enumerate(byte_tokens())}
    added = [{"id": 256 + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, c in enumerate(["<|bos|>", "<|eos|>"])]
    for a in added:
        vocab[a["content"]] = a["id"]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            "post_processor": None, "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "byte_fallback": False, "vocab": vocab,
                      "merges": []}}


def weights(rng):
    shapes = {"model.embed_tokens.weight": [N_VOCAB, N_EMBD], "model.norm.weight": [N_EMBD]}
    p = "model.layers.0."
    shapes.update({p + "input_layernorm.weight": [N_EMBD], p + "post_attention_layernorm.weight": [N_EMBD],
                   p + "self_attn.q_proj.weight": [N_HEAD * HEAD_DIM, N_EMBD],
                   p + "self_attn.k_proj.weight": [N_HEAD_KV * HEAD_DIM, N_EMBD],
                   p + "self_attn.v_proj.weight": [N_HEAD_KV * HEAD_DIM, N_EMBD],
                   p + "self_attn.o_proj.weight": [N_EMBD, N_HEAD * HEAD_DIM],
                   p + "mlp.gate_proj.weight": [N_FF, N_EMBD], p + "mlp.up_proj.weight": [N_FF, N_EMBD],
                   p + "mlp.down_proj.weight": [N_EMBD, N_FF]})
    out = {}
    for name in sorted(shapes):
        n = 1
        for d in shapes[name]:
            n *= d
        vals = [1.0] * n if name.endswith("norm.weight") else [rng.uniform(-0.5, 0.5) for _ in range(n)]
        out[name] = (shapes[name], struct.pack(f"<{n}f", *vals))
    return out


def safetensors(tensors, header_edit=None, raw_header=None, length=None, dtype="F32"):
    """tensors: name -> (shape, bytes); header_edit(header) may change the
    header dict; raw_header replaces its JSON bytes; length the length field."""
    header, offset = {}, 0
    for name, (shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    if header_edit:
        header_edit(header)
    h = raw_header if raw_header is not None else json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h) if length is None else length) + h + b"".join(d for _, d in tensors.values())


def jdump(obj):
    return json.dumps(obj, indent=1).encode()


def write(dir_, files):
    shutil.rmtree(dir_, ignore_errors=True)
    dir_.mkdir(parents=True)
    for name, data in files.items():
        if data is not None:
            (dir_ / name).write_bytes(data)


def cases(base, w):
    """name -> function(files dict) making the defect in a copy of the base."""
    L = "model.layers.0."

    def st(**kw):
        return lambda f: f.__setitem__("model.safetensors", safetensors(w, **kw))

    def edit_cfg(fn):
        def go(f):
            c = json.loads(f["config.json"])
            fn(c)
            f["config.json"] = jdump(c)
        return go

    def edit_tok(fn):
        def go(f):
            t = json.loads(f["tokenizer.json"])
            fn(t)
            f["tokenizer.json"] = jdump(t)
        return go

    def hdr(fn):
        return st(header_edit=fn)

    def shards(index, files):
        def go(f):
            del f["model.safetensors"]
            f["model.safetensors.index.json"] = jdump({"metadata": {}, "weight_map": index})
            f.update(files)
        return go

    names = sorted(w)
    half = {n: w[n] for n in names[: len(names) // 2]}
    rest = {n: w[n] for n in names[len(names) // 2:]}
    dup = json.dumps({names[0]: {"dtype": "F32", "shape": [N_EMBD], "data_offsets": [0, 32]}})[:-1]
    dup2 = json.dumps({names[0]: {"dtype": "F32", "shape": [N_EMBD], "data_offsets": [32, 64]}})[1:]
    dup = (dup + ", " + dup2).encode()
    deep = b"{\"__metadata__\": " + b"[" * 5000 + b"]" * 5000 + b"}"
    cfg_deep = b"{\"a\": " + b"[" * 100000 + b"]" * 100000 + b"}"

    def overlap(h):
        h[names[1]]["data_offsets"] = [h[names[0]]["data_offsets"][0], h[names[0]]["data_offsets"][0] +
                                       h[names[1]]["data_offsets"][1] - h[names[1]]["data_offsets"][0]]

    return {
        "st-missing": lambda f: f.pop("model.safetensors"),
        "st-too-short": lambda f: f.__setitem__("model.safetensors", b"\x10\x00\x00"),
        "st-header-length-past-end": st(length=1 << 40),
        "st-header-not-json": st(raw_header=b"{\"a\": [1, 2,, 3]}"),
        "st-header-not-utf8": st(raw_header=b"{\"caf\xe9\": 1}"),
        "st-header-deeply-nested": st(raw_header=deep),
        "st-header-not-object": st(raw_header=b"[1, 2, 3]"),
        "st-offsets-past-end": hdr(lambda h: h[names[-1]].__setitem__("data_offsets", [h[names[-1]]["data_offsets"][0], 1 << 50])),
        "st-offsets-reversed": hdr(lambda h: h[names[0]].__setitem__("data_offsets", [8, 4])),
        "st-offsets-overlap": hdr(overlap),
        "st-dtype-shape-mismatch": hdr(lambda h: h[names[0]].__setitem__("shape", [N_VOCAB + 1, N_EMBD])),
        "st-dtype-unknown": hdr(lambda h: h[names[0]].__setitem__("dtype", "F7")),
        "st-dtype-unsupported": hdr(lambda h: h[names[0]].__setitem__("dtype", "I64")),
        "st-shape-negative": hdr(lambda h: h[names[0]].__setitem__("shape", [-1, N_EMBD])),
        "st-shape-too-many-dims": hdr(lambda h: h[names[0]].__setitem__("shape", [1, 1, 1, 1, N_VOCAB * N_EMBD])),
        "st-duplicate-name": st(raw_header=dup),
        "st-index-missing-shard": shards({n: "model-00001-of-00002.safetensors" for n in names},
                                         {"model-00002-of-00002.safetensors": safetensors(w)}),
        "st-index-path-escape": shards({n: "../model.safetensors" for n in names}, {}),
        "st-index-tensor-not-in-shard": shards(
            {**{n: "model-00001-of-00002.safetensors" for n in names},
             names[-1]: "model-00002-of-00002.safetensors"},
            {"model-00001-of-00002.safetensors": safetensors(half),
             "model-00002-of-00002.safetensors": safetensors(rest)}),
        "st-tensor-in-two-shards": shards(
            {n: "model-00001-of-00002.safetensors" for n in names[: len(names) // 2]} |
            {n: "model-00002-of-00002.safetensors" for n in names[len(names) // 2:]},
            {"model-00001-of-00002.safetensors": safetensors(half),
             "model-00002-of-00002.safetensors": safetensors({**rest, names[0]: w[names[0]]})}),
        "config-missing": lambda f: f.pop("config.json"),
        "config-not-utf8": lambda f: f.__setitem__("config.json", f["config.json"].replace(b"llama\"", b"ll\xffama\"", 1)),
        "config-truncated": lambda f: f.__setitem__("config.json", f["config.json"][:40]),
        "config-deeply-nested": lambda f: f.__setitem__("config.json", cfg_deep),
        "config-not-object": lambda f: f.__setitem__("config.json", b"[1, 2]"),
        "config-missing-hidden-size": edit_cfg(lambda c: c.pop("hidden_size")),
        "config-layers-not-a-number": edit_cfg(lambda c: c.__setitem__("num_hidden_layers", "two")),
        "config-unknown-architecture": edit_cfg(lambda c: c.update(architectures=["GPT2LMHeadModel"], model_type="gpt2")),
        "config-rope-scaling-unsupported": edit_cfg(lambda c: c.__setitem__("rope_scaling", {"rope_type": "yarn", "factor": 4.0})),
        "tok-missing": lambda f: f.pop("tokenizer.json"),
        "tok-not-utf8": lambda f: f.__setitem__("tokenizer.json", f["tokenizer.json"].replace(b"\"BPE\"", b"\"B\xc0E\"", 1)),
        "tok-model-unigram": edit_tok(lambda t: t["model"].__setitem__("type", "Unigram")),
        "tok-byte-fallback": edit_tok(lambda t: t["model"].__setitem__("byte_fallback", True)),
        "tok-pretokenizer-unknown": edit_tok(lambda t: t.__setitem__("pre_tokenizer", {"type": "Metaspace", "replacement": "_"})),
        "tok-id-negative": edit_tok(lambda t: t["model"]["vocab"].__setitem__("A", -3)),
        "tok-id-past-vocab-size": edit_tok(lambda t: t["model"]["vocab"].__setitem__("A", 999)),
        "tok-id-duplicate": edit_tok(lambda t: t["model"]["vocab"].__setitem__("A", 66)),
        "tok-merges-not-pairs": edit_tok(lambda t: t["model"].__setitem__("merges", [["a", "b", "c"]])),
        "tok-bos-token-unknown": lambda f: f.__setitem__("tokenizer_config.json", jdump({"bos_token": "<|nope|>"})),
        "model-tensor-unknown-name": lambda f: f.__setitem__("model.safetensors", safetensors(
            {**w, L + "mlp.extra.weight": w[L + "mlp.up_proj.weight"]})),
        "model-q-proj-wrong-shape": lambda f: f.__setitem__("model.safetensors", safetensors(
            {**w, L + "self_attn.q_proj.weight": ([N_HEAD * HEAD_DIM, N_EMBD // 2], w[L + "self_attn.q_proj.weight"][1][: 4 * N_HEAD * HEAD_DIM * N_EMBD // 2])})),
        "model-down-proj-missing": lambda f: f.__setitem__("model.safetensors", safetensors(
            {n: v for n, v in w.items() if n != L + "mlp.down_proj.weight"})),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parents[1]))
    args = ap.parse_args()
    out = pathlib.Path(args.root) / "tests" / "fixtures" / "malformed-hf"
    shutil.rmtree(out, ignore_errors=True)
    w = weights(random.Random(20251204))
    base = {"config.json": jdump(CONFIG), "tokenizer.json": jdump(tokenizer()),
            "tokenizer_config.json": jdump({"bos_token": "<|bos|>", "eos_token": "<|eos|>", "add_bos_token": False}),
            "model.safetensors": safetensors(w)}
    write(out / "valid", base)
    for name, make in cases(base, w).items():
        files = dict(base)
        make(files)
        write(out / name, files)
    print(f"wrote {out} ({len(list(out.iterdir()))} folders)")


if __name__ == "__main__":
    main()
