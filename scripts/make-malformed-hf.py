#!/usr/bin/env python3
"""make-malformed-hf.py: the corpus of broken Hugging Face model folders that
pasada must reject with one clear error line (tests/e2e/test_malformed_hf.py).

Writes, deterministically and with the standard library only:

    tests/fixtures/malformed-hf/valid/    a tiny complete llama folder
        (config.json, tokenizer.json, tokenizer_config.json, model.safetensors:
        seeded random F32 weights, a byte-level BPE vocabulary of 258 tokens)
    tests/fixtures/malformed-hf/valid-gpt-oss/, valid-qwen35/, valid-qwen3moe/,
        valid-gemma4/
        tiny complete gpt-oss, Qwen3.5, Qwen3-MoE and Gemma 4 folders
        (transformers' tensor names and layouts; Qwen3-MoE's experts fused, as
        save_pretrained(save_original_format=False) writes them; Gemma 4 with
        KV sharing, per-layer inputs and experts)
    tests/fixtures/malformed-hf/<case>/   one of those folders with one
        defect, named for it (CASES below: st-* the safetensors files and
        their index, config-* config.json, tok-* tokenizer.json and
        tokenizer_config.json, model-* a tensor the loader must refuse,
        oss-* / q35-* / moe-* / g4-* the gpt-oss / Qwen3.5 / Qwen3-MoE / Gemma 4
        folder's own tensors and keys)

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


def llama_shapes():
    shapes = {"model.embed_tokens.weight": [N_VOCAB, N_EMBD], "model.norm.weight": [N_EMBD]}
    p = "model.layers.0."
    shapes.update({p + "input_layernorm.weight": [N_EMBD], p + "post_attention_layernorm.weight": [N_EMBD],
                   p + "self_attn.q_proj.weight": [N_HEAD * HEAD_DIM, N_EMBD],
                   p + "self_attn.k_proj.weight": [N_HEAD_KV * HEAD_DIM, N_EMBD],
                   p + "self_attn.v_proj.weight": [N_HEAD_KV * HEAD_DIM, N_EMBD],
                   p + "self_attn.o_proj.weight": [N_EMBD, N_HEAD * HEAD_DIM],
                   p + "mlp.gate_proj.weight": [N_FF, N_EMBD], p + "mlp.up_proj.weight": [N_FF, N_EMBD],
                   p + "mlp.down_proj.weight": [N_EMBD, N_FF]})
    return shapes


# gpt-oss: 2 layers (windowed, full), 2 experts of 4 of which 1, untied
N_EXPERT, N_FF_EXP = 2, 4
OSS_CONFIG = {**CONFIG, "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
              "intermediate_size": N_FF_EXP, "num_hidden_layers": 2, "num_local_experts": N_EXPERT,
              "num_experts_per_tok": 1, "sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"],
              "tie_word_embeddings": False, "attention_bias": True, "swiglu_limit": 7.0,
              "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                                  "original_max_position_embeddings": 16, "beta_fast": 32.0, "beta_slow": 1.0}}
del OSS_CONFIG["rope_theta"]


def oss_shapes():
    shapes = {"model.embed_tokens.weight": [N_VOCAB, N_EMBD], "model.norm.weight": [N_EMBD],
              "lm_head.weight": [N_VOCAB, N_EMBD]}
    for i in range(2):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": [N_EMBD], p + "post_attention_layernorm.weight": [N_EMBD],
                       p + "self_attn.q_proj.weight": [N_HEAD * HEAD_DIM, N_EMBD],
                       p + "self_attn.q_proj.bias": [N_HEAD * HEAD_DIM],
                       p + "self_attn.k_proj.weight": [N_HEAD_KV * HEAD_DIM, N_EMBD],
                       p + "self_attn.k_proj.bias": [N_HEAD_KV * HEAD_DIM],
                       p + "self_attn.v_proj.weight": [N_HEAD_KV * HEAD_DIM, N_EMBD],
                       p + "self_attn.v_proj.bias": [N_HEAD_KV * HEAD_DIM],
                       p + "self_attn.o_proj.weight": [N_EMBD, N_HEAD * HEAD_DIM],
                       p + "self_attn.o_proj.bias": [N_EMBD], p + "self_attn.sinks": [N_HEAD],
                       p + "mlp.router.weight": [N_EXPERT, N_EMBD], p + "mlp.router.bias": [N_EXPERT],
                       p + "mlp.experts.gate_up_proj": [N_EXPERT, N_EMBD, 2 * N_FF_EXP],
                       p + "mlp.experts.gate_up_proj_bias": [N_EXPERT, 2 * N_FF_EXP],
                       p + "mlp.experts.down_proj": [N_EXPERT, N_FF_EXP, N_EMBD],
                       p + "mlp.experts.down_proj_bias": [N_EXPERT, N_EMBD]})
    return shapes


# Qwen3.5: a linear-attention layer (1 key head of 4, 2 value heads of 4, 2
# taps) and a full-attention layer (output gate, head norms), tied
LIN_K, LIN_V, LIN_DK, LIN_DV, CONV = 1, 2, 4, 4, 2
Q35_CONFIG = {**CONFIG, "architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5_text",
              "num_hidden_layers": 2, "full_attention_interval": 2, "layer_types": ["linear_attention", "full_attention"],
              "linear_conv_kernel_dim": CONV, "linear_key_head_dim": LIN_DK, "linear_value_head_dim": LIN_DV,
              "linear_num_key_heads": LIN_K, "linear_num_value_heads": LIN_V,
              "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}}
del Q35_CONFIG["rope_theta"]


def q35_shapes():
    shapes = {"model.embed_tokens.weight": [N_VOCAB, N_EMBD], "model.norm.weight": [N_EMBD]}
    qkv = 2 * LIN_K * LIN_DK + LIN_V * LIN_DV
    for i in range(2):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": [N_EMBD], p + "post_attention_layernorm.weight": [N_EMBD],
                       p + "mlp.gate_proj.weight": [N_FF, N_EMBD], p + "mlp.up_proj.weight": [N_FF, N_EMBD],
                       p + "mlp.down_proj.weight": [N_EMBD, N_FF]})
    p = "model.layers.0.linear_attn."
    shapes.update({p + "in_proj_qkv.weight": [qkv, N_EMBD], p + "in_proj_z.weight": [LIN_V * LIN_DV, N_EMBD],
                   p + "in_proj_b.weight": [LIN_V, N_EMBD], p + "in_proj_a.weight": [LIN_V, N_EMBD],
                   p + "conv1d.weight": [qkv, 1, CONV], p + "A_log": [LIN_V], p + "dt_bias": [LIN_V],
                   p + "norm.weight": [LIN_DV], p + "out_proj.weight": [N_EMBD, LIN_V * LIN_DV]})
    p = "model.layers.1.self_attn."
    shapes.update({p + "q_proj.weight": [2 * N_HEAD * HEAD_DIM, N_EMBD],
                   p + "k_proj.weight": [N_HEAD_KV * HEAD_DIM, N_EMBD],
                   p + "v_proj.weight": [N_HEAD_KV * HEAD_DIM, N_EMBD],
                   p + "o_proj.weight": [N_EMBD, N_HEAD * HEAD_DIM],
                   p + "q_norm.weight": [HEAD_DIM], p + "k_norm.weight": [HEAD_DIM]})
    return shapes


# Qwen3-MoE: 2 experts of 2 (2 ff != n_embd: the orientation is plain) of which 1, fused: gate_up_proj [E][2 ff][n_embd]
# (each expert's gate rows, then its up rows), down_proj [E][n_embd][ff]
N_FF_MOE = 2
MOE_CONFIG = {**CONFIG, "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_experts": N_EXPERT,
              "num_experts_per_tok": 1, "moe_intermediate_size": N_FF_MOE, "norm_topk_prob": True}


def moe_shapes():
    shapes = {n: v for n, v in llama_shapes().items() if ".mlp." not in n}
    p = "model.layers.0."
    shapes.update({p + "self_attn.q_norm.weight": [HEAD_DIM], p + "self_attn.k_norm.weight": [HEAD_DIM],
                   p + "mlp.gate.weight": [N_EXPERT, N_EMBD],
                   p + "mlp.experts.gate_up_proj": [N_EXPERT, 2 * N_FF_MOE, N_EMBD],
                   p + "mlp.experts.down_proj": [N_EXPERT, N_EMBD, N_FF_MOE]})
    return shapes


# Gemma 4: 4 layers (sliding, full, sliding, full), the last two sharing the
# KV of the first two; the full layers' heads 8 wide and V their K
# (attention_k_eq_v, num_global_key_value_heads 1); per-layer inputs of 2;
# 2 experts of 2 (of which 1) beside each dense FFN; tied
G4_LAYERS, G4_HD_FULL, G4_P = 4, 8, 2
G4_CONFIG = {**CONFIG, "architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text",
             "num_hidden_layers": G4_LAYERS, "global_head_dim": G4_HD_FULL, "num_global_key_value_heads": 1,
             "attention_k_eq_v": True, "num_kv_shared_layers": 2, "sliding_window": 4,
             "layer_types": ["sliding_attention", "full_attention"] * 2, "hidden_size_per_layer_input": G4_P,
             "vocab_size_per_layer_input": N_VOCAB, "enable_moe_block": True, "num_experts": N_EXPERT,
             "top_k_experts": 1, "moe_intermediate_size": N_FF_MOE, "final_logit_softcapping": 30.0,
             "hidden_activation": "gelu_pytorch_tanh",
             "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                 "full_attention": {"rope_type": "proportional", "rope_theta": 1000000.0,
                                                    "partial_rotary_factor": 0.25}}}
del G4_CONFIG["rope_theta"]


def g4_shapes():
    LP = G4_LAYERS * G4_P
    shapes = {"model.embed_tokens.weight": [N_VOCAB, N_EMBD], "model.norm.weight": [N_EMBD],
              "model.embed_tokens_per_layer.weight": [N_VOCAB, LP],
              "model.per_layer_model_projection.weight": [LP, N_EMBD],
              "model.per_layer_projection_norm.weight": [G4_P]}
    for i in range(G4_LAYERS):
        p, full = f"model.layers.{i}.", i % 2 == 1
        hd = G4_HD_FULL if full else HEAD_DIM
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm", "post_per_layer_input_norm", "pre_feedforward_layernorm_2",
                  "post_feedforward_layernorm_1", "post_feedforward_layernorm_2"):
            shapes[p + n + ".weight"] = [N_EMBD]
        shapes.update({p + "self_attn.q_proj.weight": [N_HEAD * hd, N_EMBD], p + "self_attn.q_norm.weight": [hd],
                       p + "self_attn.o_proj.weight": [N_EMBD, N_HEAD * hd],
                       p + "mlp.gate_proj.weight": [N_FF, N_EMBD], p + "mlp.up_proj.weight": [N_FF, N_EMBD],
                       p + "mlp.down_proj.weight": [N_EMBD, N_FF], p + "layer_scalar": [1],
                       p + "per_layer_input_gate.weight": [G4_P, N_EMBD],
                       p + "per_layer_projection.weight": [N_EMBD, G4_P],
                       p + "router.proj.weight": [N_EXPERT, N_EMBD], p + "router.scale": [N_EMBD],
                       p + "router.per_expert_scale": [N_EXPERT],
                       p + "experts.gate_up_proj": [N_EXPERT, 2 * N_FF_MOE, N_EMBD],
                       p + "experts.down_proj": [N_EXPERT, N_EMBD, N_FF_MOE]})
        if i < 2:  # the layers with their own KV
            shapes.update({p + "self_attn.k_proj.weight": [N_HEAD_KV * hd, N_EMBD], p + "self_attn.k_norm.weight": [hd]})
            if not full:
                shapes[p + "self_attn.v_proj.weight"] = [N_HEAD_KV * hd, N_EMBD]
    return shapes


def weights(rng, shapes):
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
        "config-rope-scaling-unsupported": edit_cfg(lambda c: c.__setitem__("rope_scaling", {"rope_type": "dynamic", "factor": 4.0})),
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


def family_cases(w, base_cfg):
    """The gpt-oss (w, base_cfg: its folder's) or Qwen3.5 folder's defects."""
    def st(tensors):
        return lambda f: f.__setitem__("model.safetensors", safetensors(tensors))

    def cfg(fn):
        def go(f):
            c = json.loads(f["config.json"])
            fn(c)
            f["config.json"] = jdump(c)
        return go

    def without(name):
        return st({n: v for n, v in w.items() if n != name})

    def reshaped(name, shape):  # same values, read in another shape (the byte count must fit)
        n = 1
        for d in shape:
            n *= d
        vals = (w[name][1] * (4 * n // len(w[name][1]) + 1))[: 4 * n]
        return st({**w, name: (shape, vals)})

    L = "model.layers.0."
    if base_cfg["model_type"] == "gpt_oss":
        E = L + "mlp.experts."
        return {
            "oss-gate-up-odd": reshaped(E + "gate_up_proj", [N_EXPERT, N_EMBD, 2 * N_FF_EXP - 1]),
            "oss-gate-up-expert-count": reshaped(E + "gate_up_proj", [N_EXPERT + 1, N_EMBD, 2 * N_FF_EXP]),
            "oss-down-proj-wrong-shape": reshaped(E + "down_proj", [N_EXPERT, N_FF_EXP, N_EMBD + 1]),
            "oss-gate-up-bias-2d-missing-dim": reshaped(E + "gate_up_proj_bias", [N_EXPERT * 2 * N_FF_EXP]),
            "oss-sinks-missing": without(L + "self_attn.sinks"),
            "oss-router-bias-missing": without(L + "mlp.router.bias"),
            # MXFP4 blocks (U8 [E][rows][groups][16]) without their scales
            "oss-mxfp4-scales-missing": lambda f: f.__setitem__("model.safetensors", safetensors(
                {**{n: v for n, v in w.items() if n != E + "gate_up_proj"},
                 E + "gate_up_proj_blocks": ([N_EXPERT, 2 * N_FF_EXP, 1, 16], b"\x11" * 16 * N_EXPERT * 2 * N_FF_EXP)},
                header_edit=lambda h: h[E + "gate_up_proj_blocks"].__setitem__("dtype", "U8"))),
            "oss-mxfp4-blocks-f32": lambda f: f.__setitem__("model.safetensors", safetensors(
                {**{n: v for n, v in w.items() if n != E + "gate_up_proj"},
                 E + "gate_up_proj_blocks": ([N_EXPERT, 2 * N_FF_EXP, 1, 4], w[E + "gate_up_proj"][1][: 4 * N_EXPERT * 2 * N_FF_EXP * 4])})),
            "oss-layer-types-unsupported": cfg(lambda c: c.__setitem__("layer_types", ["full_attention"] * 2)),
            "oss-swiglu-limit": cfg(lambda c: c.__setitem__("swiglu_limit", 10.0)),
            "oss-experts-missing-key": cfg(lambda c: c.pop("num_local_experts")),
        }
    if base_cfg["model_type"] == "qwen3_moe":
        E = L + "mlp.experts."
        return {
            "moe-gate-up-wrong-shape": reshaped(E + "gate_up_proj", [N_EXPERT, 2 * N_FF_MOE + 2, N_EMBD]),
            "moe-gate-up-2d": reshaped(E + "gate_up_proj", [N_EXPERT * 2 * N_FF_MOE, N_EMBD]),
            "moe-down-proj-expert-count": reshaped(E + "down_proj", [N_EXPERT + 1, N_EMBD, N_FF_MOE]),
            "moe-down-proj-missing": without(E + "down_proj"),
            # gate_up_proj as transformers holds it, down_proj as x @ W
            "moe-orientation-mixed": reshaped(E + "down_proj", [N_EXPERT, N_FF_MOE, N_EMBD]),
            "moe-fused-and-per-expert": st({**w, E + "0.up_proj.weight": ([N_FF_MOE, N_EMBD],
                                                                         w[E + "down_proj"][1][: 4 * N_FF_MOE * N_EMBD])}),
            "moe-past-the-layers": st({**w, "model.layers.1.mlp.experts.down_proj": w[E + "down_proj"]}),
        }
    if base_cfg["model_type"] == "gemma4_text":
        return {
            "g4-layer-types-length": cfg(lambda c: c.__setitem__("layer_types", ["sliding_attention", "full_attention"] * 3)),
            "g4-layer-types-unknown": cfg(lambda c: c["layer_types"].__setitem__(1, "linear_attention")),
            "g4-per-layer-config-key": cfg(lambda c: c.__setitem__("per_layer_config", {"1": {"intermediate_size": 4}})),
            "g4-heads-differ-in-kind": cfg(lambda c: c.__setitem__("per_layer_config", {"1": {"head_dim": 8},
                                                                                         "3": {"head_dim": 16}})),
            "g4-shared-kv-no-source": cfg(lambda c: c.__setitem__("num_kv_shared_layers", 3)),
            "g4-rope-type-unsupported": cfg(lambda c: c["rope_parameters"]["full_attention"].__setitem__("rope_type", "yarn")),
            "g4-vocab-per-layer-differs": cfg(lambda c: c.__setitem__("vocab_size_per_layer_input", 100)),
            "g4-bidirectional": cfg(lambda c: c.__setitem__("use_bidirectional_attention", "all")),
            "g4-multimodal-no-text-config": cfg(lambda c: c.__setitem__("architectures", ["Gemma4ForConditionalGeneration"])),
            "g4-ple-width-mismatch": cfg(lambda c: c.__setitem__("hidden_size_per_layer_input", 3)),
            "g4-ple-without-config": cfg(lambda c: c.__setitem__("hidden_size_per_layer_input", 0)),
            "g4-ple-token-table-missing": without("model.embed_tokens_per_layer.weight"),
            "g4-ple-projection-wrong-shape": reshaped("model.per_layer_model_projection.weight",
                                                      [G4_LAYERS * G4_P + 1, N_EMBD]),
            "g4-ple-layer-gate-missing": without("model.layers.1.per_layer_input_gate.weight"),
            "g4-experts-gate-up-wrong-shape": reshaped(L + "experts.gate_up_proj", [N_EXPERT, 2 * N_FF_MOE + 1, N_EMBD]),
            "g4-experts-without-config": cfg(lambda c: c.__setitem__("enable_moe_block", False)),
            "g4-expert-scale-missing": without(L + "router.per_expert_scale"),
            "g4-k-proj-missing": without("model.layers.1.self_attn.k_proj.weight"),
        }
    A = L + "linear_attn."
    return {
        "q35-in-proj-qkv-wrong-shape": reshaped(A + "in_proj_qkv.weight", [2 * LIN_K * LIN_DK + LIN_V * LIN_DV - 1, N_EMBD]),
        "q35-conv1d-wrong-shape": reshaped(A + "conv1d.weight", [2 * LIN_K * LIN_DK + LIN_V * LIN_DV, CONV]),
        "q35-a-log-missing": without(A + "A_log"),
        "q35-out-proj-missing": without(A + "out_proj.weight"),
        "q35-fused-qkvz": st({**w, A + "in_proj_qkvz.weight": w[A + "in_proj_z.weight"]}),
        "q35-q-proj-no-gate": reshaped("model.layers.1.self_attn.q_proj.weight", [N_HEAD * HEAD_DIM, N_EMBD]),
        "q35-layer-types-unsupported": cfg(lambda c: c.__setitem__("layer_types", ["full_attention", "linear_attention"])),
        "q35-value-heads-not-multiple": cfg(lambda c: c.update(linear_num_key_heads=2, linear_num_value_heads=3)),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=str(pathlib.Path(__file__).resolve().parents[1]))
    args = ap.parse_args()
    out = pathlib.Path(args.root) / "tests" / "fixtures" / "malformed-hf"
    shutil.rmtree(out, ignore_errors=True)
    w = weights(random.Random(20251204), llama_shapes())
    base = {"config.json": jdump(CONFIG), "tokenizer.json": jdump(tokenizer()),
            "tokenizer_config.json": jdump({"bos_token": "<|bos|>", "eos_token": "<|eos|>", "add_bos_token": False}),
            "model.safetensors": safetensors(w)}
    write(out / "valid", base)
    for name, make in cases(base, w).items():
        files = dict(base)
        make(files)
        write(out / name, files)
    for fam, cfg, shapes in (("gpt-oss", OSS_CONFIG, oss_shapes()), ("qwen35", Q35_CONFIG, q35_shapes()),
                             ("qwen3moe", MOE_CONFIG, moe_shapes()), ("gemma4", G4_CONFIG, g4_shapes())):
        fw = weights(random.Random(20251205), shapes)
        fbase = {**base, "config.json": jdump(cfg), "model.safetensors": safetensors(fw)}
        write(out / f"valid-{fam}", fbase)
        for name, make in family_cases(fw, cfg).items():
            files = dict(fbase)
            make(files)
            write(out / name, files)
    print(f"wrote {out} ({len(list(out.iterdir()))} folders)")


if __name__ == "__main__":
    main()
