#!/usr/bin/env python3
"""make-tiny-models.py: tiny random models and their reference logits, for the
architecture parity tests (tests/e2e/test_arch_parity.py).

For each architecture (llama, gemma3, qwen2, qwen3, gemma2, phi3, gemma4 (and
gemma4ple: with per-layer inputs), the
hybrid qwen35, and the mixtures of experts qwen3moe, mixtral, gpt-oss and
qwen35moe, mixtral a GGUF of arch "llama" with experts) this builds a tiny, seeded,
randomly initialised model with transformers' own configuration and model
classes, converts it to an F32 GGUF file with gguf.GGUFWriter (the converter is
below, written from the documented llama.cpp conventions), runs transformers
on fixed token sequences, and writes

    tests/fixtures/tiny/<arch>.gguf         the model
    tests/fixtures/tiny/<arch>.logits.npz   ids<i> (int32), logits<i> (float32, n x vocab)

It then checks the GGUF file on its own, before pasada is ever compared with
it: an independent numpy forward pass that reads only the GGUF
(tests/e2e/test_arch_parity.py: reference_forward) must reproduce the
transformers logits; getting any convention wrong in that pass (RoPE pairing,
Gemma's window, local RoPE base, layer pattern, soft-caps, LongRoPE factors)
must move them by > 1e-2; and,
when llama-cpp-python is installed, llama.cpp itself must load the file and
agree with transformers.

Needs the heavy reference venv (torch, transformers); see docs/parity.md.
Usage: make-tiny-models.py [--out tests/fixtures/tiny] [--arch NAME]...
"""
import argparse
import importlib.util
import pathlib
import re
import shutil
import sys

import numpy as np
import torch
import transformers

import gguf

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEED = 20240611
SEQ_LENGTHS = (7, 24, 32)

# Shared shape: small, but with GQA (4 query heads over 2 kv heads) and sizes
# that are neither tiny powers of two everywhere nor equal to each other.
COMMON = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4,
              num_key_value_heads=2, head_dim=16, max_position_embeddings=128,
              rms_norm_eps=1e-6)

# Per-architecture choices, each exercising what the family adds.
ARCHS = {
    # llama: separate output matrix (untied), rotate-half Q/K permuted to
    # GGML's adjacent-pair RoPE in the GGUF.
    "llama": dict(vocab=270, layers=3, tied=False, rope_theta=10000.0),
    # gemma3: 6 layers so the default pattern gives 5 sliding + 1 global layer;
    # window 8 is far shorter than the 24/32-token sequences; local RoPE base
    # 1e4 vs global 1e6; (1 + w) norms; q/k norms; post-attention/post-ffn
    # norms; sqrt(hidden) embedding scale; GELU(tanh); tied output.
    "gemma3": dict(vocab=283, layers=6, tied=True, rope_theta=1e6, rope_local=10000.0,
                   sliding_window=8),
    # qwen2: q/k/v biases; untied output; large RoPE base.
    "qwen2": dict(vocab=297, layers=2, tied=False, rope_theta=1e6),
    # qwen3: per-head q/k RMS norms; head_dim 32, so the attention width
    # (4 x 32 = 128) differs from the hidden size (64), as in real Qwen3; tied.
    "qwen3": dict(vocab=262, layers=2, tied=True, rope_theta=1e6, head_dim=32),
    # gemma2: gemma3's layer without q/k norms; 4 layers, local and global
    # alternating from the first (local); window 8; attention scores
    # soft-capped at 1.0 and logits at 8.0, inside the values' range (the
    # sensitivity check shows each cap moves the logits); one RoPE base for
    # all layers; tied output.
    "gemma2": dict(vocab=277, layers=4, tied=True, rope_theta=10000.0, sliding_window=8,
                   attn_softcap=1.0, final_softcap=8.0, min_gap=1.5e-2),
    # phi3: fused QKV and gate-up tensors; GQA (transformers' Phi3 splits the
    # fused QKV by the kv head count); half the head rotated (partial
    # rotary factor 0.5: 8 of 16 dims); LongRoPE with original context 4, so
    # every test sequence (and pasada's test context) takes the long
    # factors; the attention factor on the tables given as Phi-3-mini-128k's
    # (sqrt(1 + ln 32 / ln 4096) = 1.19: the formula at this original context
    # would give 1.87, whose 3.5x sharper scores took the Q8 cache's error
    # past its bound); window 8 over every layer; untied output.
    "phi3": dict(vocab=289, layers=3, tied=False, rope_theta=10000.0, sliding_window=8,
                 partial_rotary=0.5, orig_ctx=4, attn_factor=1.19, min_gap=1.5e-2),
    # qwen3moe: qwen3's attention, a mixture of 7 experts (40 wide) of which
    # 3 per token, renormalised (norm_topk_prob), in every layer; untied.
    "qwen3moe": dict(vocab=271, layers=2, tied=False, rope_theta=1e6, head_dim=32, experts=7, used=3,
                     expert_ff=40),
    # mixtral: llama's attention (adjacent-pair RoPE after the Q/K
    # permutation), 5 experts of which 2, softmax over the chosen; GGUF arch
    # "llama" with llama.expert_count.
    "mixtral": dict(vocab=266, layers=2, tied=False, rope_theta=1e6, experts=5, used=2, expert_ff=48,
                    gguf_arch="llama"),
    # gpt-oss: q/k/v/o biases; attention sinks (a logit per head); every
    # other layer windowed (8) from the first; YaRN (factor 4 over an
    # original context of 32 at base 1e4, 4 x 32 the model's 128 positions:
    # the ramp spans the first 2 of 8 frequencies, the attention factor
    # 1.14; truncated, as llama.cpp applies it); 6 experts of which 2,
    # router and experts with biases,
    # the clamped SwiGLU with the experts' gate/up weights scaled up so
    # that both clamps bite; untied.
    "gpt-oss": dict(vocab=279, layers=3, tied=False, rope_theta=10000.0, experts=6, used=2, expert_ff=32,
                    sliding_window=8, yarn_factor=4.0, orig_ctx=32, min_gap=1.5e-2),
    # gemma4: 6 layers of four kinds: sliding (0, 1, 3; window 8, base 1e4)
    # and global (2; base 1e6, "proportional" RoPE rotating 2 of 8 pairs,
    # no V projection: V is K's projection, attention_k_eq_v); the last two
    # (4 sliding, 5 global) share the KV cache of layers 3 and 2 and have
    # a twice as wide FFN (use_double_wide_mlp); V normed per head; random
    # per-layer output scalars; logits soft-capped at 8. The global layers'
    # heads are twice as wide (global_head_dim 32 against head_dim 16) and
    # fewer (num_global_key_value_heads 1 against 2), as in the released
    # models (512 and 256). Norms multiply by w as stored.
    # Intermediate 64 (128 on the double-wide layers) keeps the file < 1 MB.
    "gemma4": dict(vocab=281, layers=6, tied=True, rope_theta=1e6, rope_local=10000.0, sliding_window=8,
                   final_softcap=8.0, partial_rotary=0.25, kv_shared=2, min_gap=1.5e-2, intermediate=64,
                   global_head_dim=32, global_kv_heads=1,
                   layer_types=["sliding_attention", "sliding_attention", "full_attention",
                                "sliding_attention", "sliding_attention", "full_attention"]),
    # gemma4ple: gemma4's model with per-layer inputs (Gemma 4 E2B/E4B's
    # hidden_size_per_layer_input, 8 per layer here: a token table of
    # 6 x 8 per token, the embedding's projection to it, and per layer a
    # gate to 8 and a projection back with its norm); a GGUF of arch gemma4.
    "gemma4ple": dict(vocab=281, layers=6, tied=True, rope_theta=1e6, rope_local=10000.0, sliding_window=8,
                      final_softcap=8.0, partial_rotary=0.25, kv_shared=2, min_gap=1.5e-2, intermediate=64,
                      global_head_dim=32, global_kv_heads=1, per_layer=8,
                      layer_types=["sliding_attention", "sliding_attention", "full_attention",
                                   "sliding_attention", "sliding_attention", "full_attention"]),
    # gemma4moe: gemma4's model with a mixture of experts beside every
    # layer's dense FFN (Gemma 4 26B-A4B's enable_moe_block): 4 experts 16
    # wide of which 2 per token, renormalised, the router reading
    # rmsnorm(x) * its own scale / sqrt(hidden), each chosen weight times
    # its expert's scale; the experts' fused gate_up as llama.cpp's
    # ffn_gate_up_exps; a GGUF of arch gemma4.
    "gemma4moe": dict(vocab=281, layers=6, tied=True, rope_theta=1e6, rope_local=10000.0, sliding_window=8,
                      final_softcap=8.0, partial_rotary=0.25, kv_shared=2, min_gap=1.5e-2, intermediate=64,
                      global_head_dim=32, global_kv_heads=1, experts=4, used=2, expert_ff=16,
                      layer_types=["sliding_attention", "sliding_attention", "full_attention",
                                   "sliding_attention", "sliding_attention", "full_attention"]),
    # qwen35 (Qwen3.5): 4 layers, three Gated DeltaNet linear-attention
    # layers and one full-attention layer (full_attention_interval 4); the
    # linear layers have 2 key heads of 16 and 4 value heads of 24 (so the
    # converter's V-head reordering matters), a conv kernel of 4; the full
    # layer has an output gate, q/k norms, head_dim 32 with a quarter
    # rotated (8 dims); (1 + w) norms; an FFN of 64; tied. No numpy reference: pasada is
    # compared with transformers directly (tests/e2e/test_qwen35.py).
    "qwen35": dict(vocab=279, layers=4, tied=True, intermediate=64, rope_theta=1e6, head_dim=32, partial_rotary=0.25,
                   lin_k_heads=2, lin_v_heads=4, lin_k_dim=16, lin_v_dim=24, conv_kernel=4, interval=4,
                   no_numpy_ref=True),
    # qwen35moe (Qwen3.5-MoE): qwen35's layers (two linear, one full:
    # interval 3) on a 32-wide embedding, every FFN a mixture of 8 experts
    # (16 wide) of which 2 per token, renormalised, plus a shared expert
    # (24 wide) scaled by sigmoid of its own gate; tied. Also written as a
    # transformers folder (F32, save_pretrained: tests/fixtures/hf/qwen35moe)
    # for `pasada -m DIR`. No numpy reference (tests/e2e/test_qwen35moe.py).
    "qwen35moe": dict(vocab=279, layers=3, tied=True, hidden=32, rope_theta=1e6, head_dim=32, partial_rotary=0.25,
                      lin_k_heads=2, lin_v_heads=4, lin_k_dim=16, lin_v_dim=24, conv_kernel=4, interval=3,
                      experts=8, used=2, expert_ff=16, shared_ff=24, no_numpy_ref=True, hf_folder=True),
}

