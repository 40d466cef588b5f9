#!/usr/bin/env python3
"""make-hf-fixtures.py: Hugging Face model folders of the tiny models, for the
tests of `pasada -m DIR` (tests/e2e/test_hf.py).

The models are the ones of scripts/make-tiny-models.py (same seeds, same
random initialisation: checked here against the committed GGUF files, tensor
by tensor), saved by transformers' save_pretrained with a tokenizer.json made
by the `tokenizers` library from the same vocabulary and merges as the GGUF
files, and tokenizer_config.json / chat_template.jinja written by
PreTrainedTokenizerFast.save_pretrained:

    tests/fixtures/hf/llama/    BF16, one model.safetensors, a chat template
    tests/fixtures/hf/gemma3/   BF16
    tests/fixtures/hf/qwen3/    BF16
    tests/fixtures/hf/qwen2/    F16, sharded (model-0000N-of-0000M.safetensors
                                + model.safetensors.index.json)
    tests/fixtures/hf/<arch>.logits.npz   ids, logits: transformers in F32 on
                                the folder's weights (rounded to BF16 / F16)

    tests/fixtures/hf/{gemma2,phi3,qwen3moe,mixtral}/  config and tokenizer
                                files only (save_pretrained's), no weights
    tests/fixtures/hf/rope.json, rope.npz   RoPE scaling of the tiny llama
                                (llama3: Llama 3.1's; linear): each variant's
                                rope_parameters, transformers' logits in F32
                                on the F32 weights and its inv_freq

F32 folders are not committed: the test writes them from the GGUF files
(tests/e2e/hf_folder.py: write_f32_folder, the inverse of llama.cpp's
conventions). This script checks that folder equals what save_pretrained
writes in F32, tensor for tensor, so the test's folder is a real one.

Needs the reference venv (torch, transformers, tokenizers); see docs/parity.md.
Usage: make-hf-fixtures.py [--out tests/fixtures/hf]
"""
import argparse
import copy
import importlib.util
import json
import pathlib
import shutil
import sys
import tempfile

import numpy as np
import torch
import transformers
from safetensors.numpy import load_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

import gguf

ROOT = pathlib.Path(__file__).resolve().parents[1]
DTYPES = {"llama": torch.bfloat16, "gemma3": torch.bfloat16, "qwen3": torch.bfloat16, "qwen2": torch.float16}
SHARDED = {"qwen2"}
# Families committed as config and tokenizer files only: the test writes
# their F32 weights from the GGUF files (checked here against save_pretrained).
CONFIG_ONLY = ("gemma2", "phi3", "qwen3moe", "mixtral")
CHATML = ("{% for m in messages %}<|bos|>{{ m['role'] }}\n{{ m['content'] }}<|eos|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|bos|>assistant\n{% endif %}")


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    spec.loader.exec_module(mod)
    return mod


