#!/usr/bin/env python3
"""check-hf-vocab.py: a real vocabulary read from tokenizer.json gives the
same token ids as the GGUF file it came from.

transformers exports SmolLM2's tokenizer (49152 tokens, byte-level BPE) from
the GGUF file as tokenizer.json + tokenizer_config.json
(AutoTokenizer.from_pretrained(dir, gguf_file=...)), and its config.json
(AutoConfig); with an empty model.safetensors that makes a vocabulary-only
folder. `pasada tokenize` on the folder and on the GGUF file must print the
same ids for every test text. The exporter writes a plain ByteLevel
pre-tokenizer; the folder is checked with it and with SmolLM2's published one
(Digits(individual_digits) + ByteLevel, which pasada reads as "smollm").
Nothing is committed: the folder is made in a temporary directory.

Needs the reference venv (transformers) and a pasada build.
Usage: check-hf-vocab.py [--build build] [--gguf ~/.cache/pasada/models/SmolLM2-135M-Instruct.Q4_1.gguf]
"""
import argparse
import json
import pathlib
import struct
import subprocess
import sys
import tempfile

from transformers import AutoConfig, AutoTokenizer

ROOT = pathlib.Path(__file__).resolve().parents[1]
TEXTS = ["Hello world!", "The year 2024 had 365 days; π≈3.14159.", "<|im_start|>user\nhi<|im_end|>\n",
         "  leading spaces\tand\ttabs\n\nnewlines", "ünïcödé 日本語 🙂 emoji", "don't I'll we've",
         "x" * 50 + " " + "ab" * 30, "def f(x):\n    return x**2  # comment", "<|endoftext|>tail",
         "Ελληνικά и русский", "1234567890 12 345", "  \n\n\t  "]


def tokenize(build, model, text):
    p = subprocess.run([str(build / "pasada"), "tokenize", "-m", str(model), "-p", text], capture_output=True,
                       text=True)
    if p.returncode:
        sys.exit(f"pasada tokenize -m {model}: {p.stderr.strip()}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--gguf", default=str(pathlib.Path.home() / ".cache/pasada/models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    args = ap.parse_args()
    build, gguf_path = pathlib.Path(args.build), pathlib.Path(args.gguf)
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "smollm2"
        AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name).save_pretrained(out)
        AutoConfig.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name).save_pretrained(out)
        h = b"{}      "
        (out / "model.safetensors").write_bytes(struct.pack("<Q", len(h)) + h)
        failures = 0
        for variant in ("exported", "published pre-tokenizer"):
            if variant != "exported":
                t = json.loads((out / "tokenizer.json").read_text())
                t["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
                    {"type": "Digits", "individual_digits": True},
                    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}
                (out / "tokenizer.json").write_text(json.dumps(t))
            same = 0
            for text in TEXTS:
                a, b = tokenize(build, gguf_path, text), tokenize(build, out, text)
                same += a == b
                if a != b:
                    print(f"  {variant}: {text!r}: GGUF {a.strip()[:80]} | folder {b.strip()[:80]}")
            print(f"{variant}: {same}/{len(TEXTS)} texts give the GGUF's ids")
            failures += len(TEXTS) - same
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
