#!/usr/bin/env python3
"""make-malformed-gguf.py: the corpus of crafted GGUF files that pasada must
reject with one clear error line (tests/e2e/test_malformed.py, the unit test
test_gguf and the fuzzer's seeds).

Writes, deterministically and with the standard library only:

    tests/fixtures/tiny-llama-valid.gguf   a tiny but complete llama model
                                           (seeded random F32 weights, GPT-2
                                           style byte-level BPE vocabulary)
    tests/fixtures/tiny-moe-valid.gguf     the same as a qwen3moe mixture of
                                           experts (4 experts, 2 per token)
    tests/fixtures/malformed/*.gguf        one file per defect, named for it

File-name prefixes say who must reject the file:
    tok-*    valid GGUF; the tokenizer loader must reject it
    model-*  valid GGUF; the model loader must reject it
    others   the GGUF reader (src/format/gguf_read.c) must reject it
Format-level files derive from a small model-like base (about 1 KB); tok-
and model- files derive from the complete tiny model so that only their one
defect is wrong.

Usage: make-malformed-gguf.py [--root REPO]
"""
import argparse
import pathlib
import random
import struct

# GGUF value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?",
       U64: "Q", I64: "q", F64: "d"}
# GGML tensor types used here
GGML_F32, GGML_Q8_0 = 0, 8
# the table-lookup 4-bit types: GGML number, elements and bytes per block,
# and one block's bytes (a sane scale, then random levels)
IQ_TYPES = {
    "iq4_nl": (20, 32, 18, lambda rng: struct.pack("<H", 0x211F) + bytes(rng.randrange(256) for _ in range(16))),
    "iq4_xs": (23, 256, 136, lambda rng: struct.pack("<HH", 0x211F, 0xAAAA)
               + bytes(rng.randrange(256) for _ in range(132))),
    "mxfp4": (39, 32, 17, lambda rng: bytes([120]) + bytes(rng.randrange(256) for _ in range(16))),
}


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def enc_value(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(enc_value(et, x) for x in items)
    return struct.pack("<" + FMT[t], v)


def kv(key, t, v):
    """One encoded metadata entry."""
    return (key, gstr(key) + struct.pack("<I", t) + enc_value(t, v))


def raw_kv(key, payload):
    """A hand-made entry: key string then payload bytes as given."""
    return (key, gstr(key) + payload)


class Tensor:
    def __init__(self, name, ne, ggml_type, data):
        self.name, self.ne, self.type, self.data = name, list(ne), ggml_type, data
        self.offset = None  # None: the natural aligned offset
        self.n_dims = None  # None: len(ne)

    def info(self, offset):
        n = len(self.ne) if self.n_dims is None else self.n_dims
        return (gstr(self.name) + struct.pack("<I", n) +
                b"".join(struct.pack("<Q", d) for d in self.ne) +
                struct.pack("<IQ", self.type, offset if self.offset is None else self.offset))


def pad_to(n, a):
    return (a - n % a) % a


def build(kvs, tensors, version=3, magic=b"GGUF", n_tensors=None, n_kv=None, alignment=32):
    """Returns (bytes, layout) where layout has the section boundaries."""
    head = magic + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                               len(kvs) if n_kv is None else n_kv)
    meta = b"".join(e for _, e in kvs)
    offsets, off = [], 0
    for t in tensors:
        offsets.append(off)
        off += len(t.data) + pad_to(len(t.data), alignment)
    table = b"".join(t.info(o) for t, o in zip(tensors, offsets))
    out = head + meta + table
    layout = {"header": len(head), "meta_end": len(head) + len(meta), "table_end": len(out)}
    out += b"\0" * pad_to(len(out), alignment)
    layout["data"] = len(out)
    layout["offsets"] = offsets
    for t in tensors:
        out += t.data + b"\0" * pad_to(len(t.data), alignment)
    return out, layout


def f32_data(rng, n, around=0.0, spread=0.2):
    vals = []
    for _ in range(n):
        x = rng.uniform(-spread, spread)
        if abs(x) < 1e-3:
            x = 1e-3 if x >= 0 else -1e-3
        vals.append(around + x)
    return struct.pack("<%df" % n, *vals)


