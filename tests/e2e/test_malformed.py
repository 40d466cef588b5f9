"""Malformed GGUF files through the CLI: every file of the corpus
(tests/fixtures/malformed, made by scripts/make-malformed-gguf.py) must make
`pasada info FILE` and `pasada run -m FILE -p hi -n 1` exit with status 1 and
print exactly one line on stderr, starting "pasada: ", with no sanitizer
report, on the release build and on the AddressSanitizer + UBSan build.

Files named tok-* and model-* are valid GGUF with one defect the tokenizer or
the model loader must catch; their line must name what is wrong (HINTS). The
others are caught by the GGUF reader; their line must name the file. The valid
tiny model the corpus derives from must be accepted."""
import pytest

from conftest import FIXTURES, SANITIZER_MARKS, assert_one_line_error, run_cli

MALFORMED = FIXTURES / "malformed"
VALID = FIXTURES / "tiny-llama-valid.gguf"
VALID_MOE = FIXTURES / "tiny-moe-valid.gguf"  # the base of the model-moe-* files
VALID_GEMMA4 = FIXTURES / "tiny-gemma4-valid.gguf"  # the base of the model-gemma4-* files
VALID_GEMMA4_PLE = FIXTURES / "tiny-gemma4ple-valid.gguf"  # with per-layer inputs: the base of model-gemma4-ple-*
VALID_GEMMA4_MOE = FIXTURES / "tiny-gemma4moe-valid.gguf"  # with experts: the base of model-gemma4-moe-*
CORPUS = sorted(p.name for p in MALFORMED.glob("*.gguf"))

# What the one line must mention (any of, case-insensitive) for files that
# only a later loader can reject: proof they fail for their own defect.
HINTS = {
    "tok-scores-length-mismatch": ["scores"],
    "tok-token-type-length-mismatch": ["token_type"],
    "tok-tokens-wrong-type": ["tokenizer.ggml.tokens"],
    "tok-tokens-missing": ["tokenizer.ggml.tokens"],
    "tok-bos-id-out-of-range": ["bos"],
    "tok-eos-id-out-of-range": ["eos"],
    "tok-merges-wrong-type": ["merges"],
    "tok-merges-not-an-array": ["merges"],
    "tok-model-unknown": ["no-such-tokenizer", "tokenizer.ggml.model"],
    "model-missing-block-count": ["block_count"],
    "model-head-count-zero": ["head_count"],
    "model-head-count-kv-not-dividing": ["head_count"],
    "model-attn-q-wrong-shape": ["attn_q"],
    "model-token-embd-wrong-shape": ["token_embd"],
    "model-missing-ffn-down": ["ffn_down"],
    "model-block-count-too-large": ["blk.1.", "block_count"],
    "model-moe-expert-count-zero": ["expert_count"],
    "model-moe-expert-count-huge": ["expert_count"],
    "model-moe-expert-count-missing": ["expert_count"],
    "model-moe-used-above-count": ["expert_used_count"],
    "model-moe-used-zero": ["expert_used_count"],
    "model-moe-router-wrong-shape": ["ffn_gate_inp"],
    "model-moe-experts-not-3d": ["ffn_up_exps"],
    "model-moe-experts-count-mismatch": ["ffn_down_exps"],
    "model-gemma4-key-value-sizes-differ": ["gemma4", "head sizes differ", "must be equal"],
    "model-gemma4-shared-kv-every-layer": ["shared_kv_layers", "out of range"],
    "model-gemma4-shared-kv-no-source": ["layer 1", "KV cache", "sliding"],
    "model-gemma4-ffn-length-array-count": ["feed_forward_length", "entries for 2 layers"],
    "model-gemma4-kv-heads-per-layer": ["head_count_kv", "not supported"],
    "model-gemma4-per-layer-embeddings": ["per_layer_token_embd"],
    "model-gemma4-ple-token-embd-short": ["per_layer_token_embd"],
    "model-gemma4-ple-token-embd-narrow": ["per_layer_token_embd"],
    "model-gemma4-ple-model-proj-wrong-shape": ["per_layer_model_proj"],
    "model-gemma4-ple-proj-norm-wrong-shape": ["per_layer_proj_norm"],
    "model-gemma4-ple-inp-gate-wrong-shape": ["blk.1.inp_gate"],
    "model-gemma4-ple-proj-wrong-shape": ["blk.0.proj"],
    "model-gemma4-ple-post-norm-missing": ["blk.1.post_norm"],
    "model-gemma4-ple-width-huge": ["embedding_length_per_layer_input", "out of range"],
    "model-gemma4-moe-gate-up-not-fused": ["blk.1.ffn_gate_up_exps"],
    "model-gemma4-moe-expert-scale-wrong-shape": ["blk.0.ffn_down_exps.scale"],
    "model-gemma4-moe-router-scale-missing": ["blk.0.ffn_gate_inp.scale"],
    "model-gemma4-moe-width-missing": ["expert_feed_forward_length"],
    "model-gemma4-rope-freqs-nan": ["rope_freqs.weight", "out of range"],
}
COMMANDS = {
    "info": lambda path: ["info", str(path)],
    "run": lambda path: ["run", "-m", str(path), "-p", "hi", "-n", "1"],
}


def test_corpus_is_complete():
    assert len(CORPUS) >= 40, "run scripts/make-malformed-gguf.py"
    missing = set(HINTS) - {name[:-5] for name in CORPUS}
    assert not missing, f"HINTS names files that are not in the corpus: {missing}"


@pytest.mark.parametrize("kind", ["release", "asan"])
@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("name", CORPUS)
def test_malformed_rejected(kind, command, name):
    path = MALFORMED / name
    res = run_cli(kind, COMMANDS[command](path))
    where = f"pasada {command} {name} ({kind})"
    stem = name[:-5]
    if stem in HINTS:
        assert_one_line_error(res, where, hints=HINTS[stem])
    elif stem.startswith(("tok-", "model-")):
        pytest.fail(f"{name}: add the words its message must contain to HINTS")
    else:
        assert_one_line_error(res, where, names=[name])


@pytest.mark.parametrize("kind", ["release", "asan"])
@pytest.mark.parametrize("valid", [VALID, VALID_MOE, VALID_GEMMA4, VALID_GEMMA4_PLE, VALID_GEMMA4_MOE],
                         ids=["llama", "moe", "gemma4", "gemma4ple", "gemma4moe"])
def test_valid_tiny_model_accepted(kind, valid):
    res = run_cli(kind, ["info", str(valid)])
    assert res.returncode == 0, f"pasada info {valid.name} ({kind}): {res.stderr[-3000:]}"
    assert not any(m in res.stderr for m in SANITIZER_MARKS), res.stderr[-3000:]
    # The corpus's tok-*/model-* files must fail for their one defect, so the
    # base they are made from must also run.
    res = run_cli(kind, COMMANDS["run"](valid))
    assert res.returncode == 0, f"pasada run -m {valid.name} ({kind}): {res.stderr[-3000:]}"
    assert not any(m in res.stderr for m in SANITIZER_MARKS), res.stderr[-3000:]
