#!/usr/bin/env python3
"""make-perplexity-fixtures.py: llama.cpp's perplexity on the evaluation text,
window by window, for tests/e2e/test_tools_ppl.py.

The windows are those of llama.cpp's perplexity tool (examples/perplexity),
which `pasada perplexity` follows: the text is tokenized once by llama.cpp
(add_special: BOS when the model's add_bos flag says so; special-token text
stays text), cut into non-overlapping windows of N_CTX tokens, each window
evaluated from an empty cache with its first token replaced by BOS when the
model adds one, and the logits at positions N_CTX/2 .. N_CTX-2 score the
tokens after them (N_CTX/2 - 1 tokens per window). This script runs llama.cpp
(llama-cpp-python) on those windows itself, in one batch per window, and
writes tests/fixtures/perplexity/<model>.json with:

    window_nll        per window: the sum of the scored tokens' negative
                      log-likelihoods (nats; log-softmax in float64)
    ppl               {"n windows": exp(mean NLL over the first n windows)}
    n_text_tokens, tokens_sha256 (of the whole token list as int32 LE),
    first_tokens      (the tokens of the first windows)
    pasada_tokens_identical, first_difference: whether `pasada tokenize`
                      gives the same tokens for the whole text (it must: the
                      comparison is only meaningful on the same tokens)
    model and text names, sizes and sha256, llama_cpp_version, n_ctx

Needs the heavy reference venv (llama-cpp-python) and a build of pasada (for
the tokenization check; PASADA_BUILD_DIR, default build/). The text comes
from scripts/fetch-eval-text. llama.cpp's AMX and repacked-weight buffers are
turned off (use_extra_bufts = false): this machine's kernel does not let
processes use AMX tiles (SIGILL), and the plain CPU kernels are the reference
anyway.
Usage: make-perplexity-fixtures.py [--windows 16] [--models smollm2]
"""
import argparse
import hashlib
import json
import os
import pathlib
import subprocess

import numpy as np
import llama_cpp
import llama_cpp.llama_cpp as llama_low

ROOT = pathlib.Path(__file__).resolve().parents[1]
N_CTX = 512
N_THREADS = 2
MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}
TEXT = "pride-and-prejudice.txt"

_default_params = llama_low.llama_model_default_params


def _no_extra_bufts():
    p = _default_params()
    p.use_extra_bufts = False
    return p


llama_low.llama_model_default_params = _no_extra_bufts


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pasada_tokens(model_path, text_path, add_bos, bos):
    exe = pathlib.Path(os.environ.get("PASADA_BUILD_DIR", ROOT / "build")) / "pasada"
    out = subprocess.run([str(exe), "tokenize", "--raw", "-m", str(model_path), "-f", str(text_path)],
                         capture_output=True, text=True, check=True).stdout
    ids = [int(t) for t in out.split()]
    return ([bos] if add_bos else []) + ids


def log_softmax(x):
    x = np.asarray(x, np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def make(name, model_path, text_path, n_windows, out_dir):
    llm = llama_cpp.Llama(model_path=str(model_path), n_ctx=N_CTX, n_batch=N_CTX, n_ubatch=N_CTX,
                          n_threads=N_THREADS, n_threads_batch=N_THREADS, logits_all=True,
                          flash_attn=False, verbose=False)
    text = text_path.read_bytes()
    add_bos = bool(llama_low.llama_vocab_get_add_bos(llm._model.vocab))
    bos = int(llm.token_bos())
    tokens = llm.tokenize(text, add_bos=True, special=False)  # add_special: as the model says
    n_max = len(tokens) // N_CTX
    n_windows = min(n_windows, n_max)
    mine = pasada_tokens(model_path, text_path, add_bos, bos)
    same = mine == tokens
    first_diff = None
    if not same:
        first_diff = next((i for i, (a, b) in enumerate(zip(mine, tokens)) if a != b), min(len(mine), len(tokens)))
    print(f"{name}: {len(tokens)} tokens (add_bos {add_bos}); pasada's tokenization identical: {same}"
          + ("" if same else f" (first difference at token {first_diff}, pasada {len(mine)} tokens)"))

    first = N_CTX // 2
    window_nll = []
    for w in range(n_windows):
        window = list(tokens[w * N_CTX:(w + 1) * N_CTX])
        if add_bos:
            window[0] = bos
        llm.reset()
        llm.eval(window)
        logits = np.array(llm.scores[first:N_CTX - 1], dtype=np.float32)
        lp = log_softmax(logits)
        nxt = np.array(tokens[w * N_CTX + first + 1:(w + 1) * N_CTX], dtype=np.int64)
        nll = -lp[np.arange(len(nxt)), nxt]
        window_nll.append(float(nll.sum()))
        n = (w + 1) * (N_CTX - first - 1)
        print(f"  [{w + 1}/{n_windows}] window nll {nll.mean():.4f}, running ppl {np.exp(sum(window_nll) / n):.4f}",
              flush=True)
    per = N_CTX - first - 1
    ppl = {str(k): float(np.exp(sum(window_nll[:k]) / (k * per)))
           for k in sorted({1, 2, 4, 8, 16, 32, n_windows}) if k <= n_windows}
    data = {
        "model": model_path.name,
        "model_bytes": model_path.stat().st_size,
        "model_sha256": sha256_file(model_path),
        "text": text_path.name,
        "text_bytes": len(text),
        "text_sha256": hashlib.sha256(text).hexdigest(),
        "n_ctx": N_CTX,
        "add_bos": add_bos,
        "n_text_tokens": len(tokens),
        "tokens_sha256": hashlib.sha256(np.asarray(tokens, "<i4").tobytes()).hexdigest(),
        "pasada_tokens_identical": same,
        "first_difference": first_diff,
        "n_windows": n_windows,
        "n_scored_per_window": per,
        "window_nll": window_nll,
        "ppl": ppl,
        "first_tokens": [int(t) for t in tokens[:n_windows * N_CTX]],
        "llama_cpp_version": llama_cpp.__version__,
        "method": "llama.cpp perplexity: non-overlapping windows, second half scored, BOS replaces each "
                  "window's first token when the model adds BOS",
    }
    out = out_dir / f"{name}.json"
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {out}: ppl {ppl}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.environ.get("PASADA_MODELS_DIR", "~/.cache/pasada/models"))
    ap.add_argument("--text", default=str(pathlib.Path(os.environ.get("PASADA_CACHE", "~/.cache/pasada")) / "eval" / TEXT))
    ap.add_argument("--windows", type=int, default=16)
    ap.add_argument("--only", nargs="*", default=["smollm2"], choices=list(MODELS))
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "perplexity"))
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    text = pathlib.Path(args.text).expanduser()
    for name in args.only:
        make(name, pathlib.Path(args.models).expanduser() / MODELS[name], text, args.windows, out)


if __name__ == "__main__":
    main()
