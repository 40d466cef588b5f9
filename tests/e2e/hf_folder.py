"""hf_folder.py: a Hugging Face model folder from a tiny F32 GGUF file, for
tests/e2e/test_hf.py and scripts/make-hf-fixtures.py (numpy and gguf only).

write_f32_folder undoes llama.cpp's conventions (Q/K RoPE permutation for
llama, Gemma's and Qwen3.5's stored 1 + w, gpt-oss's split and transposed
experts, Qwen3.5's tiled value heads and -exp(A_log)) and writes
model.safetensors next to the config and tokenizer files of
tests/fixtures/hf/<arch> (save_pretrained's). to_mxfp4 writes experts as
gpt-oss's released checkpoints store them (MXFP4 blocks and scales);
fuse_experts turns a folder's per-expert tensors into transformers' fused
3-D ones (save_pretrained(save_original_format=False)'s layout, or its x @ W
transpose)."""
import json
import pathlib
import shutil
import struct

import numpy as np

import gguf

HF = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "hf"


# MXFP4 as gpt-oss checkpoints store it (transformers' integrations/mxfp4.py
# reads it so): per expert, the rows of W^T (x @ W's output features) in
# groups of 32 values; *_blocks [E][rows][groups][16] bytes, byte j holding
# value 2j in its low nibble and 2j + 1 in its high one, as codes of FP4;
# *_scales [E][rows][groups] the exponents + 127. scripts/make-hf-fixtures.py
# checks transformers' dequantizer reads these blocks as `values`.
FP4 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def to_mxfp4(wt):
    """wt [E][rows][cols] -> (blocks, scales, the values they stand for)."""
    g = wt.reshape(*wt.shape[:-1], -1, 32)
    amax = np.abs(g).max(-1)
    exp = np.ceil(np.log2(np.maximum(amax, 1e-30) / 6)).clip(-127, 127)
    codes = np.abs(g[..., None] / np.exp2(exp)[..., None, None] - FP4).argmin(-1).astype(np.uint8)
    blocks = codes[..., 0::2] | (codes[..., 1::2] << 4)
    values = (FP4[codes] * np.exp2(exp)[..., None]).reshape(wt.shape).astype(np.float32)
    return blocks, (exp + 127).astype(np.uint8), values


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


def read_safetensors(path):
    """name -> float32 array of an F32 model.safetensors."""
    data = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    return {k: np.frombuffer(data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], "<f4").reshape(v["shape"])
            for k, v in header.items() if k != "__metadata__"}


def fuse_experts(folder, out, transposed=False):
    """A copy of an F32 folder with each layer's per-expert matrices fused
    as transformers' MoE modules hold them (what save_pretrained writes with
    save_original_format=False): mlp.experts.gate_up_proj [E][2 ff][n_embd]
    (each expert's gate rows, then its up rows) and mlp.experts.down_proj
    [E][n_embd][ff]; Mixtral's block_sparse_moe. renamed mlp. as its
    router is. transposed: both as x @ W products ([E][n_embd][2 ff],
    [E][ff][n_embd]), as some published checkpoints store them."""
    import re
    out = pathlib.Path(out)
    shutil.copytree(folder, out)
    t = read_safetensors(out / "model.safetensors")
    fused, parts = {}, {}
    kinds = {"gate_proj": 0, "up_proj": 1, "down_proj": 2, "w1": 0, "w3": 1, "w2": 2}
    for name, w in t.items():
        name = name.replace(".block_sparse_moe.", ".mlp.")
        m = re.fullmatch(r"(model\.layers\.\d+\.mlp\.experts)\.(\d+)\.(\w+)\.weight", name)
        if m:
            parts.setdefault(m[1], {})[(kinds[m[3]], int(m[2]))] = w
        else:
            fused[name] = w
    for p, d in parts.items():
        n_e = 1 + max(e for _, e in d)
        stack = [np.stack([d[(k, e)] for e in range(n_e)]) for k in range(3)]
        gate_up, down = np.concatenate(stack[:2], axis=1), stack[2]
        if transposed:
            gate_up, down = gate_up.transpose(0, 2, 1), down.transpose(0, 2, 1)
        fused[p + ".gate_up_proj"], fused[p + ".down_proj"] = gate_up, down
    write_safetensors(out / "model.safetensors", fused)
    return out


