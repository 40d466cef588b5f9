#!/usr/bin/env python3
"""bert-to-gguf.py: a Hugging Face BERT folder (config.json, model.safetensors,
tokenizer.json, optional 1_Pooling/config.json of sentence-transformers) as a
GGUF file in the form llama.cpp's convert_hf_to_gguf.py writes for BERT:

  arch "bert": bert.{context_length, embedding_length, feed_forward_length,
  block_count, attention.head_count, attention.layer_norm_epsilon,
  attention.causal = false, pooling_type (1 mean, 2 cls)};
  tokenizer.ggml.model "bert" with the vocabulary in llama.cpp's spelling
  (a word-initial token gains U+2581, a "##" continuation loses its "##",
  control tokens stay as they are), token types (3 for the special tokens),
  bos = [CLS], seperator = [SEP], unknown, padding, mask ids, add_bos and
  add_sep true, token_type_count, normalizer.lowercase and
  normalizer.strip_accents (BertNormalizer's, strip_accents null resolved
  to lowercase);
  tensors token_embd, position_embd, token_types, token_embd_norm.{weight,bias},
  blk.N.{attn_q, attn_k, attn_v, attn_output, attn_output_norm, ffn_up,
  ffn_down, layer_output_norm}.{weight,bias}, all F32 (the pooler is dropped).

Reads the safetensors file with numpy alone (an 8-byte little-endian header
length, a JSON header of {name: {dtype, shape, data_offsets}}, then the raw
data), so it runs in the test venv (numpy, gguf).
Usage: bert-to-gguf.py MODEL_DIR OUT.gguf
"""
import json
import pathlib
import struct
import sys

import numpy as np

import gguf

DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path):
    """{name: float32 array} of a .safetensors file."""
    data = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] == "BF16":
            lo, hi = t["data_offsets"]
            u = np.frombuffer(data[8 + n + lo:8 + n + hi], "<u2").astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            lo, hi = t["data_offsets"]
            arr = np.frombuffer(data[8 + n + lo:8 + n + hi], np.dtype(DTYPES[t["dtype"]]).newbyteorder("<"))
        out[name] = arr.reshape(t["shape"])
    return out


def tensor_name(hf):
    """The GGUF name of a Hugging Face BERT tensor, None for those dropped."""
    hf = hf.removeprefix("bert.")
    fixed = {"embeddings.word_embeddings.weight": "token_embd.weight",
             "embeddings.position_embeddings.weight": "position_embd.weight",
             "embeddings.token_type_embeddings.weight": "token_types.weight",
             "embeddings.LayerNorm.weight": "token_embd_norm.weight",
             "embeddings.LayerNorm.bias": "token_embd_norm.bias"}
    if hf in fixed:
        return fixed[hf]
    if not hf.startswith("encoder.layer."):
        return None  # embeddings.position_ids, pooler.*
    rest = hf[len("encoder.layer."):]
    n, part = rest.split(".", 1)
    parts = {"attention.self.query": "attn_q", "attention.self.key": "attn_k",
             "attention.self.value": "attn_v", "attention.output.dense": "attn_output",
             "attention.output.LayerNorm": "attn_output_norm", "intermediate.dense": "ffn_up",
             "output.dense": "ffn_down", "output.LayerNorm": "layer_output_norm"}
    base, kind = part.rsplit(".", 1)
    if base not in parts:
        raise SystemExit(f"bert-to-gguf: unknown tensor {hf}")
    return f"blk.{n}.{parts[base]}.{kind}"


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: bert-to-gguf.py MODEL_DIR OUT.gguf")
    src, out = pathlib.Path(sys.argv[1]), sys.argv[2]
    cfg = json.loads((src / "config.json").read_text())
    if cfg.get("model_type") != "bert":
        raise SystemExit(f"bert-to-gguf: {src}: model_type {cfg.get('model_type')!r} is not bert")
    tok = json.loads((src / "tokenizer.json").read_text())
    w = gguf.GGUFWriter(out, "bert")
    w.add_name(src.name)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_layer_norm_eps(cfg["layer_norm_eps"])
    w.add_causal_attention(False)
    pool_cfg = src / "1_Pooling" / "config.json"
    if pool_cfg.is_file():
        pool = json.loads(pool_cfg.read_text())
        if pool.get("pooling_mode_mean_tokens"):
            w.add_pooling_type(gguf.PoolingType.MEAN)
        elif pool.get("pooling_mode_cls_token"):
            w.add_pooling_type(gguf.PoolingType.CLS)

    vocab = tok["model"]["vocab"]
    if tok["model"]["type"] != "WordPiece" or tok["model"].get("continuing_subword_prefix", "##") != "##":
        raise SystemExit("bert-to-gguf: the tokenizer is not WordPiece with '##' continuations")
    n_vocab = max(vocab.values()) + 1
    tokens = [f"[PAD{i}]" for i in range(n_vocab)]
    for t, i in vocab.items():
        tokens[i] = t
    special = {a["id"] for a in tok.get("added_tokens", []) if a.get("special")}
    types = [gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL for i in range(n_vocab)]
    spelled = [t if i in special else (t[2:] if t.startswith("##") else "\u2581" + t)
               for i, t in enumerate(tokens)]
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("default")
    w.add_token_list(spelled)
    w.add_token_types(types)
    w.add_token_type_count(cfg.get("type_vocab_size", 2))
    ids = {t: vocab[t] for t in ("[CLS]", "[SEP]", "[UNK]", "[PAD]", "[MASK]") if t in vocab}
    w.add_bos_token_id(ids["[CLS]"])
    w.add_sep_token_id(ids["[SEP]"])
    w.add_unk_token_id(ids["[UNK]"])
    if "[PAD]" in ids:
        w.add_pad_token_id(ids["[PAD]"])
    if "[MASK]" in ids:
        w.add_mask_token_id(ids["[MASK]"])
    w.add_add_bos_token(True)
    w.add_add_sep_token(True)
    norm = tok.get("normalizer") or {}
    lowercase = norm.get("lowercase", True)
    strip = norm.get("strip_accents")
    w.add_bool("tokenizer.ggml.normalizer.lowercase", lowercase)
    w.add_bool("tokenizer.ggml.normalizer.strip_accents", lowercase if strip is None else strip)

    for name, arr in read_safetensors(src / "model.safetensors").items():
        g = tensor_name(name)
        if g is not None:
            w.add_tensor(g, np.ascontiguousarray(arr, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
