#!/usr/bin/env python3
"""make-logit-fixtures.py: llama.cpp's logits and greedy continuations on the
real models, for tests/e2e/test_logit_parity.py.

For each model (SmolLM2-135M-Instruct Q4_1, gemma-3-270m Q4_K_M) this runs
llama.cpp (through llama-cpp-python, on the same GGUF file pasada loads) over
five varied prompts and writes tests/fixtures/logits/<model>.npz with

    prompt_ids, prompt_offsets   the prompts' token ids (llama.cpp's tokenizer,
                                 BOS added where the model asks for it), concatenated
    top_offsets, top_ids,        per prompt position p, entries top_offsets[p] to
    top_logprobs                 top_offsets[p+1]: llama.cpp's most likely tokens, in
                                 order, and their log-probabilities (log-softmax over the
                                 full vocabulary); as many as it takes to hold MASS of the
                                 probability, at least K_MIN and at most K_MAX
    rest_logprob                 per position: log of the probability outside those tokens
    argmax                       per position: llama.cpp's top token
    greedy_ids, greedy_gap       per prompt: 64 greedy tokens (temperature 0, no stop
                                 at EOS) and llama.cpp's top-1 minus top-2 logit at
                                 each step
    sibling_<s>_kl, _argmax,     the same runs under the SIBLINGS settings (F32 KV cache;
    _margin, _greedy             flash attention): per position their KL to the reference
                                 (measured as the test measures pasada), argmax, and logit
                                 margin between the reference's top two tokens; greedy ids
    exact_top_ids,               per position: the 128 top tokens of the model's exact math
    exact_top_logits,            (weights dequantized, activations in float64, no 8-bit
    exact_logsumexp              activation quantization; the numpy forward pass of
                                 tests/e2e/test_arch_parity.py), their logits, and the
                                 log-sum-exp of all logits (the log-softmax normaliser)
    model_sha256, model_bytes, llama_cpp_version, mass, k_min, k_max, prompts (texts)

Full logits are not kept: gemma's vocabulary has 262144 tokens. A fixed top-K
would not do either: these small models' distributions have long tails (the
top 128 tokens hold only 94-95% of the probability on average), so the set is
sized per position to hold MASS of it (mean about 0.99 with the cap).
Needs the heavy reference venv (llama-cpp-python); see docs/parity.md.
Usage: make-logit-fixtures.py [--models DIR] [--out tests/fixtures/logits]
"""
import argparse
import hashlib
import importlib.util
import os
import pathlib
import sys

import numpy as np
import llama_cpp

ROOT = pathlib.Path(__file__).resolve().parents[1]
N_GREEDY = 64
N_THREADS = 2
MASS, K_MIN, K_MAX = 0.99, 128, 4096
K_EXACT = 128
GGML_TYPE_F32 = 0
# The reference: llama.cpp's defaults on CPU (F16 KV cache), flash attention off.
REFERENCE = dict(flash_attn=False)
# Other settings under which llama.cpp is just as correct; how far they move
# its own logits is the noise floor the test holds pasada's distance against.
SIBLINGS = {
    "f32_kv": dict(flash_attn=False, type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32),
    "flash_attn": dict(flash_attn=True),
}

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}

CHAT = {
    "smollm2": ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by "
                "Hugging Face<|im_end|>\n<|im_start|>user\nGive me three tips for staying "
                "focused while studying.<|im_end|>\n<|im_start|>assistant\n"),
    "gemma3": ("<start_of_turn>user\nYou are a patient tutor. Give me three tips for staying "
               "focused while studying.<end_of_turn>\n<start_of_turn>model\n"),
}