def save_tokenizer(mt, vocab_size, out, chat):
    tokens, types, merges = mt.tokenizer_vocab(vocab_size)
    bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=[tuple(m.split(" ")) for m in merges])
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["<|bos|>", "<|eos|>"])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>")
    if chat:
        fast.chat_template = CHATML
    fast.save_pretrained(out)
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["add_bos_token"] = False  # as the GGUF files say
    cfg_path.write_text(json.dumps(cfg, indent=2))
    for t, i in ((t, i) for i, t in enumerate(tokens) if types[i] == 3):
        assert tok.token_to_id(t) == i


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "hf"))
    ap.add_argument("--arch", action="append", help="only this architecture (repeatable; default: all)")
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(2)
    mt = load(ROOT / "scripts" / "make-tiny-models.py", "make_tiny_models")
    th = load(ROOT / "tests" / "e2e" / "hf_folder.py", "hf_folder")
    tiny = ROOT / "tests" / "fixtures" / "tiny"

    for k, (arch, spec) in enumerate(mt.ARCHS.items()):
        if args.arch and arch not in args.arch:
            continue
        gen = torch.Generator().manual_seed(mt.SEED + mt.seed_index(arch, k))
        cfg = mt.make_config(arch, spec)
        cfg._attn_implementation = "eager"
        model = mt.model_class(arch)(cfg).to(torch.float32).eval()
        mt.randomize(model, arch, gen)

        d = out / arch
        shutil.rmtree(d, ignore_errors=True)
        f32 = copy.deepcopy(model)
        if arch in CONFIG_ONLY:
            f32.save_pretrained(d)
            for f in d.glob("model*"):
                f.unlink()
        else:
            low = model.to(DTYPES[arch])
            low.save_pretrained(d, max_shard_size="100KB" if arch in SHARDED else "1GB")
        save_tokenizer(mt, cfg.vocab_size, d, chat=arch == "llama")
        if arch in SHARDED:
            assert (d / "model.safetensors.index.json").exists(), "no shards written"
        with tempfile.TemporaryDirectory() as tmp:
            tmp = pathlib.Path(tmp)
            # The same weights as the committed GGUF, and the test's F32
            # folder equal to save_pretrained's.
            f32.save_pretrained(tmp / "f32")
            th.write_f32_folder(tiny / f"{arch}.gguf", arch, tmp / "mine")
            ours, theirs = load_file(tmp / "mine" / "model.safetensors"), load_file(tmp / "f32" / "model.safetensors")
            assert sorted(ours) == sorted(theirs), (sorted(set(ours) ^ set(theirs)))
            for name in ours:
                a, b = ours[name], theirs[name]
                if arch in ("gemma2", "gemma3") and name.endswith("norm.weight"):
                    # the GGUF holds fl(1 + w): compare in that convention
                    a, b = a + np.float32(1), b + np.float32(1)
                assert np.array_equal(a, b), f"{arch}: {name} differs from save_pretrained's"
            print(f"{arch}: the GGUF's weights are the seeded model's ({len(ours)} tensors)")

        if arch in CONFIG_ONLY:
            print(f"wrote {d} ({sorted(p.name for p in d.iterdir())})")
            continue
        ref_model = low.to(torch.float32)
        fixture = np.load(tiny / f"{arch}.logits.npz")
        ids = fixture["ids1"]
        with torch.no_grad():
            logits = ref_model(torch.from_numpy(ids.astype(np.int64))[None]).logits[0].numpy()
        np.savez_compressed(out / f"{arch}.logits.npz", ids=ids, logits=logits.astype(np.float32))
        size = sum(p.stat().st_size for p in d.iterdir())
        print(f"wrote {d} ({size} bytes, {sorted(p.name for p in d.iterdir())})")
    if not args.arch or "rope" in args.arch:
        rope_variants(mt, tiny, out)


# RoPE scaling variants of the tiny llama (head_dim 16, theta 10000: the
# wavelengths 6.3 .. 19869). llama3: original context 256, so with
# high_freq_factor 8 the pairs 0-1 keep their frequency, 2-3 are blended and
# 4-7 divided by the factor.
ROPE_VARIANTS = {
    "llama3": {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 4.0, "low_freq_factor": 1.0,
               "high_freq_factor": 8.0, "original_max_position_embeddings": 256},
    "linear": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
}


def rope_variants(mt, tiny, out):
    spec = mt.ARCHS["llama"]
    k = list(mt.ARCHS).index("llama")
    ids = np.load(tiny / "llama.logits.npz")["ids1"]
    arrays = {"ids": ids}
    for name, rp in ROPE_VARIANTS.items():
        gen = torch.Generator().manual_seed(mt.SEED + mt.seed_index("llama", k))
        cfg = mt.make_config("llama", spec)
        cfg._attn_implementation = "eager"
        cfg.rope_parameters = dict(rp)
        model = mt.model_class("llama")(cfg).to(torch.float32).eval()
        mt.randomize(model, "llama", gen)
        base = 1.0 / (rp["rope_theta"] ** (np.arange(0, 16, 2, dtype=np.float64) / 16))
        inv = model.model.rotary_emb.inv_freq.double().numpy()
        assert not np.allclose(inv, base), f"{name}: transformers did not scale the frequencies"
        with torch.no_grad():
            logits = model(torch.from_numpy(ids.astype(np.int64))[None]).logits[0].numpy()
        arrays[f"{name}_logits"] = logits.astype(np.float32)
        arrays[f"{name}_inv_freq"] = inv
        print(f"rope {name}: inv_freq / default {np.round(inv / base, 4)}")
    (out / "rope.json").write_text(json.dumps(ROPE_VARIANTS, indent=2) + "\n")
    np.savez_compressed(out / "rope.npz", **arrays)
    print(f"wrote {out / 'rope.json'}, {out / 'rope.npz'}")


if __name__ == "__main__":
    main()