def write_safetensors(path, tensors):
    """tensors: name -> float32 (or uint8: U8) array, written in name order."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        u8 = np.asarray(tensors[name]).dtype == np.uint8
        a = np.ascontiguousarray(tensors[name], dtype=np.uint8 if u8 else "<f4")
        header[name] = {"dtype": "U8" if u8 else "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    pathlib.Path(path).write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def add_safetensors(folder, tensors):
    """The folder's model.safetensors (F32) with `tensors` added (Qwen3.5's
    mtp.* from tests/fixtures/tiny/qwen35.mtp.safetensors, say)."""
    path = pathlib.Path(folder) / "model.safetensors"
    write_safetensors(path, {**read_safetensors(path), **tensors})


# Qwen3.5's linear layers: GGUF kind -> transformers' name
_QWEN35_LINEAR = {"attn_qkv": "linear_attn.in_proj_qkv.weight", "attn_gate": "linear_attn.in_proj_z.weight",
                  "ssm_beta": "linear_attn.in_proj_b.weight", "ssm_alpha": "linear_attn.in_proj_a.weight",
                  "ssm_conv1d": "linear_attn.conv1d.weight", "ssm_a": "linear_attn.A_log",
                  "ssm_dt": "linear_attn.dt_bias", "ssm_norm": "linear_attn.norm.weight",
                  "ssm_out": "linear_attn.out_proj.weight"}


def _untile(x, axis, n_k, n_v, d):
    """llama.cpp's tiled value heads ([r][n_k][d]) back to transformers'
    grouped ones ([n_k][r][d]) along axis, over the axis' last n_v * d."""
    r = n_v // n_k
    x = np.moveaxis(x, axis, 0)
    head, tail = x[: x.shape[0] - n_v * d], x[x.shape[0] - n_v * d:]
    tail = tail.reshape(r, n_k, d, *tail.shape[1:]).swapaxes(0, 1).reshape(tail.shape)
    return np.ascontiguousarray(np.moveaxis(np.concatenate([head, tail]), 0, axis))


def _a_log(a):
    """A_log with -exp(A_log) == a in float32 (as pasada computes it: exp in
    double, rounded), the nearest float32 to log(-a) nudged until it is."""
    out = np.log(-a.astype(np.float64)).astype(np.float32)
    for i in range(out.size):
        for step in range(64):
            if np.float32(-np.exp(np.float64(out[i]))) == a[i]:
                break
            up = np.float32(-np.exp(np.float64(out[i]))) > a[i]  # -exp too large: A_log up
            out[i] = np.nextafter(out[i], np.float32(np.inf) if up else np.float32(-np.inf))
    return out


def _qwen35_untile(kind, w, n_k, n_v, d_k, d_v):
    if kind == "ssm_norm":
        return w
    if kind == "ssm_a":
        return _untile(_a_log(w), 0, n_k, n_v, 1)
    if kind in ("ssm_dt", "ssm_beta", "ssm_alpha"):
        return _untile(w, 0, n_k, n_v, 1)
    if kind == "ssm_out":
        return _untile(w, 1, n_k, n_v, d_v)
    w = _untile(w, 0, n_k, n_v, d_v)
    return w[:, None, :] if kind == "ssm_conv1d" else w


# Gemma 4's tensors: GGUF name (after blk.N. or at the top) -> transformers'
# (after model.layers.N. or model.), where they are not the other families'
_GEMMA4 = {"layer_output_scale.weight": "layer_scalar", "inp_gate.weight": "per_layer_input_gate.weight",
           "proj.weight": "per_layer_projection.weight", "post_norm.weight": "post_per_layer_input_norm.weight",
           "ffn_gate_inp.weight": "router.proj.weight", "ffn_gate_inp.scale": "router.scale",
           "ffn_down_exps.scale": "router.per_expert_scale", "ffn_gate_up_exps.weight": "experts.gate_up_proj",
           "ffn_down_exps.weight": "experts.down_proj", "pre_ffw_norm_2.weight": "pre_feedforward_layernorm_2.weight",
           "post_ffw_norm_1.weight": "post_feedforward_layernorm_1.weight",
           "post_ffw_norm_2.weight": "post_feedforward_layernorm_2.weight",
           "per_layer_token_embd.weight": "embed_tokens_per_layer.weight",
           "per_layer_model_proj.weight": "per_layer_model_projection.weight",
           "per_layer_proj_norm.weight": "per_layer_projection_norm.weight"}


