#!/usr/bin/env python3
"""make-quantize-fixtures.py: pasada's quantized files, read by llama.cpp, for
tests/e2e/test_tools_quantize.py.

For each output type, this quantizes SmolLM2-135M-Instruct (Q4_1 + a Q8_0
embedding: every matrix is dequantized, then quantized again) with
`pasada quantize`, then loads the file in llama.cpp (llama-cpp-python) and
runs two prompts (prose and code). tests/fixtures/quantize/smollm2.npz keeps,
per type:

    <T>_sha256, <T>_bytes   the file pasada wrote (the test quantizes again and
                            asserts the same sha256: the file it checks is the
                            file llama.cpp read)
    <T>_top_offsets, <T>_top_ids (uint16), <T>_top_logprobs, <T>_rest_logprob,
    <T>_argmax              llama.cpp's log-probabilities at every prompt
                            position: its most likely tokens, in order, until
                            they hold MASS of the probability (K_MIN..K_MAX of
                            them), and the log of the probability left outside
                            them (the bucket the test's partition KL uses, as
                            tests/e2e/test_logit_parity.py does)
    <T>_types               the tensor types llama.cpp's reader (the gguf
                            package) sees, "name:type" per tensor
and prompt_ids / prompt_offsets (llama.cpp's tokens), the source model's
sha256, llama_cpp_version, mass, k_min, k_max.

It also runs pasada (pasada_eval) on each file and prints the agreement the
test will check. Needs the heavy reference venv and a build of pasada
(PASADA_BUILD_DIR, default build/). llama.cpp's AMX / repacked-weight buffers
are off (use_extra_bufts = false): this machine's kernel refuses AMX tiles.
Usage: make-quantize-fixtures.py [--types Q8_0 Q4_K_M ...] [--keep]
(--keep: the other types' entries of an existing fixture stay as they are,
and the named ones are made again or added.)
"""
import argparse
import hashlib
import os
import pathlib
import subprocess
import tempfile

import numpy as np
import gguf
import llama_cpp
import llama_cpp.llama_cpp as llama_low

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("PASADA_BUILD_DIR", ROOT / "build"))
SOURCE = "SmolLM2-135M-Instruct.Q4_1.gguf"
TYPES = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M", "Q5_K_M", "Q3_K", "Q2_K", "IQ4_XS",
         "IQ4_NL", "MXFP4"]
N_THREADS = 2
MASS, K_MIN, K_MAX = 0.99, 64, 4096
PROMPTS = [
    "The printing press, introduced in Europe by Johannes Gutenberg around 1440, changed "
    "how knowledge spread. Within a few decades",
    "def binary_search(items, target):\n    lo, hi = 0, len(items) - 1\n    while lo <= hi:\n"
    "        mid = (lo + hi) // 2\n",
]

_default_params = llama_low.llama_model_default_params


def _no_extra_bufts():
    p = _default_params()
    p.use_extra_bufts = False
    return p


llama_low.llama_model_default_params = _no_extra_bufts


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


def top_set(lp):
    order = np.argsort(-lp, kind="stable")
    cum = np.cumsum(np.exp(lp[order]))
    k = int(np.clip(np.searchsorted(cum, MASS) + 1, K_MIN, K_MAX))
    rest = lp[order[k:]]
    m = rest.max()
    return order[:k], lp[order[:k]], m + np.log(np.exp(rest - m).sum())