BOS_ID, EOS_ID = 256, 257  # the two control tokens after the 256 byte tokens

# Phi-3-mini-4k-instruct's chat template (as llama.cpp's test-chat-template
# quotes it), written into the phi3 fixture so pasada's chat paths render the
# template the file carries.
PHI3_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}"
    "{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}"
    "{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + '\\n'}}{% endif %}{% endfor %}")


def make_config(arch, spec):
    common = dict(COMMON)
    if arch == "gpt-oss":
        common.update(vocab_size=spec["vocab"], num_hidden_layers=spec["layers"],
                      tie_word_embeddings=spec["tied"], bos_token_id=BOS_ID, eos_token_id=EOS_ID,
                      pad_token_id=None, intermediate_size=spec["expert_ff"])
        return transformers.GptOssConfig(
            **common, num_local_experts=spec["experts"], num_experts_per_tok=spec["used"],
            sliding_window=spec["sliding_window"], attention_bias=True,
            rope_parameters={"rope_type": "yarn", "rope_theta": spec["rope_theta"], "factor": spec["yarn_factor"],
                             "beta_fast": 32.0, "beta_slow": 1.0, "truncate": True,
                             "original_max_position_embeddings": spec["orig_ctx"]})
    if "head_dim" in spec:
        common["head_dim"] = spec["head_dim"]
    if "intermediate" in spec:
        common["intermediate_size"] = spec["intermediate"]
    if "hidden" in spec:
        common["hidden_size"] = spec["hidden"]
    if arch == "phi3":  # Phi3Config has no head_dim: hidden_size / heads (16)
        del common["head_dim"]
    common.update(vocab_size=spec["vocab"], num_hidden_layers=spec["layers"],
                  tie_word_embeddings=spec["tied"], bos_token_id=BOS_ID, eos_token_id=EOS_ID,
                  pad_token_id=None)
    rope = {"rope_type": "default", "rope_theta": spec["rope_theta"]}
    if arch == "llama":
        return transformers.LlamaConfig(**common, rope_parameters=rope)
    if arch == "qwen2":
        return transformers.Qwen2Config(**common, rope_parameters=rope)
    if arch == "qwen3":
        return transformers.Qwen3Config(**common, rope_parameters=rope)
    if arch == "qwen3moe":
        return transformers.Qwen3MoeConfig(**common, rope_parameters=rope, num_experts=spec["experts"],
                                           num_experts_per_tok=spec["used"],
                                           moe_intermediate_size=spec["expert_ff"], norm_topk_prob=True,
                                           decoder_sparse_step=1, mlp_only_layers=[])
    if arch == "mixtral":
        common["intermediate_size"] = spec["expert_ff"]
        return transformers.MixtralConfig(**common, rope_parameters=rope, num_local_experts=spec["experts"],
                                          num_experts_per_tok=spec["used"])
    if arch == "gemma3":
        return transformers.Gemma3TextConfig(
            **common, query_pre_attn_scalar=common["head_dim"], sliding_window=spec["sliding_window"],
            rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": spec["rope_theta"]},
                             "sliding_attention": {"rope_type": "default",
                                                   "rope_theta": spec["rope_local"]}},
            final_logit_softcapping=None, attn_logit_softcapping=None)
    if arch == "gemma2":
        return transformers.Gemma2Config(
            **common, query_pre_attn_scalar=common["head_dim"], sliding_window=spec["sliding_window"],
            rope_parameters=rope, attn_logit_softcapping=spec["attn_softcap"],
            final_logit_softcapping=spec["final_softcap"])
    if arch in ("gemma4", "gemma4ple", "gemma4moe"):
        moe = dict(enable_moe_block=True, num_experts=spec["experts"], top_k_experts=spec["used"],
                   moe_intermediate_size=spec["expert_ff"]) if "experts" in spec else {}
        return transformers.Gemma4TextConfig(**moe,
            **common, global_head_dim=spec["global_head_dim"], num_global_key_value_heads=spec["global_kv_heads"],
            sliding_window=spec["sliding_window"], layer_types=spec["layer_types"],
            rope_parameters={"full_attention": {"rope_type": "proportional", "rope_theta": spec["rope_theta"],
                                                "partial_rotary_factor": spec["partial_rotary"]},
                             "sliding_attention": {"rope_type": "default", "rope_theta": spec["rope_local"]}},
            final_logit_softcapping=spec["final_softcap"],
            hidden_size_per_layer_input=spec.get("per_layer", 0), vocab_size_per_layer_input=spec["vocab"],
            attention_k_eq_v=True, num_kv_shared_layers=spec["kv_shared"], use_double_wide_mlp=True,
            hidden_activation="gelu_pytorch_tanh")
    if arch == "phi3":
        half = int(common["hidden_size"] // common["num_attention_heads"] * spec["partial_rotary"]) // 2
        g = np.random.default_rng(SEED + 7)
        # LongRoPE factors as the 128k Phi-3 models have them: >= 1, rising
        # with the wavelength (the long ones far more)
        short = [float(x) for x in np.sort(1.0 + g.random(half) * 0.5)]
        long_ = [float(x) for x in np.sort(1.0 + g.random(half) * 12.0)]
        return transformers.Phi3Config(
            **common, sliding_window=spec["sliding_window"], original_max_position_embeddings=spec["orig_ctx"],
            rope_parameters={"rope_type": "longrope", "rope_theta": spec["rope_theta"],
                             "partial_rotary_factor": spec["partial_rotary"], "short_factor": short,
                             "long_factor": long_, "original_max_position_embeddings": spec["orig_ctx"],
                             "attention_factor": spec["attn_factor"]})
    if arch == "qwen35":
        return transformers.Qwen3_5TextConfig(
            **common, rope_parameters={"rope_type": "default", "rope_theta": spec["rope_theta"],
                                       "partial_rotary_factor": spec["partial_rotary"],
                                       "mrope_section": [2, 1, 1], "mrope_interleaved": True},
            linear_conv_kernel_dim=spec["conv_kernel"], linear_key_head_dim=spec["lin_k_dim"],
            linear_value_head_dim=spec["lin_v_dim"], linear_num_key_heads=spec["lin_k_heads"],
            linear_num_value_heads=spec["lin_v_heads"], full_attention_interval=spec["interval"])
    if arch == "qwen35moe":
        del common["intermediate_size"]
        return transformers.Qwen3_5MoeTextConfig(
            **common, rope_parameters={"rope_type": "default", "rope_theta": spec["rope_theta"],
                                       "partial_rotary_factor": spec["partial_rotary"],
                                       "mrope_section": [2, 1, 1], "mrope_interleaved": True},
            linear_conv_kernel_dim=spec["conv_kernel"], linear_key_head_dim=spec["lin_k_dim"],
            linear_value_head_dim=spec["lin_v_dim"], linear_num_key_heads=spec["lin_k_heads"],
            linear_num_value_heads=spec["lin_v_heads"], full_attention_interval=spec["interval"],
            num_experts=spec["experts"], num_experts_per_tok=spec["used"], moe_intermediate_size=spec["expert_ff"],
            shared_expert_intermediate_size=spec["shared_ff"])
    raise ValueError(arch)


# The seed offset of each architecture: its index in ARCHS, except those
# whose committed fixtures were drawn at another: the mixtures of experts at
# 4 and 5 (as gemma2 and phi3 were), gpt-oss, gemma4 and qwen35 at 8
# (distinct models, so sharing an offset is fine).
SEED_INDEX = {"qwen3moe": 4, "mixtral": 5, "gpt-oss": 8, "gemma4": 8, "qwen35": 8, "qwen35moe": 9, "gemma4ple": 10,
              "gemma4moe": 11}


def seed_index(arch, k):
    return SEED_INDEX.get(arch, k)


def model_class(arch):
    return {"llama": transformers.LlamaForCausalLM, "qwen2": transformers.Qwen2ForCausalLM,
            "qwen3": transformers.Qwen3ForCausalLM, "gemma3": transformers.Gemma3ForCausalLM,
            "gemma2": transformers.Gemma2ForCausalLM, "phi3": transformers.Phi3ForCausalLM,
            "qwen3moe": transformers.Qwen3MoeForCausalLM, "mixtral": transformers.MixtralForCausalLM,
            "gpt-oss": transformers.GptOssForCausalLM,
            "gemma4": transformers.Gemma4ForCausalLM, "gemma4ple": transformers.Gemma4ForCausalLM,
            "gemma4moe": transformers.Gemma4ForCausalLM,
            "qwen35": transformers.Qwen3_5ForCausalLM, "qwen35moe": transformers.Qwen3_5MoeForCausalLM}[arch]


def randomize(model, arch, gen):
    """Overwrites every parameter with seeded random values. Matrices get
    std 1/sqrt(fan_in) so activations stay O(1) through the layers; the
    embedding std is chosen so logits are spread (not flat, not one-hot); norm
    weights are random so their convention ((1 + w) for Gemma) is tested;
    biases are random so their addition is tested."""
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if arch in ("qwen35", "qwen35moe") and name.endswith("linear_attn.norm.weight"):  # a plain w
                p.copy_(0.6 + 0.8 * torch.rand(p.shape, generator=gen))
            elif arch in ("qwen35", "qwen35moe") and name.endswith(".A_log"):  # decay rates exp(A_log) in [0.05, 1]
                p.copy_(torch.log(0.05 + 0.95 * torch.rand(p.shape, generator=gen)))
            elif arch in ("qwen35", "qwen35moe") and name.endswith(".dt_bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
            elif arch in ("qwen35", "qwen35moe") and "conv1d" in name:  # [channels][1][kernel]
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
            elif name.endswith("router.scale") or name.endswith("per_expert_scale"):  # gemma4moe
                p.copy_(0.6 + 0.8 * torch.rand(p.shape, generator=gen))
            elif name.endswith("norm.weight") or re.search(r"layernorm_[12]\.weight$", name):
                if arch in ("gemma2", "gemma3", "qwen35", "qwen35moe"):  # Gemma scales by (1 + w)
                    p.copy_((torch.rand(p.shape, generator=gen) - 0.5) * 0.8)
                else:
                    p.copy_(0.6 + 0.8 * torch.rand(p.shape, generator=gen))
            elif name.endswith("bias"):
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
            elif "embed_tokens" in name:
                std = 0.3 if arch in ("gemma2", "gemma3") else 0.4
                p.copy_(torch.randn(p.shape, generator=gen) * std)
            elif p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=gen) / np.sqrt(p.shape[1]))
            elif name.endswith("sinks"):  # gpt-oss: a logit per head, about the scores' size
                p.copy_(torch.randn(p.shape, generator=gen) * 1.5)
            elif p.dim() == 3 and arch == "gpt-oss":  # [n_expert][cols][rows]: x @ W
                # the gate/up products scaled up so that both clamps of the
                # SwiGLU (at 7) bite, the down product down to match
                scale = 4.0 if "gate_up" in name else 0.25
                p.copy_(torch.randn(p.shape, generator=gen) * scale / np.sqrt(p.shape[1]))
            elif p.dim() == 3:  # experts: [n_expert][rows][cols]
                p.copy_(torch.randn(p.shape, generator=gen) / np.sqrt(p.shape[2]))
            else:
                raise RuntimeError(f"unexpected parameter {name}")
        if arch == "gemma4moe":  # the router reads a vector of norm ~1: logits spread ~1, not ~1/8
            for layer in model.model.layers:
                layer.router.proj.weight.mul_(np.sqrt(model.config.hidden_size))
        if arch in ("gemma4", "gemma4ple", "gemma4moe"):  # the layer scalars are buffers: random too, so they are tested
            for layer in model.model.layers:
                layer.layer_scalar.copy_(0.5 + torch.rand(1, generator=gen))
        if not model.config.tie_word_embeddings:
            # Scale the untied head like the tied ones so logits have a similar spread.
            model.lm_head.weight.mul_(0.4 * np.sqrt(model.config.hidden_size))