def write_f32_folder(gguf_path, arch, out):
    """The HF folder holding the GGUF file's F32 weights: config and tokenizer
    files from tests/fixtures/hf/<arch>, model.safetensors from the GGUF.
    The expert tensors (3-D ffn_*_exps) become transformers' per-expert
    matrices (gpt-oss: its fused x @ W gate_up_proj / down_proj and their
    biases); Qwen3.5's linear layers get transformers' names, grouped value
    heads and A_log back; phi3's fused attn_qkv / ffn_up are its qkv_proj / gate_up_proj
    as they are, and its LongRoPE factor tensors live in config.json; Gemma 4's
    (gemma4, gemma4ple, gemma4moe) norms are as stored, its fused experts
    3-D as transformers holds them, its rope_freqs in config.json's
    rope_parameters."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for f in (HF / arch).iterdir():
        if not f.name.startswith("model"):
            shutil.copy(f, out / f.name)
    r = gguf.GGUFReader(str(gguf_path))
    garch = _field_str(r, "general.architecture")
    n_head, n_head_kv = _field(r, f"{garch}.attention.head_count"), _field(r, f"{garch}.attention.head_count_kv")
    gemma = arch in ("gemma2", "gemma3")
    g4 = garch == "gemma4"
    names = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    per_layer = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
                 "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
                 "attn_k_norm": "self_attn.k_norm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                 "ffn_down": "mlp.down_proj", "post_ffw_norm": "post_feedforward_layernorm",
                 "post_attention_norm": "post_attention_layernorm",
                 "ffn_norm": "pre_feedforward_layernorm" if gemma or g4 else "post_attention_layernorm",
                 "attn_qkv": "self_attn.qkv_proj", "ffn_gate_inp": "mlp.gate"}
    experts = {"ffn_gate_exps": "mlp.experts.{}.gate_proj", "ffn_up_exps": "mlp.experts.{}.up_proj",
               "ffn_down_exps": "mlp.experts.{}.down_proj"}
    if arch == "phi3":
        per_layer["ffn_up"] = "mlp.gate_up_proj"
    if arch == "mixtral":
        per_layer["ffn_gate_inp"] = "block_sparse_moe.gate"
        experts = {"ffn_gate_exps": "block_sparse_moe.experts.{}.w1", "ffn_up_exps": "block_sparse_moe.experts.{}.w3",
                   "ffn_down_exps": "block_sparse_moe.experts.{}.w2"}
    if arch == "gpt-oss":
        per_layer.update({"attn_sinks": "self_attn.sinks", "ffn_gate_inp": "mlp.router"})
    if arch == "qwen35":
        per_layer.update(_QWEN35_LINEAR)
        lin = (_field(r, "qwen35.ssm.group_count"), _field(r, "qwen35.ssm.time_step_rank"),
               _field(r, "qwen35.ssm.state_size"),
               _field(r, "qwen35.ssm.inner_size") // _field(r, "qwen35.ssm.time_step_rank"))
    tensors, oss = {}, {}
    for t in r.tensors:
        w = np.array(t.data, dtype=np.float32)
        if arch == "gpt-oss" and ("_exps." in t.name or t.name.endswith("attn_output.bias")):
            oss[t.name] = w  # below: transformers' fused experts, o_proj's bias
            continue
        if arch == "qwen35" and t.name.startswith("blk.") and t.name.split(".")[2] in _QWEN35_LINEAR:
            _, i, kind, *_ = t.name.split(".")
            tensors[f"model.layers.{i}.{_QWEN35_LINEAR[kind]}"] = _qwen35_untile(kind, w, *lin)
            continue
        if t.name.startswith("rope_factors_") or (g4 and t.name == "rope_freqs.weight"):
            continue  # config.json's long_factor / short_factor; Gemma 4's proportional RoPE
        part = t.name.split(".", 2)[2] if t.name.startswith("blk.") else t.name
        if g4 and part in _GEMMA4:
            layer = f"layers.{t.name.split('.')[1]}." if t.name.startswith("blk.") else ""
            tensors[f"model.{layer}{_GEMMA4[part]}"] = w
            continue
        if t.name.startswith("blk."):
            _, i, kind, suffix = t.name.split(".")
            if kind in experts:
                for e in range(w.shape[0]):
                    tensors[f"model.layers.{i}.{experts[kind].format(e)}.{suffix}"] = w[e]
                continue
            name = f"model.layers.{i}.{per_layer[kind]}" + ("" if kind == "attn_sinks" else f".{suffix}")
            if garch == "llama" and kind in ("attn_q", "attn_k"):
                w = _unpermute(w, n_head if kind == "attn_q" else n_head_kv)
        else:
            name = names[t.name]
        if (gemma or arch == "qwen35") and t.name.endswith("norm.weight"):
            w = w - np.float32(1.0)  # exact: w + 1 lies in [0.5, 2]
        tensors[name] = w
    for name, w in oss.items():
        _, i, kind, suffix = name.split(".")
        p = f"model.layers.{i}."
        if kind == "attn_output":
            tensors[p + "self_attn.o_proj.bias"] = w
        elif kind == "ffn_down_exps":  # [E][n_embd][ff] -> x @ W's [E][ff][n_embd]
            tensors[p + "mlp.experts.down_proj" + ("_bias" if suffix == "bias" else "")] = (
                w if suffix == "bias" else np.ascontiguousarray(w.transpose(0, 2, 1)))
        elif kind == "ffn_gate_exps":  # gate the even, up the odd columns
            up = oss[name.replace("ffn_gate_exps", "ffn_up_exps")]
            if suffix == "bias":
                gu = np.empty((w.shape[0], 2 * w.shape[1]), np.float32)
                gu[:, 0::2], gu[:, 1::2] = w, up
                tensors[p + "mlp.experts.gate_up_proj_bias"] = gu
            else:
                gu = np.empty((w.shape[0], w.shape[2], 2 * w.shape[1]), np.float32)
                gu[:, :, 0::2], gu[:, :, 1::2] = w.transpose(0, 2, 1), up.transpose(0, 2, 1)
                tensors[p + "mlp.experts.gate_up_proj"] = gu
    write_safetensors(out / "model.safetensors", tensors)
    return out
