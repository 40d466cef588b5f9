"""Broken Hugging Face model folders through the CLI: every folder of the
corpus (tests/fixtures/malformed-hf, made by scripts/make-malformed-hf.py)
must make `pasada info -m DIR` (release and AddressSanitizer + UBSan builds)
and `pasada run -m DIR -p hi -n 1` (release) exit with status 1 and print
exactly one line on stderr, starting "pasada: ", that names the problem
(HINTS), with no sanitizer report. The valid folder they derive from loads
and runs."""
import pytest

from conftest import FIXTURES
from test_malformed import SANITIZER_MARKS, run_cli

CORPUS_DIR = FIXTURES / "malformed-hf"
CORPUS = sorted(p.name for p in CORPUS_DIR.iterdir() if p.is_dir() and not p.name.startswith("valid"))
VALID = ("valid", "valid-gpt-oss", "valid-qwen35", "valid-qwen3moe", "valid-gemma4")  # llama's, and the families' cases' bases

# What the one line must mention (all of, case-insensitive): the file and the defect.
HINTS = {
    "st-missing": ["model.safetensors", "cannot open"],
    "st-too-short": ["model.safetensors", "too short"],
    "st-header-length-past-end": ["model.safetensors", "header length", "past the end"],
    "st-header-not-json": ["model.safetensors", "invalid json"],
    "st-header-not-utf8": ["model.safetensors", "utf-8"],
    "st-header-deeply-nested": ["model.safetensors", "nested"],
    "st-header-not-object": ["model.safetensors", "not a json object"],
    "st-offsets-past-end": ["model.safetensors", "past the end of the data"],
    "st-offsets-reversed": ["model.safetensors", "data_offsets"],
    "st-offsets-overlap": ["model.safetensors", "overlap"],
    "st-dtype-shape-mismatch": ["model.safetensors", "bytes of data", "shape"],
    "st-dtype-unknown": ["model.safetensors", "unknown dtype"],
    "st-dtype-unsupported": ["model.safetensors", "i64"],
    "st-shape-negative": ["model.safetensors", "shape"],
    "st-shape-too-many-dims": ["model.safetensors", "dims"],
    "st-duplicate-name": ["model.safetensors", "named twice"],
    "st-index-missing-shard": ["model-00001-of-00002.safetensors", "cannot open"],
    "st-index-path-escape": ["model.safetensors.index.json", "not a file name"],
    "st-index-tensor-not-in-shard": ["model-00001-of-00002.safetensors", "not in it"],
    "st-tensor-in-two-shards": ["model-00002-of-00002.safetensors", "also in"],
    "config-missing": ["config.json", "cannot open"],
    "config-not-utf8": ["config.json", "utf-8"],
    "config-truncated": ["config.json", "invalid json"],
    "config-deeply-nested": ["config.json", "nested"],
    "config-not-object": ["config.json", "not a json object"],
    "config-missing-hidden-size": ["config.json", "hidden_size", "missing"],
    "config-layers-not-a-number": ["config.json", "num_hidden_layers"],
    "config-unknown-architecture": ["config.json", "gpt2lmheadmodel", "not supported"],
    "config-rope-scaling-unsupported": ["config.json", "dynamic", "not supported"],
    "tok-missing": ["tokenizer.json", "cannot open"],
    "tok-not-utf8": ["tokenizer.json", "utf-8"],
    "tok-model-unigram": ["tokenizer.json", "unigram"],
    "tok-byte-fallback": ["tokenizer.json", "byte_fallback"],
    "tok-pretokenizer-unknown": ["tokenizer.json", "pre_tokenizer"],
    "tok-id-negative": ["tokenizer.json", "token id"],
    "tok-id-past-vocab-size": ["tokenizer.json", "vocab_size"],
    "tok-id-duplicate": ["tokenizer.json", "token id 66"],
    "tok-merges-not-pairs": ["tokenizer.json", "merges"],
    "tok-bos-token-unknown": ["tokenizer_config.json", "bos_token"],
    "model-tensor-unknown-name": ["model.safetensors", "mlp.extra.weight"],
    "model-q-proj-wrong-shape": ["blk.0.attn_q.weight", "shape"],
    "model-down-proj-missing": ["blk.0.ffn_down.weight", "missing"],
    "oss-gate-up-odd": ["mlp.experts.gate_up_proj", "even"],
    "oss-gate-up-expert-count": ["mlp.experts.gate_up_proj", "2 experts"],
    "oss-down-proj-wrong-shape": ["ffn_down_exps.weight", "shape"],
    "oss-gate-up-bias-2d-missing-dim": ["gate_up_proj_bias", "2 experts"],
    "oss-sinks-missing": ["blk.0.attn_sinks.weight", "missing"],
    "oss-router-bias-missing": ["blk.0.ffn_gate_inp.bias", "missing"],
    "oss-mxfp4-scales-missing": ["layer 0", "mxfp4 gate_up_proj", "gate_up_proj_scales"],
    "oss-mxfp4-blocks-f32": ["gate_up_proj_blocks", "mxfp4", "u8; it is f32"],
    "oss-layer-types-unsupported": ["config.json", "layer_types[0]"],
    "oss-swiglu-limit": ["config.json", "swiglu_limit"],
    "oss-experts-missing-key": ["config.json", "num_local_experts", "missing"],
    "q35-in-proj-qkv-wrong-shape": ["linear_attn.in_proj_qkv.weight", "wrong shape", "16 rows"],
    "q35-conv1d-wrong-shape": ["linear_attn.conv1d.weight", "wrong shape"],
    "q35-a-log-missing": ["blk.0.ssm_a", "missing"],
    "q35-out-proj-missing": ["blk.0.ssm_out.weight", "missing"],
    "q35-fused-qkvz": ["in_proj_qkvz", "no place"],
    "q35-q-proj-no-gate": ["blk.1.attn_q.weight", "shape"],
    "q35-layer-types-unsupported": ["config.json", "layer_types[0]"],
    "q35-value-heads-not-multiple": ["config.json", "value heads"],
    "moe-gate-up-wrong-shape": ["mlp.experts.gate_up_proj", "is not [2 experts][4][8] or, as x @ w, [2 experts][8][4]"],
    "moe-gate-up-2d": ["mlp.experts.gate_up_proj", "2 dims"],
    "moe-down-proj-expert-count": ["mlp.experts.down_proj", "is not [2 experts][8][2]"],
    "moe-down-proj-missing": ["mlp.experts.gate_up_proj", "no down_proj"],
    "moe-orientation-mixed": ["mlp.experts.down_proj", "x @ w", "gate_up_proj"],
    "moe-fused-and-per-expert": ["mlp.experts.gate_up_proj", "experts.0.up_proj.weight", "one by one"],
    "moe-past-the-layers": ["model.layers.1.mlp.experts.down_proj", "past the 1 layers"],
    "g4-layer-types-length": ["config.json", "layer_types", "array of 4 entries"],
    "g4-layer-types-unknown": ["config.json", "layer_types[1]"],
    "g4-per-layer-config-key": ["config.json", "per_layer_config['1']", "intermediate_size"],
    "g4-heads-differ-in-kind": ["config.json", "full attention layers", "not supported"],
    "g4-shared-kv-no-source": ["config.json", "num_kv_shared_layers", "layer 1"],
    "g4-rope-type-unsupported": ["config.json", "full_attention.rope_type 'yarn'", "not supported"],
    "g4-vocab-per-layer-differs": ["config.json", "vocab_size_per_layer_input", "not supported"],
    "g4-bidirectional": ["config.json", "use_bidirectional_attention", "not supported"],
    "g4-multimodal-no-text-config": ["config.json", "gemma4forconditionalgeneration", "text_config"],
    "g4-ple-width-mismatch": ["model.embed_tokens_per_layer.weight", "wrong shape", "hidden_size_per_layer_input 3"],
    "g4-ple-without-config": ["model.embed_tokens_per_layer.weight", "hidden_size_per_layer_input is 0"],
    "g4-ple-token-table-missing": ["per_layer_token_embd.weight", "missing"],
    "g4-ple-projection-wrong-shape": ["model.per_layer_model_projection.weight", "wrong shape"],
    "g4-ple-layer-gate-missing": ["blk.1.inp_gate.weight", "missing"],
    "g4-experts-gate-up-wrong-shape": ["experts.gate_up_proj", "is not [2 experts][4][8]"],
    "g4-experts-without-config": ["experts.down_proj", "enable_moe_block"],
    "g4-expert-scale-missing": ["blk.0.ffn_down_exps.scale", "missing"],
    "g4-k-proj-missing": ["blk.1.attn_k.weight", "missing"],
}
RUNS = [("release", "info"), ("asan", "info"), ("release", "run")]