# ---- the converter: HF state dict -> GGUF, llama.cpp naming and conventions ----

def permute_rope(w, n_head):
    """HF stores Q/K rows per head as [first halves | second halves] (rotate-half
    RoPE); GGML's 'normal' RoPE rotates adjacent pairs, so llama conversions
    interleave the two halves of each head's rows."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def byte_tokens():
    """The 256 GPT-2 byte-level tokens, in byte order: printable bytes stand for
    themselves, the others are shifted to code points from 256 on."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    mapping, n = {}, 0
    for b in range(256):
        if b in keep:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + n)
            n += 1
    return [mapping[b] for b in range(256)]


def tokenizer_vocab(vocab_size):
    """256 byte tokens, <|bos|>, <|eos|>, then merged tokens up to vocab_size.
    Each merge joins two existing tokens, so the merges list is valid BPE."""
    tokens = byte_tokens() + ["<|bos|>", "<|eos|>"]
    types = [1] * 256 + [3, 3]  # normal, then control
    merges = []
    pairs = [("Ġ", c) for c in "tasowcbpfmdhilnre"] + \
            [tuple(p) for p in "th he in er an re on at en nd ti es or te of ed is it al ar st to nt ng se ha as ou io le".split()]
    for a, b in pairs:
        if len(tokens) >= vocab_size:
            break
        tokens.append(a + b)
        types.append(1)
        merges.append(f"{a} {b}")
    if len(tokens) != vocab_size:
        raise RuntimeError(f"not enough merges for vocab {vocab_size}")
    return tokens, types, merges


