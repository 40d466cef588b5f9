#!/usr/bin/env python3
"""make-raw-bpe-fixtures.py: BPE vocabularies over UTF-8 characters (not
the byte-level map) with <0xNN> byte fallback, for
tests/e2e/test_raw_bpe.py. Run with any Python that has the `tokenizers`
library:

    python -m venv /tmp/tok && /tmp/tok/bin/pip install tokenizers
    /tmp/tok/bin/python scripts/make-raw-bpe-fixtures.py

Each vocabulary (600 tokens trained here on a small mixed corpus, then the
256 <0xNN> tokens) is written with the `tokenizers` library's ids of tricky
strings to tests/fixtures/tokenizer/raw-bpe/<name>.json:
  {"tokens", "types" (GGUF token types: 1 normal, 3 control, 6 byte),
   "merges" ("a b"), "bos", "eos", "lowercase", "cases": [[text, ids, decoded]]}

  sarvam-moe        Sarvam's SentencePiece-style BPE as llama.cpp reads
                    tokenizer.ggml.pre "sarvam-moe": spaces replaced by
                    "\\u2581", the text split into lines and runs of
                    newlines, no BOS; plus a token of six newlines that no
                    merge makes (Gemma 4's rule would use it)
  whitespace        the "whitespace" model (Jina's v2 zh embeddings): the
                    Whitespace pre-tokenizer (\\w+ and runs of other
                    non-space characters; whitespace dropped); plus merges
                    across the edges of \\w that its split never uses
  whitespace-lower  the same after the Lowercase normalizer"""
import json
import pathlib

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "tokenizer" / "raw-bpe"
SPECIALS = ["<unk>", "<s>", "</s>"]
SIX_NEWLINES = "\n" * 6

CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's what we'll do, they've said; I'm sure you'd agree.",
    "HTTPServer parseJSONResponse getUserID XMLHttpRequest camelCaseWord snake_case_word CONSTANT_VALUE",
    "Numbers: 1, 22, 333, 4444, 55555, 123456789, 3.14159, 2026-12-05, v1.2.3, 0x1F, 1e-6, $4,500.00",
    "Café naïve résumé coöperate façade jalapeño Ångström Zürich Straße ISTANBUL İstanbul",
    "Привет, как дела? Всё хорошо. Ελληνικά γράμματα ΣΟΦΙΑ. עברית. العربية. नमस्ते दुनिया",
    "日本語のテキストと中文文本，以及한국어 문장。我们的模型很好。",
    "def main():\n    return [x * 2 for x in range(10)]  # comment\n\n\tif a != b:\n\t\tpass\n",
    "path/to/file.txt and C:\\Users\\name\\file, <tag attr='v'>text</tag> {\"key\": [1, 2]}",
    "tabs\tand\r\nwindows newlines\n\n\nparagraph  two   three    spaces",
    # where word characters end (\\w: letters, marks, decimal digits, connector
    # punctuation, joiners; not other numbers or symbols), merges across them
    ("a\u203fb x\u200dy z\u200cw 1²3½ Ⅻ Ⓐⓑ १२३ ٤٥ e\u0301 n\u0303 a.b,c;d!? x_y °C ¼ xↀy aⓐb a▁b Āā Őő " * 3),
]
# For the whitespace models, merges across the edges of \\w that Hugging
# Face's split never makes adjacent (appended last, with their tokens): a
# reader that splits less (llama.cpp's keeps "a.b" whole) would use them.
# ² (No) and "." are no word characters; ↀ (Nl) and ⓐ (So) are alphabetic,
# so word characters, and trained merges join them to their neighbours.
EXTRA_MERGES = [("1", "²"), ("²", "3"), ("a", "."), (".", "b")]
CASES = [
    "Hello world", "  leading spaces", "trailing spaces   ", "a\n\nb\r\n\r\nc", "a" + SIX_NEWLINES + "b",
    "\n\n\n", "日本語テキスト。中文", "Привет мир", "😀 emoji 🎉!", "tab\there", "MiXeD CaSe WoRdS",
    "don't won't", "1,000,000.00 and 3.14", "snake_case a\u203fb x\u200dy z\u200cw", "१२३ ٤٥ 1²3½ Ⅻ Ⓐⓑ",
    "नमस्ते", "İstanbul ΣΟΦΙΑ Ⱥ ǅ", "a\u00a0b\u3000c\u0085d\u200be\u2028f", "e\u0301 n\u0303!?", "",
    "def f(x):\n    return x ** 2\n", "<s> is text here", "a.b,c;d", "\u00ff\u0100\U0001F600",
    "xↀy aⓐb 1²3 a.b", "a▁b", "Āā Őő ǅǆ",
]


def byte_tokens():
    return ["<0x%02X>" % b for b in range(256)]


def build(name):
    tok = Tokenizer(models.BPE(byte_fallback=True, unk_token=None))
    if name == "sarvam-moe":
        tok.normalizer = normalizers.Replace(" ", "\u2581")
        tok.pre_tokenizer = pre_tokenizers.Split(Regex("[^\n]+|[\n]+"), behavior="isolated")
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    else:
        if name == "whitespace-lower":
            tok.normalizer = normalizers.Lowercase()
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=SPECIALS, show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer)
    # the byte tokens (and, for sarvam-moe, six newlines) after the trained ones
    saved = json.loads(tok.to_str())
    vocab = saved["model"]["vocab"]
    extra = byte_tokens() + ([SIX_NEWLINES] if name == "sarvam-moe" else [])
    for t in extra:
        assert t not in vocab, (name, t)
        vocab[t] = len(vocab)
    if name != "sarvam-moe":
        for a, b in EXTRA_MERGES:
            assert a in vocab and b in vocab and a + b not in vocab, (name, a, b)
            vocab[a + b] = len(vocab)
            saved["model"]["merges"].append([a, b] if isinstance(saved["model"]["merges"][0], list) else f"{a} {b}")
    tok = Tokenizer.from_str(json.dumps(saved))
    return tok, saved


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name in ("sarvam-moe", "whitespace", "whitespace-lower"):
        tok, saved = build(name)
        vocab = saved["model"]["vocab"]
        tokens = sorted(vocab, key=vocab.get)
        assert [vocab[t] for t in tokens] == list(range(len(tokens)))
        types = [3 if t in SPECIALS else 6 if t in byte_tokens() else 1 for t in tokens]
        merges = [m if isinstance(m, str) else " ".join(m) for m in saved["model"]["merges"]]
        cases = []
        for text in CASES:
            ids = tok.encode(text, add_special_tokens=False).ids
            cases.append([text, ids, tok.decode(ids, skip_special_tokens=False)])
        doc = {"tokens": tokens, "types": types, "merges": merges, "bos": vocab["<s>"], "eos": vocab["</s>"],
               "lowercase": name == "whitespace-lower", "cases": cases}
        (OUT / f"{name}.json").write_text(json.dumps(doc, ensure_ascii=False, indent=0) + "\n")
        print(f"{name}: {len(tokens)} tokens, {len(merges)} merges, {len(cases)} cases")


if __name__ == "__main__":
    main()