# ---------------------------------------------------------------- the models
def gpt2_byte_tokens():
    """The 256 byte-level tokens in GPT-2's byte-to-unicode order: printable
    Latin-1 bytes stand for themselves, the rest map to U+0100 onwards."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) +
                 list(range(0xAE, 0xFF + 1)))
    chars, extra = list(printable), 0
    for b in range(256):
        if b not in printable:
            chars.append(256 + extra)
            extra += 1
    return [chr(c) for c in chars]


MERGES = ["t h", "h e", "i n", "e r", "a n", "r e", "o n", "a t", "e n", "n d", "e s", "o r",
          "i s", "i t", "h i", "Ġ t", "Ġ a", "Ġ s", "Ġ w", "Ġ o", "Ġ c", "Ġ h", "Ġ i",
          "Ġt he", "Ġa nd", "Ġi s", "Ġi t", "Ġh i", "Ġo n"]

N_EMBD, N_FF, N_HEAD, N_HEAD_KV, N_CTX = 32, 64, 4, 2, 64


def vocab():
    tokens = gpt2_byte_tokens() + [m.replace(" ", "") for m in MERGES] + ["<|endoftext|>"]
    assert len(set(tokens)) == len(tokens)
    return tokens


def f32_tensors(rng):
    """w(name, ne, around): an F32 tensor of shape ne, its values drawn from rng."""
    def w(name, ne, around=0.0):
        n = 1
        for d in ne:
            n *= d
        return Tensor(name, ne, GGML_F32, f32_data(rng, n, around))
    return w


def as_arch(kvs, arch, block_count=None):
    """The tiny llama's keys as arch's: each llama.* key under arch's name
    with the same type and value (block_count, when given, replaced)."""
    out = []
    for key, entry in kvs:
        if key == "general.architecture":
            out.append(kv(key, STR, arch))
        elif key == "llama.block_count" and block_count is not None:
            out.append(kv(arch + ".block_count", U32, block_count))
        elif key.startswith("llama."):
            new = arch + "." + key[6:]
            out.append((new, gstr(new) + entry[len(gstr(key)):]))
        else:
            out.append((key, entry))
    return out


def tiny_llama():
    """(kvs, tensors) of the complete tiny llama model."""
    rng = random.Random(20240611)
    tokens = vocab()
    n_vocab, eot = len(tokens), len(tokens) - 1
    kvs = [
        kv("general.architecture", STR, "llama"),
        kv("general.name", STR, "tiny-llama-test"),
        kv("general.file_type", U32, 0),
        kv("llama.context_length", U32, N_CTX),
        kv("llama.embedding_length", U32, N_EMBD),
        kv("llama.block_count", U32, 1),
        kv("llama.feed_forward_length", U32, N_FF),
        kv("llama.attention.head_count", U32, N_HEAD),
        kv("llama.attention.head_count_kv", U32, N_HEAD_KV),
        kv("llama.rope.dimension_count", U32, N_EMBD // N_HEAD),
        kv("llama.rope.freq_base", F32, 10000.0),
        kv("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        kv("llama.vocab_size", U32, n_vocab),
        kv("tokenizer.ggml.model", STR, "gpt2"),
        kv("tokenizer.ggml.pre", STR, "default"),
        kv("tokenizer.ggml.tokens", ARR, (STR, tokens)),
        kv("tokenizer.ggml.scores", ARR, (F32, [0.0] * n_vocab)),
        kv("tokenizer.ggml.token_type", ARR, (I32, [1] * n_vocab)),
        kv("tokenizer.ggml.merges", ARR, (STR, MERGES)),
        kv("tokenizer.ggml.bos_token_id", U32, eot),
        kv("tokenizer.ggml.eos_token_id", U32, eot),
    ]
    kv_dim = N_EMBD // N_HEAD * N_HEAD_KV
    w = f32_tensors(rng)

    tensors = [
        w("token_embd.weight", [N_EMBD, n_vocab]),
        w("blk.0.attn_norm.weight", [N_EMBD], 1.0),
        w("blk.0.attn_q.weight", [N_EMBD, N_EMBD]),
        w("blk.0.attn_k.weight", [N_EMBD, kv_dim]),
        w("blk.0.attn_v.weight", [N_EMBD, kv_dim]),
        w("blk.0.attn_output.weight", [N_EMBD, N_EMBD]),
        w("blk.0.ffn_norm.weight", [N_EMBD], 1.0),
        w("blk.0.ffn_gate.weight", [N_EMBD, N_FF]),
        w("blk.0.ffn_up.weight", [N_EMBD, N_FF]),
        w("blk.0.ffn_down.weight", [N_FF, N_EMBD]),
        w("output_norm.weight", [N_EMBD], 1.0),
        w("output.weight", [N_EMBD, n_vocab]),
    ]
    return kvs, tensors


def small_base():
    """(kvs, tensors) of the small model-like file the format defects start from."""
    rng = random.Random(7)
    kvs = [
        kv("general.architecture", STR, "llama"),
        kv("general.name", STR, "malformed-base"),
        kv("general.alignment", U32, 32),
        kv("llama.block_count", U32, 1),
        kv("llama.embedding_length", U32, N_EMBD),
        kv("llama.rope.freq_base", F32, 10000.0),
        kv("tokenizer.ggml.tokens", ARR, (STR, ["a", "b", "c", "<s>"])),
        kv("tokenizer.ggml.token_type", ARR, (I32, [1, 1, 1, 3])),
    ]
    q8 = b""
    for _ in range(2):  # two Q8_0 blocks: f16 scale (0.01) + 32 int8
        q8 += struct.pack("<H", 0x211F) + bytes(rng.randrange(256) for _ in range(32))
    tensors = [
        Tensor("blk.0.attn_norm.weight", [N_EMBD], GGML_F32, f32_data(rng, N_EMBD, 1.0)),
        Tensor("token_embd.weight", [N_EMBD, 4], GGML_F32, f32_data(rng, N_EMBD * 4)),
        Tensor("blk.0.attn_q.weight", [32, 2], GGML_Q8_0, q8),
    ]
    return kvs, tensors


N_EXPERT, N_EXPERT_USED, N_FF_EXP = 4, 2, 48


def tiny_moe():
    """(kvs, tensors) of the tiny model as a qwen3moe: its keys under
    qwen3moe., q/k norms, and a mixture of N_EXPERT experts in place of the
    FFN (llama.cpp's names: ffn_gate_inp [n_embd, n_expert], ffn_*_exps
    [cols, rows, n_expert])."""
    kvs, tensors = tiny_llama()
    w = f32_tensors(random.Random(20240612))
    out = as_arch(kvs, "qwen3moe")
    out += [kv("qwen3moe.expert_count", U32, N_EXPERT), kv("qwen3moe.expert_used_count", U32, N_EXPERT_USED),
            kv("qwen3moe.expert_feed_forward_length", U32, N_FF_EXP)]
    hd = N_EMBD // N_HEAD

    ts = [t for t in tensors if not t.name.startswith(("blk.0.ffn_gate", "blk.0.ffn_up", "blk.0.ffn_down"))]
    ts += [w("blk.0.attn_q_norm.weight", [hd], 1.0), w("blk.0.attn_k_norm.weight", [hd], 1.0),
           w("blk.0.ffn_gate_inp.weight", [N_EMBD, N_EXPERT]),
           w("blk.0.ffn_gate_exps.weight", [N_EMBD, N_FF_EXP, N_EXPERT]),
           w("blk.0.ffn_up_exps.weight", [N_EMBD, N_FF_EXP, N_EXPERT]),
           w("blk.0.ffn_down_exps.weight", [N_FF_EXP, N_EMBD, N_EXPERT])]
    return out, ts


def tiny_gemma4():
    """(kvs, tensors) of the tiny model as a two-layer gemma4: both layers
    sliding-window, the second sharing the first's KV cache
    (shared_kv_layers 1), q/k head norms, the norms after the attention and
    the FFN, rope_freqs, the layer scalars (llama.cpp's names and keys)."""
    kvs, tensors = tiny_llama()
    w = f32_tensors(random.Random(20240613))
    out = as_arch(kvs, "gemma4", block_count=2)
    hd = N_EMBD // N_HEAD
    out += [kv("gemma4.attention.key_length", U32, hd), kv("gemma4.attention.value_length", U32, hd),
            kv("gemma4.attention.key_length_swa", U32, hd), kv("gemma4.attention.value_length_swa", U32, hd),
            kv("gemma4.attention.sliding_window", U32, 4),
            kv("gemma4.attention.sliding_window_pattern", ARR, (BOOL, [True, True])),
            kv("gemma4.attention.shared_kv_layers", U32, 1), kv("gemma4.rope.freq_base_swa", F32, 10000.0),
            kv("gemma4.final_logit_softcapping", F32, 30.0)]

    ts = [t for t in tensors if t.name != "output.weight"]
    ts += [w("rope_freqs.weight", [hd // 2], 1.0), w("blk.0.attn_q_norm.weight", [hd], 1.0),
           w("blk.0.attn_k_norm.weight", [hd], 1.0), w("blk.0.post_attention_norm.weight", [N_EMBD], 1.0),
           w("blk.0.post_ffw_norm.weight", [N_EMBD], 1.0), w("blk.0.layer_output_scale.weight", [1], 1.0)]
    ts += [w("blk.1.attn_norm.weight", [N_EMBD], 1.0), w("blk.1.attn_q.weight", [N_EMBD, N_EMBD]),
           w("blk.1.attn_q_norm.weight", [hd], 1.0), w("blk.1.attn_output.weight", [N_EMBD, N_EMBD]),
           w("blk.1.post_attention_norm.weight", [N_EMBD], 1.0), w("blk.1.ffn_norm.weight", [N_EMBD], 1.0),
           w("blk.1.ffn_gate.weight", [N_EMBD, N_FF]), w("blk.1.ffn_up.weight", [N_EMBD, N_FF]),
           w("blk.1.ffn_down.weight", [N_FF, N_EMBD]), w("blk.1.post_ffw_norm.weight", [N_EMBD], 1.0),
           w("blk.1.layer_output_scale.weight", [1], 1.0)]
    return out, ts


N_PLE = 6  # per-layer inputs per layer of tiny_gemma4_ple


def tiny_gemma4_ple():
    """tiny_gemma4 with per-layer inputs (Gemma 4 E2B's kind, llama.cpp's
    names): embedding_length_per_layer_input N_PLE, the token table
    [n_vocab][2 N_PLE], the embedding's projection, its norm, and per layer
    inp_gate, proj and post_norm."""
    kvs, ts = tiny_gemma4()
    w = f32_tensors(random.Random(20240614))
    n_vocab = next(t.ne[1] for t in ts if t.name == "token_embd.weight")
    ts = ts + [w("per_layer_token_embd.weight", [2 * N_PLE, n_vocab]),
               w("per_layer_model_proj.weight", [N_EMBD, 2 * N_PLE]), w("per_layer_proj_norm.weight", [N_PLE], 1.0)]
    for i in range(2):
        ts += [w(f"blk.{i}.inp_gate.weight", [N_EMBD, N_PLE]), w(f"blk.{i}.proj.weight", [N_PLE, N_EMBD]),
               w(f"blk.{i}.post_norm.weight", [N_EMBD], 1.0)]
    return kvs + [kv("gemma4.embedding_length_per_layer_input", U32, N_PLE)], ts


def tiny_gemma4_moe():
    """tiny_gemma4 with experts beside each dense FFN (Gemma 4 26B-A4B's
    kind, llama.cpp's names): N_EXPERT experts of N_FF_EXP, N_EXPERT_USED
    per token, the router with its input scale, the experts' weight
    scales, the fused gate_up, down, and the three more norms."""
    kvs, ts = tiny_gemma4()
    w = f32_tensors(random.Random(20240615))
    kvs = kvs + [kv("gemma4.expert_count", U32, N_EXPERT), kv("gemma4.expert_used_count", U32, N_EXPERT_USED),
                 kv("gemma4.expert_feed_forward_length", U32, N_FF_EXP)]
    for i in range(2):
        b = f"blk.{i}."
        ts = ts + [w(b + "ffn_gate_inp.weight", [N_EMBD, N_EXPERT]), w(b + "ffn_gate_inp.scale", [N_EMBD], 1.0),
                   w(b + "ffn_down_exps.scale", [N_EXPERT], 1.0),
                   w(b + "ffn_gate_up_exps.weight", [N_EMBD, 2 * N_FF_EXP, N_EXPERT]),
                   w(b + "ffn_down_exps.weight", [N_FF_EXP, N_EMBD, N_EXPERT]),
                   w(b + "pre_ffw_norm_2.weight", [N_EMBD], 1.0), w(b + "post_ffw_norm_1.weight", [N_EMBD], 1.0),
                   w(b + "post_ffw_norm_2.weight", [N_EMBD], 1.0)]
    return kvs, ts


# ------------------------------------------------------------------ defects
def replace_kv(kvs, key, entry):
    return [entry if k == key else (k, e) for k, e in kvs]


def drop_kv(kvs, key):
    return [(k, e) for k, e in kvs if k != key]


def tensor_variant(tensors, which, **changes):
    out = []
    for t in tensors:
        c = Tensor(t.name, t.ne, t.type, t.data)
        c.offset, c.n_dims = t.offset, t.n_dims
        if t.name == which:
            for k, v in changes.items():
                setattr(c, k, v)
        out.append(c)
    return out


def nested(depth):
    v = (U8, [1])
    for _ in range(depth - 1):
        v = (ARR, [v])
    return v


def format_cases():
    kvs, ts = small_base()
    base, lay = build(kvs, ts)
    starts, at = {}, lay["header"]
    for key, entry in kvs:
        starts[key] = at
        at += len(entry)
    cases = {}

    def add(name, data):
        assert name not in cases, name
        cases[name] = data

    def with_kv(key, entry):
        return build(replace_kv(kvs, key, entry), ts)[0]

    def with_tensor(which, **ch):
        return build(kvs, tensor_variant(ts, which, **ch))[0]

    # header
    add("empty", b"")
    add("truncated-magic", base[:2])
    add("bad-magic", b"GGML" + base[4:])
    add("bad-magic-zeros", b"\0" * len(base))
    add("version-1", build(kvs, ts, version=1)[0])
    add("version-99", build(kvs, ts, version=99)[0])
    add("version-big-endian", build(kvs, ts, version=3 << 24)[0])
    add("header-truncated-version", base[:6])
    add("header-truncated-tensor-count", base[:12])
    add("header-truncated-kv-count", base[:20])
    add("kv-count-huge", build(kvs, ts, n_kv=2**64 - 1)[0])
    add("kv-count-too-large", build(kvs, ts, n_kv=60)[0])
    add("kv-count-one-too-many", build(kvs, ts, n_kv=len(kvs) + 1)[0])
    add("tensor-count-huge", build(kvs, ts, n_tensors=2**62)[0])
    add("tensor-count-one-too-many", build(kvs, ts, n_tensors=len(ts) + 1)[0])
    # metadata
    add("metadata-truncated-in-key-length", base[:lay["header"] + 5])
    tok = starts["tokenizer.ggml.tokens"]
    tok_values = tok + len(gstr("tokenizer.ggml.tokens")) + 4 + 4 + 8
    add("metadata-truncated-in-key", base[:tok + 8 + 5])
    add("metadata-truncated-in-string-value", base[:tok_values + 3 * 9 + 8 + 1])
    add("metadata-truncated-in-array", base[:lay["meta_end"] - 6])
    add("key-empty", build([kv("", U32, 1)] + kvs, ts)[0])
    add("key-length-huge", build([raw_kv("x", b"")] + kvs, ts)[0].replace(
        gstr("x"), struct.pack("<Q", 2**63) + b"x", 1))
    add("key-control-byte", build([kv("general.na\nme", U32, 1)] + kvs, ts)[0])
    add("key-duplicate", build(kvs + [kv("llama.block_count", U32, 2)], ts)[0])
    add("string-length-huge", with_kv("general.name", raw_kv(
        "general.name", struct.pack("<IQ", STR, 2**64 - 1) + b"abc")))
    add("string-length-near-2-64", with_kv("general.name", raw_kv(
        "general.name", struct.pack("<IQ", STR, 2**64 - 16) + b"abc")))
    add("value-type-unknown", with_kv("llama.block_count", raw_kv(
        "llama.block_count", struct.pack("<II", 13, 1))))
    add("value-type-huge", with_kv("llama.block_count", raw_kv(
        "llama.block_count", struct.pack("<II", 0x80000000, 1))))
    add("array-element-type-unknown", with_kv("tokenizer.ggml.token_type", raw_kv(
        "tokenizer.ggml.token_type", struct.pack("<IIQ", ARR, 13, 4) + b"\1" * 16)))
    add("array-element-type-huge", with_kv("tokenizer.ggml.token_type", raw_kv(
        "tokenizer.ggml.token_type", struct.pack("<IIQ", ARR, 0xFFFFFFFF, 4) + b"\1" * 16)))
    add("array-count-huge", with_kv("tokenizer.ggml.token_type", raw_kv(
        "tokenizer.ggml.token_type", struct.pack("<IIQ", ARR, I32, 2**62 + 1) + b"\1" * 16)))
    add("array-count-past-end", with_kv("tokenizer.ggml.token_type", raw_kv(
        "tokenizer.ggml.token_type", struct.pack("<IIQ", ARR, I32, 100000) + b"\1" * 16)))
    add("array-string-count-huge", with_kv("tokenizer.ggml.tokens", raw_kv(
        "tokenizer.ggml.tokens", struct.pack("<IIQ", ARR, STR, 2**61) + gstr("a"))))
    add("array-string-element-length-huge", with_kv("tokenizer.ggml.tokens", raw_kv(
        "tokenizer.ggml.tokens", struct.pack("<IIQ", ARR, STR, 2) + gstr("a") +
        struct.pack("<Q", 2**64 - 2) + b"b")))
    add("array-nested-count-huge", with_kv("tokenizer.ggml.tokens", raw_kv(
        "tokenizer.ggml.tokens", struct.pack("<IIQ", ARR, ARR, 2**60) +
        struct.pack("<IQ", U8, 0))))
    add("array-nested-too-deep", with_kv("tokenizer.ggml.tokens", kv(
        "tokenizer.ggml.tokens", ARR, nested(64))))
    add("alignment-zero", with_kv("general.alignment", kv("general.alignment", U32, 0)))
    add("alignment-not-power-of-two", with_kv("general.alignment", kv("general.alignment", U32, 48)))
    add("alignment-huge", with_kv("general.alignment", kv("general.alignment", U32, 2**31)))
    add("alignment-wrong-type-u64", with_kv("general.alignment", kv("general.alignment", U64, 32)))
    add("alignment-wrong-type-string", with_kv("general.alignment",
                                               kv("general.alignment", STR, "32")))
    # tensor table
    add("tensor-table-truncated", base[:lay["meta_end"] + 20])
    add("tensor-table-truncated-in-dims", base[:lay["meta_end"] + len(gstr(ts[0].name)) + 4 + 3])
    add("tensor-table-truncated-in-offset", base[:lay["table_end"] - 3])
    add("tensor-name-empty", with_tensor("token_embd.weight", name=""))
    add("tensor-name-length-huge", build(kvs, ts)[0].replace(
        gstr("token_embd.weight"), struct.pack("<Q", 2**64 - 5) + b"token_embd.weight", 1))
    add("tensor-name-duplicate", with_tensor("token_embd.weight", name="blk.0.attn_norm.weight"))
    add("tensor-ndims-0", with_tensor("blk.0.attn_norm.weight", ne=[], n_dims=0))
    add("tensor-ndims-5", with_tensor("token_embd.weight", ne=[32, 4, 1, 1, 1]))
    add("tensor-ndims-huge", with_tensor("token_embd.weight", n_dims=2**31))
    add("tensor-dim-zero", with_tensor("token_embd.weight", ne=[32, 0]))
    add("tensor-dim-negative", with_tensor("token_embd.weight", ne=[32, 2**64 - 4]))
    add("tensor-dims-product-overflows-u64", with_tensor(
        "token_embd.weight", ne=[32, 2**40, 2**40]))
    add("tensor-dims-product-overflows-i64", with_tensor(
        "token_embd.weight", ne=[2**32, 2**31]))
    add("tensor-bytes-overflow", with_tensor("token_embd.weight", ne=[2**62]))
    add("tensor-type-unknown", with_tensor("token_embd.weight", type=4))
    add("tensor-type-huge", with_tensor("token_embd.weight", type=0xFFFFFFFF))
    add("tensor-row-not-multiple-of-block", with_tensor("blk.0.attn_q.weight", ne=[48, 2]))
    add("tensor-offset-past-end", with_tensor("blk.0.attn_q.weight", offset=1 << 20))
    add("tensor-offset-near-2-64", with_tensor("blk.0.attn_q.weight", offset=2**64 - 32))
    add("tensor-offset-misaligned", with_tensor("blk.0.attn_q.weight", offset=lay["offsets"][2] + 4))
    # tensor data
    last_end = lay["data"] + lay["offsets"][2] + len(ts[2].data)
    add("tensor-data-truncated", base[:last_end - 10])
    add("tensor-data-missing", base[:lay["table_end"]])
    add("tensor-data-section-half", base[:lay["data"] + (last_end - lay["data"]) // 2])
    # per table-lookup type, with the last tensor (attn_q) in that type: a row
    # that is not a whole number of blocks, and data that ends inside a block
    rng = random.Random(11)
    for tname, (gtype, block, size, make_block) in IQ_TYPES.items():
        data = b"".join(make_block(rng) for _ in range(2))
        add(f"tensor-{tname}-row-not-multiple-of-block",
            with_tensor("blk.0.attn_q.weight", type=gtype, ne=[block + 16, 2], data=data))
        variant, vlay = build(kvs, tensor_variant(ts, "blk.0.attn_q.weight", type=gtype, ne=[block, 2], data=data))
        end = vlay["data"] + vlay["offsets"][2] + 2 * size
        add(f"tensor-{tname}-data-truncated-in-block", variant[:end - size // 2])
    return cases


def model_cases():
    """Valid GGUF files the tokenizer or the model loader must reject."""
    kvs, ts = tiny_llama()
    n_vocab = len(vocab())
    cases = {}

    def k(key, t, v):
        return build(replace_kv(kvs, key, kv(key, t, v)), ts)[0]

    cases["tok-scores-length-mismatch"] = k("tokenizer.ggml.scores", ARR, (F32, [0.0] * (n_vocab - 3)))
    cases["tok-token-type-length-mismatch"] = k("tokenizer.ggml.token_type", ARR, (I32, [1] * (n_vocab + 5)))
    cases["tok-tokens-wrong-type"] = k("tokenizer.ggml.tokens", ARR, (U32, list(range(n_vocab))))
    cases["tok-tokens-missing"] = build(drop_kv(kvs, "tokenizer.ggml.tokens"), ts)[0]
    cases["tok-bos-id-out-of-range"] = k("tokenizer.ggml.bos_token_id", U32, n_vocab)
    cases["tok-eos-id-out-of-range"] = k("tokenizer.ggml.eos_token_id", U32, 0xFFFFFFFF)
    cases["tok-merges-wrong-type"] = k("tokenizer.ggml.merges", ARR, (I32, [1, 2, 3]))
    cases["tok-merges-not-an-array"] = k("tokenizer.ggml.merges", STR, "t h")
    cases["tok-model-unknown"] = k("tokenizer.ggml.model", STR, "no-such-tokenizer")
    cases["model-missing-block-count"] = build(drop_kv(kvs, "llama.block_count"), ts)[0]
    cases["model-head-count-zero"] = k("llama.attention.head_count", U32, 0)
    cases["model-head-count-kv-not-dividing"] = k("llama.attention.head_count_kv", U32, 3)
    cases["model-attn-q-wrong-shape"] = build(kvs, tensor_variant(
        ts, "blk.0.attn_q.weight", ne=[N_EMBD, N_EMBD // 2],
        data=f32_data(random.Random(1), N_EMBD * N_EMBD // 2)))[0]
    cases["model-token-embd-wrong-shape"] = build(kvs, tensor_variant(
        ts, "token_embd.weight", ne=[N_EMBD, n_vocab - 1],
        data=f32_data(random.Random(2), N_EMBD * (n_vocab - 1))))[0]
    cases["model-missing-ffn-down"] = build(kvs, [t for t in ts if t.name != "blk.0.ffn_down.weight"])[0]
    cases["model-block-count-too-large"] = k("llama.block_count", U32, 1000000)

    # mixtures of experts: counts out of range, the router's shape, experts not 3-D
    mkvs, mts = tiny_moe()

    def mk(key, t, v):
        return build(replace_kv(mkvs, key, kv(key, t, v)), mts)[0]

    cases["model-moe-expert-count-zero"] = mk("qwen3moe.expert_count", U32, 0)
    cases["model-moe-expert-count-huge"] = mk("qwen3moe.expert_count", U32, 1 << 30)
    cases["model-moe-expert-count-missing"] = build(drop_kv(mkvs, "qwen3moe.expert_count"), mts)[0]
    cases["model-moe-used-above-count"] = mk("qwen3moe.expert_used_count", U32, N_EXPERT + 1)
    cases["model-moe-used-zero"] = mk("qwen3moe.expert_used_count", U32, 0)
    cases["model-moe-router-wrong-shape"] = build(mkvs, tensor_variant(
        mts, "blk.0.ffn_gate_inp.weight", ne=[N_EMBD, N_EXPERT - 1],
        data=f32_data(random.Random(3), N_EMBD * (N_EXPERT - 1))))[0]
    cases["model-moe-experts-not-3d"] = build(mkvs, tensor_variant(
        mts, "blk.0.ffn_up_exps.weight", ne=[N_EMBD, N_FF_EXP * N_EXPERT]))[0]
    cases["model-moe-experts-count-mismatch"] = build(mkvs, tensor_variant(
        mts, "blk.0.ffn_down_exps.weight", ne=[N_FF_EXP, N_EMBD // 2, N_EXPERT * 2]))[0]

    # gemma4: head sizes per kind of layer, KV sharing, per-layer counts, rope_freqs
    gkvs, gts = tiny_gemma4()

    def gk(key, t, v):
        return build(replace_kv(gkvs, key, kv(key, t, v)), gts)[0]

    cases["model-gemma4-key-value-sizes-differ"] = gk("gemma4.attention.key_length_swa", U32, 2 * (N_EMBD // N_HEAD))
    cases["model-gemma4-shared-kv-every-layer"] = gk("gemma4.attention.shared_kv_layers", U32, 2)
    cases["model-gemma4-shared-kv-no-source"] = gk("gemma4.attention.sliding_window_pattern", ARR,
                                                   (BOOL, [False, True]))
    cases["model-gemma4-ffn-length-array-count"] = gk("gemma4.feed_forward_length", ARR, (U32, [N_FF] * 3))
    cases["model-gemma4-kv-heads-per-layer"] = gk("gemma4.attention.head_count_kv", ARR,
                                                  (U32, [N_HEAD_KV, N_HEAD_KV * 2]))
    cases["model-gemma4-per-layer-embeddings"] = build(
        gkvs + [kv("gemma4.embedding_length_per_layer_input", U32, 8)], gts)[0]
    # gemma4's per-layer inputs: each tensor's shape, a missing one, the width
    pkvs, pts = tiny_gemma4_ple()
    n_vocab = next(t.ne[1] for t in pts if t.name == "token_embd.weight")
    for name, case, ne in (("per_layer_token_embd.weight", "token-embd-short", [2 * N_PLE, n_vocab - 1]),
                           ("per_layer_token_embd.weight", "token-embd-narrow", [N_PLE, n_vocab]),
                           ("per_layer_model_proj.weight", "model-proj-wrong-shape", [N_EMBD, 2 * N_PLE + 1]),
                           ("per_layer_proj_norm.weight", "proj-norm-wrong-shape", [2 * N_PLE]),
                           ("blk.1.inp_gate.weight", "inp-gate-wrong-shape", [N_EMBD, N_PLE - 1]),
                           ("blk.0.proj.weight", "proj-wrong-shape", [N_PLE, N_EMBD // 2])):
        n = ne[0] * (ne[1] if len(ne) > 1 else 1)
        cases[f"model-gemma4-ple-{case}"] = build(pkvs, tensor_variant(
            pts, name, ne=ne, n_dims=len(ne), data=f32_data(random.Random(5), n)))[0]
    cases["model-gemma4-ple-post-norm-missing"] = build(pkvs, [t for t in pts if t.name != "blk.1.post_norm.weight"])[0]
    cases["model-gemma4-ple-width-huge"] = build(replace_kv(pkvs, "gemma4.embedding_length_per_layer_input", kv(
        "gemma4.embedding_length_per_layer_input", U32, 1 << 20)), pts)[0]
    # gemma4's experts: the fused gate_up's shape, the scales, the width key
    ekvs, ets = tiny_gemma4_moe()
    cases["model-gemma4-moe-gate-up-not-fused"] = build(ekvs, tensor_variant(
        ets, "blk.1.ffn_gate_up_exps.weight", ne=[N_EMBD, N_FF_EXP, N_EXPERT],
        data=f32_data(random.Random(6), N_EMBD * N_FF_EXP * N_EXPERT)))[0]
    cases["model-gemma4-moe-expert-scale-wrong-shape"] = build(ekvs, tensor_variant(
        ets, "blk.0.ffn_down_exps.scale", ne=[N_EXPERT + 1], data=f32_data(random.Random(7), N_EXPERT + 1)))[0]
    cases["model-gemma4-moe-router-scale-missing"] = build(
        ekvs, [t for t in ets if t.name != "blk.0.ffn_gate_inp.scale"])[0]
    cases["model-gemma4-moe-width-missing"] = build(drop_kv(ekvs, "gemma4.expert_feed_forward_length"), ets)[0]
    cases["model-gemma4-rope-freqs-nan"] = build(gkvs, tensor_variant(
        gts, "rope_freqs.weight", data=struct.pack("<f", float("nan")) * (N_EMBD // N_HEAD // 2)))[0]
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=pathlib.Path(__file__).resolve().parents[1], type=pathlib.Path)
    args = ap.parse_args()
    fixtures = args.root / "tests" / "fixtures"
    out = fixtures / "malformed"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.gguf"):
        old.unlink()
    valid, _ = build(*tiny_llama())
    (fixtures / "tiny-llama-valid.gguf").write_bytes(valid)
    (fixtures / "tiny-moe-valid.gguf").write_bytes(build(*tiny_moe())[0])
    (fixtures / "tiny-gemma4-valid.gguf").write_bytes(build(*tiny_gemma4())[0])
    (fixtures / "tiny-gemma4ple-valid.gguf").write_bytes(build(*tiny_gemma4_ple())[0])
    (fixtures / "tiny-gemma4moe-valid.gguf").write_bytes(build(*tiny_gemma4_moe())[0])
    cases = {**format_cases(), **model_cases()}
    for name, data in sorted(cases.items()):
        (out / (name + ".gguf")).write_bytes(data)
    print(f"wrote {fixtures / 'tiny-llama-valid.gguf'} ({len(valid)} bytes) and "
          f"{len(cases)} files in {out}")


if __name__ == "__main__":
    main()