def partition_kl(ref_top, ref_rest, q_lp, top_ids):
    p_top = np.exp(ref_top.astype(np.float64))
    q_top = q_lp[top_ids]
    mask = np.ones_like(q_lp, dtype=bool)
    mask[top_ids] = False
    rest = q_lp[mask]
    m = rest.max()
    q_rest = m + np.log(np.exp(rest - m).sum())
    return float(np.sum(p_top * (ref_top - q_top)) + np.exp(ref_rest) * (ref_rest - q_rest))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.environ.get("PASADA_MODELS_DIR", "~/.cache/pasada/models"))
    ap.add_argument("--types", nargs="*", default=TYPES)
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "quantize" / "smollm2.npz"))
    ap.add_argument("--keep", action="store_true", help="keep the other types of an existing fixture")
    args = ap.parse_args()
    src = pathlib.Path(args.models).expanduser() / SOURCE
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    data = {"source_file": SOURCE, "source_sha256": sha256(src), "source_bytes": src.stat().st_size,
            "types": np.array(args.types), "llama_cpp_version": llama_cpp.__version__,
            "mass": MASS, "k_min": K_MIN, "k_max": K_MAX, "prompts": np.array(PROMPTS)}
    if args.keep and out.exists():
        old = dict(np.load(out))
        if str(old["source_sha256"]) != data["source_sha256"] or str(old["llama_cpp_version"]) != llama_cpp.__version__:
            raise SystemExit("--keep: the fixture was made from another source file or llama.cpp version")
        kept = [str(t) for t in old["types"] if str(t) not in args.types]
        for k, v in old.items():
            if any(k.startswith(f"{t}_") for t in kept) or k in ("prompt_ids", "prompt_offsets"):
                data[k] = v
        data["types"] = np.array([t for t in TYPES if t in kept or t in args.types] +
                                 [t for t in kept + args.types if t not in TYPES])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        prompts = None
        for t in args.types:
            path = tmp / f"smollm2-{t}.gguf"
            subprocess.run([str(BUILD / "pasada"), "quantize", str(src), str(path), "--type", t, "-q",
                            "-t", str(N_THREADS)], check=True, stdout=subprocess.DEVNULL)
            data[f"{t}_sha256"] = sha256(path)
            data[f"{t}_bytes"] = path.stat().st_size
            reader = gguf.GGUFReader(str(path))
            data[f"{t}_types"] = np.array([f"{x.name}:{x.tensor_type.name}" for x in reader.tensors])
            del reader

            llm = llama_cpp.Llama(model_path=str(path), n_ctx=128, n_batch=128, n_ubatch=128,
                                  n_threads=N_THREADS, n_threads_batch=N_THREADS, logits_all=True,
                                  flash_attn=False, verbose=False)
            if prompts is None:
                prompts = [llm.tokenize(p.encode(), add_bos=True, special=False) for p in PROMPTS]
                data["prompt_ids"] = np.concatenate([np.array(p, np.int32) for p in prompts])
                data["prompt_offsets"] = np.cumsum([0] + [len(p) for p in prompts]).astype(np.int32)
            offs, ids, lps, rests, amax, ref_lp = [0], [], [], [], [], []
            for p in prompts:
                llm.reset()
                llm.eval(p)
                lp = log_softmax(np.array(llm.scores[:len(p)], dtype=np.float32))
                for row in lp:
                    tid, tlp, rest = top_set(row)
                    ids.append(tid.astype(np.uint16))
                    lps.append(tlp.astype(np.float32))
                    rests.append(rest)
                    amax.append(int(np.argmax(row)))
                    offs.append(offs[-1] + len(tid))
                ref_lp.append(lp)
            del llm
            data[f"{t}_top_offsets"] = np.array(offs, np.int32)
            data[f"{t}_top_ids"] = np.concatenate(ids)
            data[f"{t}_top_logprobs"] = np.concatenate(lps)
            data[f"{t}_rest_logprob"] = np.array(rests, np.float32)
            data[f"{t}_argmax"] = np.array(amax, np.int32)

            # pasada on the same file, for the numbers the test checks
            ids_file = tmp / "ids.txt"
            ids_file.write_text("".join(" ".join(map(str, p)) + "\n" for p in prompts))
            subprocess.run([str(BUILD / "pasada_eval"), "logits", str(path), str(ids_file), str(tmp),
                            "-t", str(N_THREADS)], check=True)
            kls, agree, n = [], 0, 0
            for i, p in enumerate(prompts):
                lq = log_softmax(np.fromfile(tmp / f"prompt{i}.f32", dtype="<f4").reshape(len(p), -1))
                for j in range(len(p)):
                    r = offs[n + j]
                    r1 = offs[n + j + 1]
                    kls.append(partition_kl(data[f"{t}_top_logprobs"][r:r1], rests[n + j], lq[j],
                                            data[f"{t}_top_ids"][r:r1].astype(np.int64)))
                    agree += int(np.argmax(lq[j]) == amax[n + j])
                n += len(p)
            mass = np.exp(data[f"{t}_top_logprobs"].astype(np.float64))
            mass = np.add.reduceat(mass, np.array(offs[:-1]))
            print(f"{t}: {data[f'{t}_bytes']} bytes, sha256 {data[f'{t}_sha256'][:16]}…; pasada vs llama.cpp: "
                  f"top-1 {agree / n:.4f}, mean KL {np.mean(kls):.2e} (max {np.max(kls):.2e}), "
                  f"top-K mass mean {mass.mean():.4f}, mean K {np.diff(offs).mean():.0f}", flush=True)
            path.unlink()
    np.savez_compressed(out, **data)
    print(f"wrote {out} ({out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