def command(kind, path):
    return ["info", "-m", str(path)] if kind == "info" else ["run", "-m", str(path), "-p", "hi", "-n", "1"]


def test_corpus_is_complete():
    assert set(CORPUS) == set(HINTS), "run scripts/make-malformed-hf.py (or update HINTS)"


@pytest.mark.parametrize("kind,cmd", RUNS)
@pytest.mark.parametrize("name", CORPUS)
def test_malformed_folder_rejected(name, kind, cmd):
    res = run_cli(kind, command(cmd, CORPUS_DIR / name))
    where = f"pasada {cmd} {name} ({kind}): exit {res.returncode}\nstderr:\n{res.stderr[-3000:]}"
    assert not any(m in res.stderr for m in SANITIZER_MARKS), "sanitizer report: " + where
    assert res.returncode == 1, where
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("pasada: "), "expected one line: " + where
    missing = [h for h in HINTS[name] if h not in lines[0].lower()]
    assert not missing, f"the message lacks {missing}: " + where


@pytest.mark.parametrize("valid", VALID)
@pytest.mark.parametrize("kind", ["release", "asan"])
def test_valid_folder_accepted(kind, valid):
    for cmd in ("info", "run"):
        res = run_cli(kind, command(cmd, CORPUS_DIR / valid))
        assert res.returncode == 0, f"pasada {cmd} valid ({kind}): {res.stderr[-3000:]}"
        assert not any(m in res.stderr for m in SANITIZER_MARKS), res.stderr[-3000:]
