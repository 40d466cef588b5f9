#!/usr/bin/env python3
"""check-tiny-llama-server.py: llama.cpp's native llama-server on the tiny
parity fixtures (tests/fixtures/tiny, scripts/make-tiny-models.py), against
the transformers logits stored beside them: a cross-check of the fixtures'
GGUF conventions where llama-cpp-python is not installed.

For each architecture named, it starts llama-server (F32 or F16 KV cache, no
flash attention, 2 threads) on the fixture, and for every prefix of 2..8
tokens of the fixture's sequences asks /v1/completions for one greedy token
with its top-5 log-probabilities: llama.cpp's argmax must be transformers',
and the largest difference of those log-probabilities from log-softmax of
transformers' logits is printed. Prefixes of at most 8 tokens: llama.cpp
ignores Phi-3's sliding window, and the fixtures' windows are 8. Prefixes
whose next token is part of a UTF-8 sequence are skipped (llama-server
reports no log-probabilities for them). general.name is overridden: llama.cpp
changes Phi-3 token attributes by the model's name, and needs tokens the tiny
vocabulary lacks for it.

    check-tiny-llama-server.py [--bin DIR] [--kv f32|f16] ARCH...

DIR defaults to ~/.cache/pasada/llama.cpp-0.3.36/build/bin. Needs numpy and
requests (the test venv has both); never run by the tests.
Measured (llama.cpp 0.3.36 native build, F32 KV): llama 7.4e-6, phi3 6.1e-6,
gemma2 7.2e-4 and gemma3 2.4e-3 (ggml's F16 GELU table).
"""
import argparse
import os
import pathlib
import subprocess
import time

import numpy as np
import requests

ROOT = pathlib.Path(__file__).resolve().parents[1]


def check(arch, port):
    d = np.load(ROOT / "tests" / "fixtures" / "tiny" / f"{arch}.logits.npz")
    worst, n, skipped = 0.0, 0, 0
    for i in range(len([k for k in d.files if k.startswith("ids")])):
        ids, ref = d[f"ids{i}"], d[f"logits{i}"]
        for k in range(2, min(len(ids), 8) + 1):
            r = requests.post(f"http://127.0.0.1:{port}/v1/completions", timeout=60,
                              json={"prompt": [int(t) for t in ids[:k]], "max_tokens": 1, "logprobs": 5,
                                    "temperature": 0}).json()
            if not r["choices"][0]["logprobs"]:
                skipped += 1
                continue
            lp = ref[k - 1].astype(np.float64)
            lp = lp - lp.max() - np.log(np.exp(lp - lp.max()).sum())
            top = r["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            if top[0]["id"] != int(np.argmax(lp)):
                raise SystemExit(f"{arch} seq{i} prefix {k}: llama.cpp's argmax {top[0]['id']}, "
                                 f"transformers' {int(np.argmax(lp))}")
            worst = max(worst, max(abs(e["logprob"] - lp[e["id"]]) for e in top))
            n += 1
    print(f"{arch}: {n} prefixes ({skipped} skipped), argmax equal, top-5 log-prob max abs diff {worst:.2e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.expanduser("~/.cache/pasada/llama.cpp-0.3.36/build/bin"))
    ap.add_argument("--kv", default="f32", choices=["f32", "f16"])
    ap.add_argument("--port", type=int, default=18941)
    ap.add_argument("arch", nargs="+")
    args = ap.parse_args()
    env = dict(os.environ, LD_LIBRARY_PATH=args.bin)
    for arch in args.arch:
        model = ROOT / "tests" / "fixtures" / "tiny" / f"{arch}.gguf"
        proc = subprocess.Popen([os.path.join(args.bin, "llama-server"), "-m", str(model), "--override-kv",
                                 "general.name=str:tiny", "--port", str(args.port), "-c", "64", "-np", "1", "-t",
                                 "2", "-ctk", args.kv, "-ctv", args.kv, "-fa", "off"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            for _ in range(120):
                try:
                    if requests.get(f"http://127.0.0.1:{args.port}/health", timeout=2).status_code == 200:
                        break
                except requests.RequestException:
                    pass
                if proc.poll() is not None:
                    raise SystemExit(f"{arch}: llama-server exited ({proc.returncode}): it could not load {model}")
                time.sleep(0.5)
            check(arch, args.port)
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