def start_gguf(path, gguf_arch, name, cfg, ff, head_dim, kv_heads=None):
    """An F32 GGUF writer of arch gguf_arch, named "pasada tiny <name>",
    with the sizes every family's file starts with (ff: the FFN width, one
    or one a layer; kv_heads: the KV head count, one a layer, where it is
    not the config's one for all)."""
    w = gguf.GGUFWriter(str(path), gguf_arch)
    w.add_name(f"pasada tiny {name}")
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_block_count(cfg.num_hidden_layers)
    w.add_context_length(cfg.max_position_embeddings)
    w.add_embedding_length(cfg.hidden_size)
    w.add_feed_forward_length(ff)
    w.add_head_count(cfg.num_attention_heads)
    w.add_head_count_kv(cfg.num_key_value_heads if kv_heads is None else kv_heads)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    return w


def add_tokenizer(w, vocab_size):
    """The byte-level BPE vocabulary of tokenizer_vocab, with its BOS/EOS ids."""
    tokens, types, merges = tokenizer_vocab(vocab_size)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(BOS_ID)
    w.add_eos_token_id(EOS_ID)
    w.add_add_bos_token(False)


def tensor_reader(sd):
    """name -> the state dict's tensor as a float32 numpy array."""
    return lambda name: sd[name].detach().to(torch.float32).numpy()


def add_ffn(w, t, p, b):
    """Layer p's gated FFN (transformers' names) as GGUF block b's."""
    for x in ("gate", "up", "down"):
        w.add_tensor(b + f"ffn_{x}.weight", t(p + f"mlp.{x}_proj.weight"))


