"""hf_folder.py: a Hugging Face model folder from a tiny F32 GGUF file, for
tests/e2e/test_hf.py and scripts/make-hf-fixtures.py (numpy and gguf only).

write_f32_folder undoes llama.cpp's conventions (Q/K RoPE permutation for
llama, Gemma's stored 1 + w) and writes model.safetensors next to the config
and tokenizer files of tests/fixtures/hf/<arch> (save_pretrained's)."""
import json
import pathlib
import shutil
import struct

import numpy as np

import gguf

HF = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "hf"


# ---- an F32 folder from a GGUF file: llama.cpp's conventions undone ----

def _unpermute(w, n_head):
    """GGML's adjacent RoPE pairs back to HF's rotate-half rows."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _field(reader, key):
    f = reader.fields[key]
    return f.parts[f.data[0]][0].item()


def _field_str(reader, key):
    f = reader.fields[key]
    return bytes(f.parts[f.data[0]]).decode()


def write_safetensors(path, tensors):
    """tensors: name -> float32 array, written in name order."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    pathlib.Path(path).write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def write_f32_folder(gguf_path, arch, out):
    """The HF folder holding the GGUF file's F32 weights: config and tokenizer
    files from tests/fixtures/hf/<arch>, model.safetensors from the GGUF.
    The expert tensors (3-D ffn_*_exps) become transformers' per-expert
    matrices; phi3's fused attn_qkv / ffn_up are its qkv_proj / gate_up_proj
    as they are, and its LongRoPE factor tensors live in config.json."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for f in (HF / arch).iterdir():
        if not f.name.startswith("model"):
            shutil.copy(f, out / f.name)
    r = gguf.GGUFReader(str(gguf_path))
    garch = _field_str(r, "general.architecture")
    n_head, n_head_kv = _field(r, f"{garch}.attention.head_count"), _field(r, f"{garch}.attention.head_count_kv")
    gemma = arch in ("gemma2", "gemma3")
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    per_layer = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
                 "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
                 "attn_k_norm": "self_attn.k_norm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                 "ffn_down": "mlp.down_proj", "post_ffw_norm": "post_feedforward_layernorm",
                 "post_attention_norm": "post_attention_layernorm",
                 "ffn_norm": "pre_feedforward_layernorm" if gemma else "post_attention_layernorm",
                 "attn_qkv": "self_attn.qkv_proj", "ffn_gate_inp": "mlp.gate"}
    experts = {"ffn_gate_exps": "mlp.experts.{}.gate_proj", "ffn_up_exps": "mlp.experts.{}.up_proj",
               "ffn_down_exps": "mlp.experts.{}.down_proj"}
    if arch == "phi3":
        per_layer["ffn_up"] = "mlp.gate_up_proj"
    if arch == "mixtral":
        per_layer["ffn_gate_inp"] = "block_sparse_moe.gate"
        experts = {"ffn_gate_exps": "block_sparse_moe.experts.{}.w1", "ffn_up_exps": "block_sparse_moe.experts.{}.w3",
                   "ffn_down_exps": "block_sparse_moe.experts.{}.w2"}
    tensors = {}
    for t in r.tensors:
        w = np.array(t.data, dtype=np.float32)
        if t.name.startswith("rope_factors_"):
            continue  # config.json's long_factor / short_factor
        if t.name.startswith("blk."):
            _, i, kind, suffix = t.name.split(".")
            if kind in experts:
                for e in range(w.shape[0]):
                    tensors[f"model.layers.{i}.{experts[kind].format(e)}.{suffix}"] = w[e]
                continue
            name = f"model.layers.{i}.{per_layer[kind]}.{suffix}"
            if garch == "llama" and kind in ("attn_q", "attn_k"):
                w = _unpermute(w, n_head if kind == "attn_q" else n_head_kv)
        else:
            name = names[t.name]
        if gemma and t.name.endswith("norm.weight"):
            w = w - np.float32(1.0)  # exact: w + 1 lies in [0.5, 2]
        tensors[name] = w
    write_safetensors(out / "model.safetensors", tensors)
    return out
