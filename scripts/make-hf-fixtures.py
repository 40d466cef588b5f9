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
    tests/fixtures/hf/gpt-oss/  BF16 (the experts as transformers' fused x @ W products)
    tests/fixtures/hf/qwen35/   BF16
    tests/fixtures/hf/gemma4/   BF16 (Gemma4ForCausalLM; gemma4ple with per-layer
    tests/fixtures/hf/gemma4ple/     inputs, gemma4moe with experts: the same)
    tests/fixtures/hf/gemma4moe/
    tests/fixtures/hf/qwen2/    F16, sharded (model-0000N-of-0000M.safetensors
                                + model.safetensors.index.json)
    tests/fixtures/hf/<arch>.logits.npz   ids, logits: transformers in F32 on
                                the folder's weights (rounded to BF16 / F16),
                                the model read back from the folder (its
                                buffers computed in F32)

    tests/fixtures/hf/{gemma2,phi3,qwen3moe,mixtral}/  config and tokenizer
                                files only (save_pretrained's), no weights
    tests/fixtures/hf/spm-{legacy,metaspace,gemma}/  SentencePiece-style
                                tokenizer.json (BPE with byte_fallback; spaces
                                as "\u2581" by Llama 2's legacy normalizer, by
                                a Metaspace pre-tokenizer, by Gemma's Replace)
                                of one vocabulary trained here, with
                                tokenizer_config.json (no model: the test puts
                                them into llama-spm's folder); spm-cases.json:
                                tricky strings and the `tokenizers` library's ids
    tests/fixtures/hf/llama-spm/   the tiny llama (BF16) with the spm-legacy
                                tokenizer and a vocabulary of its size;
                                llama-spm.json: transformers' greedy ids and
                                text from a prompt
    tests/fixtures/hf/rope.json, rope.npz   RoPE scaling of the tiny llama
                                (llama3: Llama 3.1's; linear; yarn): each variant's
                                rope_parameters, transformers' logits in F32
                                on the F32 weights and its inv_freq

F32 folders are not committed: the test writes them from the GGUF files
(tests/e2e/hf_folder.py: write_f32_folder, the inverse of llama.cpp's
conventions). This script checks that folder equals what save_pretrained
writes in F32, tensor for tensor, so the test's folder is a real one; and
that hf_folder.fuse_experts of the MoE folders (qwen3moe, mixtral,
qwen35moe) equals what save_pretrained writes with save_original_format=False
(transformers' fused 3-D experts), so the test's fused folders are real too.

Needs the reference venv (torch, transformers, tokenizers); see docs/parity.md.
Usage: make-hf-fixtures.py [--out tests/fixtures/hf] [--arch ARCH|rope|spm|fused ...]
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
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

import gguf

ROOT = pathlib.Path(__file__).resolve().parents[1]
DTYPES = {"llama": torch.bfloat16, "gemma3": torch.bfloat16, "qwen3": torch.bfloat16, "qwen2": torch.float16,
          "gpt-oss": torch.bfloat16, "qwen35": torch.bfloat16, "gemma4": torch.bfloat16,
          "gemma4ple": torch.bfloat16, "gemma4moe": torch.bfloat16}
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
                if (arch in ("gemma2", "gemma3") or arch == "qwen35" and "linear_attn" not in name) \
                        and name.endswith("norm.weight"):
                    # the GGUF holds fl(1 + w): compare in that convention
                    a, b = a + np.float32(1), b + np.float32(1)
                if name.endswith("A_log"):
                    # the GGUF holds -exp(A_log) (numpy's float32 exp): within
                    # its rounding of save_pretrained's
                    a, b = (-np.exp(x.astype(np.float64)) for x in (a, b))
                    assert np.allclose(a, b, rtol=2.5e-7, atol=0), f"{arch}: {name} differs from save_pretrained's"
                    continue
                assert np.array_equal(a, b), f"{arch}: {name} differs from save_pretrained's"
            print(f"{arch}: the GGUF's weights are the seeded model's ({len(ours)} tensors)")

        if arch in CONFIG_ONLY:
            print(f"wrote {d} ({sorted(p.name for p in d.iterdir())})")
            continue
        # the folder read back in F32: its buffers (RoPE frequencies,
        # embedding scales) computed in F32, not rounded to BF16 / F16 with
        # the weights as low.to() rounds them
        ref_model = type(model).from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
        fixture = np.load(tiny / f"{arch}.logits.npz")
        ids = fixture["ids1"]
        with torch.no_grad():
            logits = ref_model(torch.from_numpy(ids.astype(np.int64))[None]).logits[0].numpy()
        np.savez_compressed(out / f"{arch}.logits.npz", ids=ids, logits=logits.astype(np.float32))
        size = sum(p.stat().st_size for p in d.iterdir())
        print(f"wrote {d} ({size} bytes, {sorted(p.name for p in d.iterdir())})")
    if not args.arch or "gpt-oss" in args.arch:
        mxfp4_check(th)
    if not args.arch or "fused" in args.arch:
        fused_check(mt, th)
    if not args.arch or "rope" in args.arch:
        rope_variants(mt, tiny, out)
    if not args.arch or "spm" in args.arch:
        spm_fixtures(mt, out)


def mxfp4_check(th):
    """hf_folder.to_mxfp4 (the MXFP4 gpt-oss folder of tests/e2e/test_hf.py)
    writes blocks and scales that transformers' own dequantizer reads as the
    values the test expects (x @ W's layout: the rows transposed)."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors
    rng = np.random.default_rng(SEED_MXFP4)
    w = (rng.standard_normal((3, 40, 64)) * np.exp2(rng.integers(-3, 3, (3, 40, 1)))).astype(np.float32)
    blocks, scales, values = th.to_mxfp4(w)
    got = convert_moe_packed_tensors(torch.from_numpy(blocks), torch.from_numpy(scales), dtype=torch.float32)
    assert np.array_equal(got.numpy(), values.transpose(0, 2, 1)), "MXFP4 layout differs from transformers'"
    print("mxfp4: transformers reads hf_folder.to_mxfp4's blocks as its values")


SEED_MXFP4 = 20251205


def fused_check(mt, th):
    """hf_folder.fuse_experts (the fused-expert folders of tests/e2e/test_hf.py)
    of each MoE family's per-expert folder equals save_pretrained's with
    save_original_format=False (transformers' own fused layout: names,
    shapes, values), and transformers reads that folder back to the logits
    it reads the per-expert one to (within 1e-6 of the largest)."""
    for arch in ("qwen3moe", "mixtral", "qwen35moe"):
        k = list(mt.ARCHS).index(arch)
        gen = torch.Generator().manual_seed(mt.SEED + mt.seed_index(arch, k))
        cfg = mt.make_config(arch, mt.ARCHS[arch])
        cfg._attn_implementation = "eager"
        model = mt.model_class(arch)(cfg).to(torch.float32).eval()
        mt.randomize(model, arch, gen)
        with tempfile.TemporaryDirectory() as tmp:
            tmp = pathlib.Path(tmp)
            model.save_pretrained(tmp / "per-expert")
            model.save_pretrained(tmp / "fused", save_original_format=False)
            th.fuse_experts(tmp / "per-expert", tmp / "mine")
            ours, theirs = load_file(tmp / "mine" / "model.safetensors"), load_file(tmp / "fused" / "model.safetensors")
            assert sorted(ours) == sorted(theirs), sorted(set(ours) ^ set(theirs))
            for name in ours:
                assert ours[name].shape == theirs[name].shape and np.array_equal(ours[name], theirs[name]), \
                    f"{arch}: {name} differs from save_pretrained's fused layout"
            ids = torch.from_numpy(np.load(ROOT / "tests" / "fixtures" / "tiny" / f"{arch}.logits.npz")["ids1"]
                                   .astype(np.int64))[None]
            a, b = (type(model).from_pretrained(tmp / d, dtype=torch.float32, attn_implementation="eager",
                                                experts_implementation="eager").eval()
                    for d in ("fused", "per-expert"))
            with torch.no_grad():
                a, b = a(ids).logits, b(ids).logits
            # (Mixtral's differ in the last bits: 4e-7 of the largest)
            err = float((a - b).abs().max() / b.abs().max())
            assert err < 1e-6, f"{arch}: the fused folder reads back differently (rel {err:.1e})"
            fused = sorted(n for n in ours if ".experts." in n and n.startswith("model.layers.0."))
            print(f"{arch}: fuse_experts writes save_pretrained's fused layout "
                  f"({', '.join(f'{n} {list(ours[n].shape)}' for n in fused)})")


# RoPE scaling variants of the tiny llama (head_dim 16, theta 10000: the
# wavelengths 6.3 .. 19869). llama3: original context 256, so with
# high_freq_factor 8 the pairs 0-1 keep their frequency, 2-3 are blended and
# 4-7 divided by the factor.
ROPE_VARIANTS = {
    "llama3": {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 4.0, "low_freq_factor": 1.0,
               "high_freq_factor": 8.0, "original_max_position_embeddings": 256},
    "linear": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
    # YaRN over an original context of 32 (the ramp over the pairs 0-2),
    # beta_fast 16 (not the default 32) so that its key is written and read
    "yarn": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 32,
             "beta_fast": 16.0, "beta_slow": 1.0, "truncate": True},
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


# ---- SentencePiece-style tokenizer.json ----

SPM_CORPUS = """The quick brown fox jumps over the lazy dog. Hello world, hello there!
A tokenizer turns text into pieces; the pieces into numbers; the numbers back into text.
Spaces matter: "  two spaces", tabs\tand newlines\n, and    runs of them.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 123 2024 3.14159 1,000,000.
Code: def main(): return [x * 2 for x in range(10)]  # comment
Accents: café, naïve, résumé, über, señor, façade. Greek: αβγ δέλτα.
""" * 3
SPM_CASES = [
    "Hello world", "hello", " Hello world", "  two leading spaces", "trailing space ", "a  b   c    d",
    "tabs\tand\nnewlines\n\n", "3.14159 and 1,000,000 and 2024", "café naïve über", "日本語のテキスト",
    "emoji 🙂 and ✓", "ẞ ß Ω ω ж", "<s>after bos", "text</s>more text", "mixed <s> in the middle",
    "\u2581literal marks\u2581", "x", "  ", "def main(): return [x * 2 for x in range(10)]",
]
SPM_STYLES = ("legacy", "metaspace", "gemma")


def spm_vocab():
    """A vocabulary as SentencePiece BPE files have it: <unk> <s> </s>, the
    256 <0xNN> byte pieces, then the characters and merged pieces learned
    from SPM_CORPUS; the merges every split of a piece into two pieces,
    ranked piece by piece (transformers' generate_merges, as its converters
    write Llama's and Gemma's tokenizer.json)."""
    from transformers.tokenization_utils_base import generate_merges
    t = Tokenizer(models.BPE(unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    t.train_from_iterator([SPM_CORPUS], trainers.BpeTrainer(vocab_size=320, show_progress=False, special_tokens=[]))
    learned = sorted(t.get_vocab().items(), key=lambda kv: kv[1])
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + [w for w, _ in learned]
    vocab = {w: i for i, w in enumerate(tokens)}
    specials = {"<unk>", "<s>", "</s>"} | {w for w in tokens if w.startswith("<0x")}
    return vocab, generate_merges(vocab, skip_tokens=specials)


def spm_tokenizer(vocab, merges, style):
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    dec = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    if style == "legacy":  # Llama 2, Mistral v0.1: transformers' LlamaConverter, legacy
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        dec.append(decoders.Strip(" ", 1, 0))
    elif style == "metaspace":  # transformers' LlamaTokenizer
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="first", split=False)
        dec.append(decoders.Strip(" ", 1, 0))
    else:  # Gemma: no space prefix
        tok.normalizer = normalizers.Replace(" ", "\u2581")
        tok.pre_tokenizer = pre_tokenizers.Split(" ", "merged_with_previous")
    tok.decoder = decoders.Sequence(dec)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in ("<unk>", "<s>", "</s>")])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", 1)])
    return tok


def save_spm_folder(tok, d):
    d.mkdir(parents=True, exist_ok=True)
    tok.save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps(
        {"add_bos_token": True, "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
         "unk_token": "<unk>", "tokenizer_class": "LlamaTokenizer"}, indent=2) + "\n")


def spm_fixtures(mt, out):
    vocab, merges = spm_vocab()
    cases = {}
    for style in SPM_STYLES:
        tok = spm_tokenizer(vocab, merges, style)
        d = out / f"spm-{style}"
        shutil.rmtree(d, ignore_errors=True)
        save_spm_folder(tok, d)
        cases[style] = [[text, tok.encode(text).ids] for text in SPM_CASES]
        fell_back = sum(any(3 <= i < 259 for i in ids) for _, ids in cases[style])
        print(f"spm-{style}: {len(vocab)} tokens, {len(merges)} merges; {fell_back} cases use byte fallback")
    (out / "spm-cases.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n")

    # the tiny llama with the legacy tokenizer: greedy text from transformers
    spec = mt.ARCHS["llama"]
    gen = torch.Generator().manual_seed(mt.SEED + 100)
    cfg = mt.make_config("llama", spec)
    cfg.vocab_size, cfg.bos_token_id, cfg.eos_token_id = len(vocab), 1, 2
    cfg._attn_implementation = "eager"
    model = mt.model_class("llama")(cfg).to(torch.float32).eval()
    mt.randomize(model, "llama", gen)
    with torch.no_grad():  # no byte pieces in the greedy text: it stays readable
        model.lm_head.weight[3:259] = 0
    d = out / "llama-spm"
    shutil.rmtree(d, ignore_errors=True)
    low = model.to(torch.bfloat16)
    low.save_pretrained(d)
    tok = spm_tokenizer(vocab, merges, "legacy")
    save_spm_folder(tok, d)
    ref = type(model).from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()  # F32 buffers
    prompt = "The quick brown fox"
    ids = tok.encode(prompt).ids
    with torch.no_grad():
        outp = ref.generate(torch.tensor([ids]), max_new_tokens=12, do_sample=False, eos_token_id=None,
                            pad_token_id=0)[0, len(ids):].tolist()
        logits = ref(torch.tensor([ids])).logits[0].numpy()
    text = tok.decode(outp, skip_special_tokens=False)
    (out / "llama-spm.json").write_text(json.dumps({"prompt": prompt, "prompt_ids": ids, "ids": outp, "text": text,
                                                    "last_logits": logits[-1].tolist()}, ensure_ascii=False) + "\n")
    size = sum(p.stat().st_size for p in d.iterdir())
    print(f"wrote {d} ({size} bytes): greedy {outp} {text!r}")


if __name__ == "__main__":
    main()