def finish_gguf(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# Gemma 4's per-layer tensors of the per-layer inputs and of the experts:
# llama.cpp's name, transformers' (under model.layers.N.)
GEMMA4_PER_LAYER = (("inp_gate.weight", "per_layer_input_gate.weight"), ("proj.weight", "per_layer_projection.weight"),
                    ("post_norm.weight", "post_per_layer_input_norm.weight"))
GEMMA4_EXPERTS = (("ffn_gate_inp.weight", "router.proj.weight"), ("ffn_gate_inp.scale", "router.scale"),
                  ("ffn_down_exps.scale", "router.per_expert_scale"),
                  ("ffn_gate_up_exps.weight", "experts.gate_up_proj"), ("ffn_down_exps.weight", "experts.down_proj"),
                  ("pre_ffw_norm_2.weight", "pre_feedforward_layernorm_2.weight"),
                  ("post_ffw_norm_1.weight", "post_feedforward_layernorm_1.weight"),
                  ("post_ffw_norm_2.weight", "post_feedforward_layernorm_2.weight"))


def write_gguf_gemma4(path, cfg, spec, sd):
    """Gemma 4's GGUF as llama.cpp's converter writes it: norms as stored
    (no + 1), key_length / key_length_swa the global and the sliding layers'
    head sizes, rope.dimension_count(_swa) the same, head_count_kv one count
    per layer (the sliding layers' num_key_value_heads, the global layers'
    num_global_key_value_heads), the sliding pattern
    as bools, shared_kv_layers, the double-wide layers' widths as an array,
    rope_freqs freezing the global layers' unrotated pairs (1e30), the
    layer scalars as blk.N.layer_output_scale; no V where k_eq_v; with
    per-layer inputs their token table, the embedding's projection and its
    norm, and per layer inp_gate, proj and post_norm; with experts the
    router (ffn_gate_inp, its input scale ffn_gate_inp.scale, the experts'
    weight scales ffn_down_exps.scale), the fused ffn_gate_up_exps,
    ffn_down_exps and the three more norms."""
    n_layer, hd, hd_full = cfg.num_hidden_layers, COMMON["head_dim"], spec["global_head_dim"]
    swa = [t == "sliding_attention" for t in cfg.layer_types]
    kv_heads = [COMMON["num_key_value_heads"] if s else spec["global_kv_heads"] for s in swa]
    first_shared = n_layer - cfg.num_kv_shared_layers
    ff = [cfg.intermediate_size * (2 if i >= first_shared else 1) for i in range(n_layer)]
    w = start_gguf(path, "gemma4", path.stem, cfg, ff, hd_full, kv_heads)
    w.add_key_length_swa(hd)
    w.add_value_length_swa(hd)
    w.add_rope_dimension_count(hd_full)
    w.add_rope_dimension_count_swa(hd)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(spec["rope_theta"])
    w.add_rope_freq_base_swa(spec["rope_local"])
    w.add_sliding_window(cfg.sliding_window)
    w.add_sliding_window_pattern(swa)
    w.add_shared_kv_layers(cfg.num_kv_shared_layers)
    if cfg.enable_moe_block:
        w.add_expert_count(cfg.num_experts)
        w.add_expert_used_count(cfg.top_k_experts)
        w.add_expert_feed_forward_length(cfg.moe_intermediate_size)
    P = cfg.hidden_size_per_layer_input or 0
    w.add_embedding_length_per_layer_input(P)
    w.add_final_logit_softcapping(spec["final_softcap"])
    w.add_vocab_size(cfg.vocab_size)
    add_tokenizer(w, cfg.vocab_size)

    t = tensor_reader(sd)

    n_rot = int(hd_full * spec["partial_rotary"] / 2)
    w.add_tensor("rope_freqs.weight", np.asarray([1.0] * n_rot + [1e30] * (hd_full // 2 - n_rot), dtype=np.float32))
    w.add_tensor("token_embd.weight", t("model.embed_tokens.weight"))
    if P:
        w.add_tensor("per_layer_token_embd.weight", t("model.embed_tokens_per_layer.weight"))
        w.add_tensor("per_layer_model_proj.weight", t("model.per_layer_model_projection.weight"))
        w.add_tensor("per_layer_proj_norm.weight", t("model.per_layer_projection_norm.weight"))
    for i in range(n_layer):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        for name, hf in GEMMA4_PER_LAYER if P else ():
            w.add_tensor(b + name, t(p + hf))
        w.add_tensor(b + "attn_norm.weight", t(p + "input_layernorm.weight"))
        w.add_tensor(b + "attn_q.weight", t(p + "self_attn.q_proj.weight"))
        w.add_tensor(b + "attn_q_norm.weight", t(p + "self_attn.q_norm.weight"))
        if i < first_shared:
            w.add_tensor(b + "attn_k.weight", t(p + "self_attn.k_proj.weight"))
            w.add_tensor(b + "attn_k_norm.weight", t(p + "self_attn.k_norm.weight"))
            if p + "self_attn.v_proj.weight" in sd:
                w.add_tensor(b + "attn_v.weight", t(p + "self_attn.v_proj.weight"))
        w.add_tensor(b + "attn_output.weight", t(p + "self_attn.o_proj.weight"))
        w.add_tensor(b + "post_attention_norm.weight", t(p + "post_attention_layernorm.weight"))
        w.add_tensor(b + "ffn_norm.weight", t(p + "pre_feedforward_layernorm.weight"))
        add_ffn(w, t, p, b)
        w.add_tensor(b + "post_ffw_norm.weight", t(p + "post_feedforward_layernorm.weight"))
        for name, hf in GEMMA4_EXPERTS if cfg.enable_moe_block else ():
            w.add_tensor(b + name, t(p + hf))
        w.add_tensor(b + "layer_output_scale.weight", t(p + "layer_scalar").reshape(1))
    w.add_tensor("output_norm.weight", t("model.norm.weight"))
    finish_gguf(w)


def write_gguf(path, arch, cfg, spec, sd):
    if arch in ("gemma4", "gemma4ple", "gemma4moe"):
        return write_gguf_gemma4(path, cfg, spec, sd)
    n_head, n_head_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_head
    rope_dim = int(head_dim * spec.get("partial_rotary", 1.0))
    ff = spec["shared_ff"] if arch == "qwen35moe" else cfg.intermediate_size
    w = start_gguf(path, spec.get("gguf_arch", arch), arch, cfg, ff, head_dim)
    w.add_rope_dimension_count(rope_dim)
    w.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    w.add_rope_freq_base(spec["rope_theta"])
    w.add_vocab_size(cfg.vocab_size)
    if arch in ("gemma2", "gemma3", "phi3", "gpt-oss"):
        w.add_sliding_window(spec["sliding_window"])
    if "experts" in spec:  # llama.cpp's keys; the llama arch's experts are feed_forward_length wide
        w.add_expert_count(spec["experts"])
        w.add_expert_used_count(spec["used"])
        if arch in ("qwen3moe", "gpt-oss", "qwen35moe"):
            w.add_expert_feed_forward_length(spec["expert_ff"])
        if arch == "qwen35moe":
            w.add_expert_shared_feed_forward_length(spec["shared_ff"])
    if arch in ("qwen35", "qwen35moe"):  # llama.cpp's Qwen3-Next keys
        w.add_ssm_conv_kernel(spec["conv_kernel"])
        w.add_ssm_state_size(spec["lin_k_dim"])
        w.add_ssm_group_count(spec["lin_k_heads"])
        w.add_ssm_time_step_rank(spec["lin_v_heads"])
        w.add_ssm_inner_size(spec["lin_v_dim"] * spec["lin_v_heads"])
        w.add_full_attention_interval(spec["interval"])
        w.add_rope_dimension_sections([2, 1, 1, 0])
    if arch == "gemma2":
        w.add_attn_logit_softcapping(spec["attn_softcap"])
        w.add_final_logit_softcapping(spec["final_softcap"])
    if arch == "gpt-oss":  # YaRN as llama.cpp's converter writes it
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(spec["yarn_factor"])
        w.add_rope_scaling_orig_ctx_len(spec["orig_ctx"])
    if arch == "phi3":  # LongRoPE as llama.cpp's converter writes it
        orig = spec["orig_ctx"]
        scale = cfg.max_position_embeddings / orig
        w.add_rope_scaling_orig_ctx_len(orig)
        factor = cfg.rope_parameters.get("attention_factor") or float(np.sqrt(1 + np.log(scale) / np.log(orig)))
        w.add_rope_scaling_attn_factors(factor)

    add_tokenizer(w, cfg.vocab_size)
    if arch == "phi3":
        w.add_chat_template(PHI3_CHAT_TEMPLATE)

    t = tensor_reader(sd)

    def norm(name):
        x = t(name)
        return x + 1.0 if arch in ("gemma2", "gemma3", "qwen35", "qwen35moe") else x  # GGUF stores Gemma's (1 + w)

    w.add_tensor("token_embd.weight", t("model.embed_tokens.weight"))
    if arch in ("qwen35", "qwen35moe"):
        write_qwen35_layers(w, cfg, spec, t, norm)
    if arch == "phi3":
        rp = cfg.rope_parameters
        w.add_tensor("rope_factors_long.weight", np.asarray(rp["long_factor"], dtype=np.float32))
        w.add_tensor("rope_factors_short.weight", np.asarray(rp["short_factor"], dtype=np.float32))
    for i in range(cfg.num_hidden_layers if arch not in ("qwen35", "qwen35moe") else 0):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", norm(p + "input_layernorm.weight"))
        if arch == "phi3":  # fused: q rows, then k, then v (as transformers splits them)
            w.add_tensor(b + "attn_qkv.weight", t(p + "self_attn.qkv_proj.weight"))
            w.add_tensor(b + "attn_output.weight", t(p + "self_attn.o_proj.weight"))
            w.add_tensor(b + "ffn_norm.weight", norm(p + "post_attention_layernorm.weight"))
            w.add_tensor(b + "ffn_up.weight", t(p + "mlp.gate_up_proj.weight"))  # gate rows, then up
            w.add_tensor(b + "ffn_down.weight", t(p + "mlp.down_proj.weight"))
            continue
        q, k = t(p + "self_attn.q_proj.weight"), t(p + "self_attn.k_proj.weight")
        if spec.get("gguf_arch", arch) == "llama":
            q, k = permute_rope(q, n_head), permute_rope(k, n_head_kv)
        w.add_tensor(b + "attn_q.weight", q)
        w.add_tensor(b + "attn_k.weight", k)
        w.add_tensor(b + "attn_v.weight", t(p + "self_attn.v_proj.weight"))
        if arch in ("qwen2", "gpt-oss"):
            for x in "qkv":
                w.add_tensor(b + f"attn_{x}.bias", t(p + f"self_attn.{x}_proj.bias"))
        if arch == "gpt-oss":
            w.add_tensor(b + "attn_output.bias", t(p + "self_attn.o_proj.bias"))
            w.add_tensor(b + "attn_sinks.weight", t(p + "self_attn.sinks"))
        if arch in ("qwen3", "gemma3", "qwen3moe"):
            w.add_tensor(b + "attn_q_norm.weight", norm(p + "self_attn.q_norm.weight"))
            w.add_tensor(b + "attn_k_norm.weight", norm(p + "self_attn.k_norm.weight"))
        w.add_tensor(b + "attn_output.weight", t(p + "self_attn.o_proj.weight"))
        if arch == "gpt-oss":  # llama.cpp names its FFN norm post_attention_norm
            w.add_tensor(b + "post_attention_norm.weight", norm(p + "post_attention_layernorm.weight"))
        elif arch in ("gemma2", "gemma3"):
            w.add_tensor(b + "post_attention_norm.weight", norm(p + "post_attention_layernorm.weight"))
            w.add_tensor(b + "ffn_norm.weight", norm(p + "pre_feedforward_layernorm.weight"))
            w.add_tensor(b + "post_ffw_norm.weight", norm(p + "post_feedforward_layernorm.weight"))
        else:
            w.add_tensor(b + "ffn_norm.weight", norm(p + "post_attention_layernorm.weight"))
        if arch == "gpt-oss":
            # transformers' experts multiply x @ W: gate_up [n_expert][n_embd][2 ff],
            # gate and up interleaved (even and odd columns), down [n_expert][ff][n_embd];
            # llama.cpp's 3-D tensors are [n_expert][rows][cols], biases [n_expert][rows]
            gate_up, gub = t(p + "mlp.experts.gate_up_proj"), t(p + "mlp.experts.gate_up_proj_bias")
            w.add_tensor(b + "ffn_gate_inp.weight", t(p + "mlp.router.weight"))
            w.add_tensor(b + "ffn_gate_inp.bias", t(p + "mlp.router.bias"))
            w.add_tensor(b + "ffn_gate_exps.weight", np.ascontiguousarray(gate_up[:, :, 0::2].transpose(0, 2, 1)))
            w.add_tensor(b + "ffn_up_exps.weight", np.ascontiguousarray(gate_up[:, :, 1::2].transpose(0, 2, 1)))
            w.add_tensor(b + "ffn_down_exps.weight",
                         np.ascontiguousarray(t(p + "mlp.experts.down_proj").transpose(0, 2, 1)))
            w.add_tensor(b + "ffn_gate_exps.bias", np.ascontiguousarray(gub[:, 0::2]))
            w.add_tensor(b + "ffn_up_exps.bias", np.ascontiguousarray(gub[:, 1::2]))
            w.add_tensor(b + "ffn_down_exps.bias", t(p + "mlp.experts.down_proj_bias"))
        elif "experts" in spec:
            # the router [n_expert][n_embd]; transformers' fused gate_up
            # [n_expert][2 ff][n_embd] (gate rows first) split into llama.cpp's
            # 3-D ffn_gate_exps / ffn_up_exps, down [n_expert][n_embd][ff]
            ff = spec["expert_ff"]
            gate_up = t(p + "mlp.experts.gate_up_proj")
            w.add_tensor(b + "ffn_gate_inp.weight", t(p + "mlp.gate.weight"))
            w.add_tensor(b + "ffn_gate_exps.weight", np.ascontiguousarray(gate_up[:, :ff, :]))
            w.add_tensor(b + "ffn_up_exps.weight", np.ascontiguousarray(gate_up[:, ff:, :]))
            w.add_tensor(b + "ffn_down_exps.weight", t(p + "mlp.experts.down_proj"))
        else:
            add_ffn(w, t, p, b)
    w.add_tensor("output_norm.weight", norm("model.norm.weight"))
    if not cfg.tie_word_embeddings:
        w.add_tensor("output.weight", t("lm_head.weight"))

    finish_gguf(w)


def reorder_v_heads(x, dim, n_k, n_v, head_dim):
    """llama.cpp's converter stores the linear layers' value heads tiled
    (value head j follows key head j % n_k) rather than grouped as
    transformers has them (j // (n_v / n_k)): [n_k][r][d] -> [r][n_k][d]
    along dim."""
    r = n_v // n_k
    shape = list(x.shape)
    y = x.reshape(shape[:dim] + [n_k, r, head_dim] + shape[dim + 1:])
    return np.ascontiguousarray(np.swapaxes(y, dim, dim + 1).reshape(shape))


def write_qwen35_layers(w, cfg, spec, t, norm):
    """Qwen3.5's layers as llama.cpp's converter writes them: the linear
    layers' in_proj_qkv as attn_qkv, in_proj_z as attn_gate, in_proj_b / _a
    as ssm_beta / ssm_alpha, conv1d squeezed to [channels][kernel], A_log as
    ssm_a = -exp(A_log), dt_bias as ssm_dt.bias, the gated norm (a plain w)
    as ssm_norm, out_proj as ssm_out, value heads reordered to tiled order;
    the full layers' q_proj (per head: head_dim of q, then head_dim of the
    gate) as attn_q; post_attention_layernorm as post_attention_norm;
    every other norm stored as 1 + w."""
    nk, nv, dk, dv = spec["lin_k_heads"], spec["lin_v_heads"], spec["lin_k_dim"], spec["lin_v_dim"]
    for i in range(cfg.num_hidden_layers):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", norm(p + "input_layernorm.weight"))
        w.add_tensor(b + "post_attention_norm.weight", norm(p + "post_attention_layernorm.weight"))
        if cfg.layer_types[i] == "linear_attention":
            la = p + "linear_attn."
            qkv = t(la + "in_proj_qkv.weight")
            qkv = np.concatenate([qkv[:2 * nk * dk], reorder_v_heads(qkv[2 * nk * dk:], 0, nk, nv, dv)])
            conv = t(la + "conv1d.weight").squeeze(1)
            conv = np.concatenate([conv[:2 * nk * dk], reorder_v_heads(conv[2 * nk * dk:], 0, nk, nv, dv)])
            w.add_tensor(b + "attn_qkv.weight", qkv)
            w.add_tensor(b + "attn_gate.weight", reorder_v_heads(t(la + "in_proj_z.weight"), 0, nk, nv, dv))
            w.add_tensor(b + "ssm_beta.weight", reorder_v_heads(t(la + "in_proj_b.weight"), 0, nk, nv, 1))
            w.add_tensor(b + "ssm_alpha.weight", reorder_v_heads(t(la + "in_proj_a.weight"), 0, nk, nv, 1))
            w.add_tensor(b + "ssm_conv1d.weight", np.ascontiguousarray(conv))
            w.add_tensor(b + "ssm_a", reorder_v_heads(-np.exp(t(la + "A_log")), 0, nk, nv, 1))
            w.add_tensor(b + "ssm_dt.bias", reorder_v_heads(t(la + "dt_bias"), 0, nk, nv, 1))
            w.add_tensor(b + "ssm_norm.weight", t(la + "norm.weight"))
            w.add_tensor(b + "ssm_out.weight", reorder_v_heads(t(la + "out_proj.weight"), 1, nk, nv, dv))
        else:
            sa = p + "self_attn."
            w.add_tensor(b + "attn_q.weight", t(sa + "q_proj.weight"))
            w.add_tensor(b + "attn_k.weight", t(sa + "k_proj.weight"))
            w.add_tensor(b + "attn_v.weight", t(sa + "v_proj.weight"))
            w.add_tensor(b + "attn_q_norm.weight", norm(sa + "q_norm.weight"))
            w.add_tensor(b + "attn_k_norm.weight", norm(sa + "k_norm.weight"))
            w.add_tensor(b + "attn_output.weight", t(sa + "o_proj.weight"))
        if "experts" in spec:
            add_qwen35_moe(w, t, p, b, spec["expert_ff"])
        else:
            add_ffn(w, t, p, b)


def add_qwen35_moe(w, t, p, b, ff):
    """Qwen3.5-MoE's FFN as llama.cpp names it: the router as ffn_gate_inp;
    the fused gate_up [n_expert][2 ff][n_embd] (gate rows first) split into
    ffn_gate_exps / ffn_up_exps, down as ffn_down_exps; the shared expert's
    products as ffn_{gate,up,down}_shexp and its gate [1][n_embd] as the
    vector ffn_gate_inp_shexp."""
    gate_up = t(p + "mlp.experts.gate_up_proj")
    w.add_tensor(b + "ffn_gate_inp.weight", t(p + "mlp.gate.weight"))
    w.add_tensor(b + "ffn_gate_exps.weight", np.ascontiguousarray(gate_up[:, :ff, :]))
    w.add_tensor(b + "ffn_up_exps.weight", np.ascontiguousarray(gate_up[:, ff:, :]))
    w.add_tensor(b + "ffn_down_exps.weight", t(p + "mlp.experts.down_proj"))
    w.add_tensor(b + "ffn_gate_inp_shexp.weight", t(p + "mlp.shared_expert_gate.weight").reshape(-1))
    for x in ("gate", "up", "down"):
        w.add_tensor(b + f"ffn_{x}_shexp.weight", t(p + f"mlp.shared_expert.{x}_proj.weight"))


def check_sensitivity(checker, arch, gguf_path, arrays):
    """Each convention the fixture is meant to test must move the logits far
    beyond the 1e-4 tolerance when it is got wrong, on the longest sequence."""
    ids, ref = arrays["ids2"], arrays["logits2"]
    variants = {"rope pairs (normal vs neox)": dict(neox=(arch not in ("llama", "mixtral")) is False)}
    # a sliding window's variants: none, one position shorter, every layer global
    window = {"no sliding window": dict(window=10 ** 9), "window off by one": dict(window=9)}
    all_global = {"all layers global": dict(swa_pattern=1)}
    if arch == "gpt-oss":
        variants.update({"no YaRN": dict(yarn=False),
                         "no attention sinks": dict(sinks=False),
                         "SwiGLU unclamped": dict(clamp=None), **window, **all_global})
    if "experts" in ARCHS[arch]:
        variants.update({"one expert fewer per token": dict(used_delta=-1)})
        if arch != "gemma4moe":  # its experts' output is RMS-normed: a common factor of the weights cancels
            variants.update({"chosen weights not renormalised": dict(norm_topk=False)})
    if arch == "gemma3":
        variants.update({**window, "local RoPE base = global": dict(local_base=1e6), **all_global})
    if arch == "gemma2":
        variants.update({**window, **all_global,
                         "no attention soft-cap": dict(attn_softcap=0.0),
                         "no final soft-cap": dict(final_softcap=0.0)})
    if arch == "gemma4ple":
        variants.update({"no per-layer inputs": dict(per_layer="none"),
                         "per-layer inputs without the token table": dict(per_layer="no_token"),
                         "per-layer inputs normed over all layers at once": dict(per_layer="one_norm")})
    if arch == "gemma4moe":
        variants.update({"no expert scales": dict(expert_scale=False),
                         "router reading the experts' norm": dict(router_input="experts")})
    if arch in ("gemma4", "gemma4ple", "gemma4moe"):
        variants.update({**window,
                         "local RoPE base = global": dict(local_base=1e6),
                         "no final soft-cap": dict(final_softcap=0.0),
                         "global layers fully rotated": dict(factors="none"),
                         "no V norm": dict(v_norm=False),
                         "KV shared from the first layer of a kind": dict(kv_source="first"),
                         "no layer scalars": dict(layer_scalars=False)})
    if arch == "phi3":
        variants.update({**window,
                         "short factors": dict(factors="short"),
                         "no LongRoPE factors": dict(factors="none"),
                         "no attention factor": dict(attn_factor=1.0),
                         "4 dims rotated, not 8": dict(rope_dim=4)})
    for what, kw in variants.items():
        err = checker.relative_error(checker.reference_forward(gguf_path, ids, **kw), ref)
        print(f"  sensitivity {arch}: {what}: rel err {err:.2e}")
        if err < 1e-2:
            raise SystemExit(f"{arch}: the fixture does not detect '{what}' (rel err {err:.2e})")


def check_shared_expert_matters(model, arrays):
    """qwen35moe: the shared expert, and its gate, must each move the
    longest sequence's logits far beyond the 1e-4 tolerance (gate at 0:
    sigmoid 0.5 instead of its product; no shared expert at all)."""
    ids, ref = torch.from_numpy(arrays["ids2"].astype(np.int64))[None], arrays["logits2"]
    for what, param in (("shared gate at 0", "shared_expert_gate.weight"),
                        ("no shared expert", "shared_expert.down_proj.weight")):
        saved = [layer.mlp.get_parameter(param).detach().clone() for layer in model.model.layers]
        with torch.no_grad():
            for layer in model.model.layers:
                layer.mlp.get_parameter(param).zero_()
            got = model(ids).logits[0].numpy()
            for layer, s in zip(model.model.layers, saved):
                layer.mlp.get_parameter(param).copy_(s)
        err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
        print(f"  sensitivity qwen35moe: {what}: rel err {err:.2e}")
        if err < 1e-2:
            raise SystemExit(f"qwen35moe: the fixture does not detect '{what}' (rel err {err:.2e})")


def check_with_llama_cpp(arch, gguf_path, arrays):
    """When llama-cpp-python is installed, llama.cpp itself must load the GGUF
    (tokenizer metadata included) and give transformers' logits: the converter
    then follows llama.cpp's conventions, not just our reading of them."""
    try:
        import llama_cpp
    except ImportError:
        print("  (llama-cpp-python not installed: llama.cpp cross-check skipped)")
        return
    llm = llama_cpp.Llama(model_path=str(gguf_path), n_ctx=64, n_batch=64, n_ubatch=64, n_threads=2,
                          logits_all=True, flash_attn=False, type_k=0, type_v=0, verbose=False)
    for i in range(len(SEQ_LENGTHS)):
        ids, ref = arrays[f"ids{i}"], arrays[f"logits{i}"]
        llm.reset()
        llm.eval([int(t) for t in ids])
        got = np.array(llm.scores[: len(ids)], dtype=np.float32)
        err = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
        print(f"  llama.cpp {llama_cpp.__version__} on {arch} seq{i}: rel err {err:.2e}")
        # 1e-3, not 1e-4: ggml's CPU GELU reads an F16 table, which moves the
        # gemma3 logits by about 2e-4; a wrong convention costs 1e-2 or more.
        if err > 1e-3:
            raise SystemExit(f"{arch}: llama.cpp disagrees with transformers on the GGUF (rel err {err:.2e})")
    del llm


def load_test_module():
    """tests/e2e/test_arch_parity.py, for its numpy reference. The reference
    venv need not have pytest: the module only decorates with it at import,
    so a stand-in whose decorators return the function serves."""
    try:
        import pytest  # noqa: F401
    except ImportError:
        import types
        stub = types.ModuleType("pytest")
        passthrough = lambda *a, **k: (lambda f: f)  # noqa: E731
        stub.fixture = lambda *a, **k: a[0] if a and callable(a[0]) else (lambda f: f)
        stub.mark = types.SimpleNamespace(parametrize=passthrough, skipif=passthrough)
        sys.modules["pytest"] = stub
    path = ROOT / "tests" / "e2e" / "test_arch_parity.py"
    spec = importlib.util.spec_from_file_location("test_arch_parity", path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "tiny"))
    ap.add_argument("--arch", action="append", choices=list(ARCHS),
                    help="only this architecture (repeatable; default: all); each keeps its own seed")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(2)
    checker = load_test_module()

    for k, (arch, spec) in enumerate(ARCHS.items()):
        if args.arch and arch not in args.arch:
            continue
        gen = torch.Generator().manual_seed(SEED + seed_index(arch, k))
        cfg = make_config(arch, spec)
        cfg._attn_implementation = "eager"
        model = model_class(arch)(cfg).to(torch.float32).eval()
        randomize(model, arch, gen)
        if cfg.tie_word_embeddings:
            assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
        if arch in ("gemma4", "gemma4ple", "gemma4moe"):
            assert cfg.kv_sharing_modes == [None, None, "store", "store", "reuse", "reuse"], cfg.kv_sharing_modes
            assert model.model.layers[2].self_attn.v_proj is None and model.model.layers[4].mlp.intermediate_size == 128
        if arch == "gemma3":
            kinds = cfg.layer_types
            assert kinds.count("sliding_attention") == 5 and kinds[5] == "full_attention", kinds

        routers = []  # the router logits of each MoE layer, per forward pass
        if "experts" in spec:
            for layer in model.model.layers:
                (layer.mlp.router if arch == "gpt-oss" else layer.router if arch == "gemma4moe"
                 else layer.mlp.gate).register_forward_hook(
                    lambda mod, inp, out: routers.append(out[0].detach().reshape(-1, spec["experts"]).numpy()))
        rng = np.random.default_rng(SEED + 100 + seed_index(arch, k))
        arrays = {}
        for i, n in enumerate(SEQ_LENGTHS):
            # Draw sequences until the reference has no near-tie for the top
            # token anywhere (gap >= 1e-3 of max |logit|, ten times what the
            # 1e-4 tolerance could flip), so "argmax identical" is a fair test.
            # The newer fixtures ask for min_gap (1.5e-2): a Q8 cache moves
            # their logits by up to 7e-3 of the largest, and at 1e-3 phi3's
            # drew a position whose top two a Q8 cache swapped.
            gap = spec.get("min_gap", 1e-3)
            for _ in range(400):
                ids = rng.integers(0, cfg.vocab_size, size=n).astype(np.int32)
                ids[0] = BOS_ID
                routers.clear()
                with torch.no_grad():
                    logits = model(torch.from_numpy(ids.astype(np.int64))[None]).logits[0].numpy()
                top2 = np.sort(logits, axis=-1)[:, -2:]
                # experts: no near-tie between the last chosen and the first
                # unchosen router logit either (a 1e-4 difference must not
                # change the choice)
                route_gap = min((np.min(np.sort(r, -1)[:, -spec["used"]] - np.sort(r, -1)[:, -spec["used"] - 1])
                                 for r in routers), default=1.0)
                if np.min(top2[:, 1] - top2[:, 0]) >= gap * np.max(np.abs(logits)) and route_gap >= 1e-3:
                    break
            else:
                raise SystemExit(f"{arch}: no tie-free sequence of length {n}")
            arrays[f"ids{i}"] = ids
            arrays[f"logits{i}"] = logits.astype(np.float32)

        if "orig_ctx" in spec and arch == "phi3":
            # LongRoPE's short factors: a sequence no longer than the original
            # context, which transformers runs with them (and pasada, in a
            # context of that size); "short_ids" / "short_logits"
            n = spec["orig_ctx"]
            ids = rng.integers(0, cfg.vocab_size, size=n).astype(np.int32)
            ids[0] = BOS_ID
            with torch.no_grad():
                logits = model(torch.from_numpy(ids.astype(np.int64))[None]).logits[0].numpy()
            arrays["short_ids"], arrays["short_logits"] = ids, logits.astype(np.float32)

        gguf_path = out / f"{arch}.gguf"
        write_gguf(gguf_path, arch, cfg, spec, model.state_dict())
        np.savez_compressed(out / f"{arch}.logits.npz", **arrays)
        if spec.get("hf_folder"):  # the transformers folder, F32, with qwen35's tokenizer files (same vocabulary)
            folder = out.parent / "hf" / arch
            model.save_pretrained(folder)
            for name in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(out.parent / "hf" / "qwen35" / name, folder / name)

        if arch == "qwen35moe":
            check_shared_expert_matters(model, arrays)
        # Self-check of the fixture: GGUF + llama.cpp conventions == transformers.
        if spec.get("no_numpy_ref"):
            print(f"wrote {gguf_path} ({gguf_path.stat().st_size} bytes; no numpy reference for {arch})")
            continue
        for i in range(len(SEQ_LENGTHS)):
            ref = arrays[f"logits{i}"]
            got = checker.reference_forward(gguf_path, arrays[f"ids{i}"])
            err = checker.relative_error(got, ref)
            p = np.exp(ref - ref.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            print(f"{arch} seq{i} n={len(arrays[f'ids{i}'])}: logit std {ref.std():.2f}, "
                  f"mean top-1 prob {p.max(-1).mean():.2f}, numpy-from-GGUF rel err {err:.2e}")
            if err > 1e-5:
                raise SystemExit(f"{arch}: the GGUF file does not reproduce transformers (rel err {err:.2e})")
        if "short_ids" in arrays:
            ids, ref = arrays["short_ids"], arrays["short_logits"]
            err = checker.relative_error(checker.reference_forward(gguf_path, ids), ref)
            other = checker.relative_error(checker.reference_forward(gguf_path, ids, factors="long"), ref)
            print(f"{arch} short factors n={len(ids)}: numpy-from-GGUF rel err {err:.2e}, "
                  f"with the long factors instead {other:.2e}")
            if err > 1e-5 or other < 1e-2:
                raise SystemExit(f"{arch}: the short-factor sequence fails its check")
        check_sensitivity(checker, arch, gguf_path, arrays)
        check_with_llama_cpp(arch, gguf_path, arrays)
        print(f"wrote {gguf_path} ({gguf_path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
