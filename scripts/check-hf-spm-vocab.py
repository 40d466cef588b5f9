#!/usr/bin/env python3
"""check-hf-spm-vocab.py: real SentencePiece-style tokenizer.json files give
the `tokenizers` library's ids.

transformers exports a SentencePiece GGUF vocabulary as tokenizer.json (a
BPE with byte_fallback and every-split merges, as its converters write
Llama's and Gemma's) + tokenizer_config.json + config.json; with an empty
model.safetensors that is a vocabulary-only folder. `pasada tokenize` on it
must print the ids `tokenizers` gives (BOS added, special-token text parsed)
for llama.cpp's reference texts of the file (its .inp, where there is one)
and a few of our own. Llama's vocabulary is checked in the exported
definition (Metaspace, prepend_scheme first) and in the legacy one of the
published Llama 2 files (Prepend + Replace). Nothing is committed.

Needs the reference venv (transformers, tokenizers, gguf) and a pasada build.
Usage: check-hf-spm-vocab.py [--build build] GGUF...
  (default: ~/.cache/pasada/vocabs/ggml-vocab-llama-spm.gguf and
   ~/.cache/pasada/models/gemma-3-270m-q4_k_m.gguf)
"""
import argparse
import json
import pathlib
import struct
import subprocess
import sys
import tempfile

from tokenizers import Tokenizer
from transformers import AutoConfig, AutoTokenizer

ROOT = pathlib.Path(__file__).resolve().parents[1]
CACHE = pathlib.Path.home() / ".cache/pasada"
TEXTS = ["Hello world!", " leading", "  two  spaces  ", "tabs\tand\nnewlines\n\n", "日本語 🙂 ẞ 3.14159",
         "<s>after bos", "a</s>b", "<bos>x<eos>", "<start_of_turn>model\nok<end_of_turn>", "\u2581literal"]
LEGACY = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                              {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("gguf", nargs="*", default=[str(CACHE / "vocabs/ggml-vocab-llama-spm.gguf"),
                                                 str(CACHE / "models/gemma-3-270m-q4_k_m.gguf")])
    args = ap.parse_args()
    failures = 0
    for g in map(pathlib.Path, args.gguf):
        texts = list(TEXTS)
        inp = g.with_name(g.name + ".inp")
        if inp.exists():
            texts += inp.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
        with tempfile.TemporaryDirectory() as tmp:
            out = pathlib.Path(tmp) / g.stem
            AutoTokenizer.from_pretrained(g.parent, gguf_file=g.name).save_pretrained(out)
            AutoConfig.from_pretrained(g.parent, gguf_file=g.name).save_pretrained(out)
            h = b"{}      "
            (out / "model.safetensors").write_bytes(struct.pack("<Q", len(h)) + h)
            tj = json.loads((out / "tokenizer.json").read_text())
            variants = ["exported"] + (["legacy"] if tj.get("pre_tokenizer", {}).get("type") == "Metaspace" else [])
            for variant in variants:
                if variant == "legacy":
                    tj["normalizer"], tj["pre_tokenizer"] = LEGACY, None
                    (out / "tokenizer.json").write_text(json.dumps(tj))
                tok = Tokenizer.from_file(str(out / "tokenizer.json"))
                same = 0
                for text in texts:
                    want = tok.encode(text).ids
                    p = subprocess.run([str(pathlib.Path(args.build) / "pasada"), "tokenize", "-m", str(out), "-p", text],
                                       capture_output=True, text=True)
                    got = [int(t) for t in p.stdout.split()] if p.returncode == 0 else p.stderr.strip()
                    same += got == want
                    if got != want:
                        print(f"  {g.name} {variant}: {text[:40]!r}: tokenizers {want[:16]} | pasada {got}")
                print(f"{g.name} ({tok.get_vocab_size()} tokens, {len(tj['model']['merges'])} merges), {variant}: "
                      f"{same}/{len(texts)} texts give the tokenizers library's ids")
                failures += len(texts) - same
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