# Five kinds of text: prose, code, a chat turn with the model's special tokens,
# a number pattern, and mixed-language text with punctuation and CJK.
PROMPTS = [
    "The printing press, introduced in Europe by Johannes Gutenberg around 1440, changed "
    "how knowledge spread. Within a few decades",
    "def binary_search(items, target):\n    lo, hi = 0, len(items) - 1\n    while lo <= hi:\n"
    "        mid = (lo + hi) // 2\n",
    None,  # the chat turn, per model
    "Fibonacci numbers: 1, 1, 2, 3, 5, 8, 13, 21, 34, 55,",
    "Le petit prince demanda : « S'il vous plaît… dessine-moi un mouton ! » "
    "En japonais, on dit 羊 (hitsuji). In English, the word is",
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def log_softmax(x):
    x = np.asarray(x, np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def no_extra_buffers():
    """Loads models without ggml's extra CPU buffer types (AMX, weight repacking).
    The AMX path of the build faults with SIGILL where the CPU advertises AMX but
    the (virtual) machine does not enable its tile state; the plain kernels
    compute the same quantized dot products."""
    default = llama_cpp.llama_cpp.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = False
        return p

    llama_cpp.llama_cpp.llama_model_default_params = params


def top_set(lp):
    """For one position's log-probs: the most likely tokens, in order, until
    they hold MASS of the probability (K_MIN..K_MAX of them), their log-probs,
    and the log of the probability left outside them."""
    order = np.argsort(-lp, kind="stable")
    cum = np.cumsum(np.exp(lp[order]))
    k = int(np.clip(np.searchsorted(cum, MASS) + 1, K_MIN, K_MAX))
    rest = lp[order[k:]]
    m = rest.max()
    return order[:k], lp[order[:k]], m + np.log(np.exp(rest - m).sum())


def run_llama_cpp(path, prompts, **config):
    """llama.cpp under one configuration: per prompt, the logits of every
    prompt position (one batch) and the greedy continuation with llama.cpp's
    top-1 minus top-2 logit at each step."""
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_batch=256, n_ubatch=256,
                          n_threads=N_THREADS, n_threads_batch=N_THREADS, logits_all=True,
                          verbose=False, **config)
    results = []
    for p in prompts:
        llm.reset()
        llm.eval(p)
        logits = np.array(llm.scores[: len(p)], dtype=np.float32)
        # Greedy: the prompt was decoded in one batch; then one token per step.
        gen, gaps = [], []
        last = logits[-1]
        for step in range(N_GREEDY):
            tok = int(np.argmax(last))
            top2 = np.sort(last)[-2:]
            gen.append(tok)
            gaps.append(float(top2[1] - top2[0]))
            if step == N_GREEDY - 1:
                break
            llm.eval([tok])
            last = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        results.append((logits, gen, gaps))
    del llm
    return results


def partition_kl(ref_top_ids, ref_top_lp, ref_rest, lq):
    """KL(ref || q) over {each of ref's top tokens} + {the rest}; lq: q's full log-probs.
    The same measure as tests/e2e/test_logit_parity.py uses."""
    mask = np.ones(lq.shape, dtype=bool)
    mask[ref_top_ids] = False
    rest = lq[mask]
    m = rest.max()
    q_rest = m + np.log(np.exp(rest - m).sum())
    kl = np.sum(np.exp(ref_top_lp) * (ref_top_lp - lq[ref_top_ids]))
    return float(kl + np.exp(ref_rest) * (ref_rest - q_rest))


def exact_reference():
    """tests/e2e/test_arch_parity.py as a module: its numpy forward pass."""
    path = ROOT / "tests" / "e2e" / "test_arch_parity.py"
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("test_arch_parity", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def first_divergence(a, b):
    d = [j for j in range(len(a)) if a[j] != b[j]]
    return d[0] if d else None


def make(name, path, out):
    tok = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    texts = [CHAT[name] if t is None else t for t in PROMPTS]
    prompts = [tok.tokenize(t.encode("utf-8"), add_bos=True, special=True) for t in texts]
    for t, p in zip(texts, prompts):
        assert 20 <= len(p) <= 60, f"{name}: prompt of {len(p)} tokens: {t!r}"

    ref = run_llama_cpp(path, prompts, **REFERENCE)
    run_logits = [logits for logits, _, _ in ref]
    ids, offsets = [], [0]
    top_offsets, top_ids, top_lp, rest_lp, amax = [0], [], [], [], []
    for p, (logits, gen, _) in zip(prompts, ref):
        for row in log_softmax(logits):
            tid, tlp, rest = top_set(row)
            top_ids.append(tid.astype(np.int32))
            top_lp.append(tlp.astype(np.float32))
            rest_lp.append(rest)
            top_offsets.append(top_offsets[-1] + len(tid))
        ids += p
        offsets.append(len(ids))
        amax.append(np.argmax(logits, axis=-1).astype(np.int32))
        print(f"{name}: {len(p):2d} tokens; greedy: "
              f"{tok.detokenize(gen).decode('utf-8', 'replace')[:70]!r}")

    arrays = dict(
        prompt_ids=np.array(ids, np.int32), prompt_offsets=np.array(offsets, np.int32),
        top_offsets=np.array(top_offsets, np.int64), top_ids=np.concatenate(top_ids),
        top_logprobs=np.concatenate(top_lp), rest_logprob=np.array(rest_lp, np.float32),
        argmax=np.concatenate(amax),
        greedy_ids=np.array([g for _, g, _ in ref], np.int32),
        greedy_gap=np.array([gp for _, _, gp in ref], np.float32),
        model_file=np.array(path.name), model_sha256=np.array(sha256(path)),
        model_bytes=np.array(os.path.getsize(path), np.int64),
        llama_cpp_version=np.array(llama_cpp.__version__), mass=np.array(MASS),
        k_min=np.array(K_MIN), k_max=np.array(K_MAX), prompts=np.array(texts),
        siblings=np.array(list(SIBLINGS)))

    # The noise floor: llama.cpp against itself under other correct settings,
    # measured exactly as the test measures pasada.
    for sib, config in SIBLINGS.items():
        res = run_llama_cpp(path, prompts, **config)
        kl, sib_amax, margin = [], [], []
        for i, (logits, _, _) in enumerate(res):
            for j, row in enumerate(log_softmax(logits)):
                k = offsets[i] + j
                e = slice(top_offsets[k], top_offsets[k + 1])
                kl.append(partition_kl(arrays["top_ids"][e], arrays["top_logprobs"][e].astype(np.float64),
                                       rest_lp[k], row))
                # The sibling's logit margin between the reference's top two tokens.
                t1, t2 = arrays["top_ids"][top_offsets[k]], arrays["top_ids"][top_offsets[k] + 1]
                margin.append(float(logits[j][t1]) - float(logits[j][t2]))
            sib_amax.append(np.argmax(logits, axis=-1).astype(np.int32))
        kl = np.array(kl)
        sib_amax = np.concatenate(sib_amax)
        arrays[f"sibling_{sib}_kl"] = kl.astype(np.float32)
        arrays[f"sibling_{sib}_argmax"] = sib_amax
        arrays[f"sibling_{sib}_margin"] = np.array(margin, np.float32)
        arrays[f"sibling_{sib}_greedy"] = np.array([g for _, g, _ in res], np.int32)
        mism = np.nonzero(sib_amax != arrays["argmax"])[0]
        gaps = [float(arrays["top_logprobs"][top_offsets[k]] - arrays["top_logprobs"][top_offsets[k] + 1])
                for k in mism]
        div = []
        for i, (_, g, _) in enumerate(res):
            d = first_divergence(g, arrays["greedy_ids"][i])
            div.append("=" if d is None else f"{d}@{arrays['greedy_gap'][i][d]:.3f}")
        ref_margin = np.array([arrays["top_logprobs"][top_offsets[k]] - arrays["top_logprobs"][top_offsets[k] + 1]
                               for k in range(len(kl))], np.float64)
        shift = np.abs(np.array(margin) - ref_margin)
        print(f"  sibling {sib}: top-2 margin moves by median {np.median(shift):.3f}, max {shift.max():.3f}")
        print(f"  sibling {sib}: KL mean {kl.mean():.2e} median {np.median(kl):.2e} max {kl.max():.2e}; "
              f"top-1 mismatches {len(mism)}/{len(kl)} at gaps {[round(x, 3) for x in gaps]}; "
              f"greedy divergence (step@gap) {div}")

    # The model's exact math: weights dequantized, activations in float64 (no
    # 8-bit activation quantization), by the numpy reference the tiny-model
    # tests validate against transformers. pasada's reference path must match it.
    exact = exact_reference()
    model = exact.load_reference_model(path)
    ex_ids, ex_logits, ex_lse = [], [], []
    for p in prompts:
        logits = exact.reference_forward(model, p)
        order = np.argsort(-logits, axis=-1, kind="stable")[:, :K_EXACT]
        ex_ids.append(order.astype(np.int32))
        ex_logits.append(np.take_along_axis(logits, order, axis=-1).astype(np.float32))
        m = logits.max(axis=-1, keepdims=True)
        ex_lse.append((m + np.log(np.exp(logits - m).sum(axis=-1, keepdims=True)))[:, 0])
        ref_lp = log_softmax(run_logits[len(ex_ids) - 1])
        kl_exact = (np.exp(ref_lp) * (ref_lp - (logits - ex_lse[-1][:, None]))).sum(axis=-1)
        print(f"  exact reference, prompt {len(ex_ids) - 1}: KL(llama.cpp || exact) mean {kl_exact.mean():.2e}")
    del model
    arrays.update(exact_top_ids=np.concatenate(ex_ids), exact_top_logits=np.concatenate(ex_logits),
                  exact_logsumexp=np.concatenate(ex_lse).astype(np.float64))

    dest = out / f"{name}.npz"
    np.savez_compressed(dest, **arrays)
    captured = 1.0 - np.exp(arrays["rest_logprob"].astype(np.float64))
    sizes = np.diff(arrays["top_offsets"])
    print(f"wrote {dest} ({dest.stat().st_size} bytes): {len(ids)} positions, {sizes.sum()} top "
          f"entries (median {int(np.median(sizes))} per position), captured mass mean "
          f"{captured.mean():.5f}, min {captured.min():.5f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=os.path.expanduser(
        os.environ.get("PASADA_MODELS_DIR", "~/.cache/pasada/models")))
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "logits"))
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    no_extra_buffers()
    for name, file in MODELS.items():
        make(name, pathlib.Path(args.models) / file, out)


if __name__ == "__main__":
    main()
