#!/usr/bin/env python3
"""make-wordpiece-fixtures.py: WordPiece (BERT) vocabularies whose
normalizer keeps case, for tests/e2e/test_wordpiece_normalizer.py. Run with
any Python that has the `tokenizers` library:

    python -m venv /tmp/tok && /tmp/tok/bin/pip install tokenizers
    /tmp/tok/bin/python scripts/make-wordpiece-fixtures.py

Each vocabulary (800 tokens trained here on a small mixed corpus with
BertNormalizer, BertPreTokenizer and WordPiece's "##" continuations) is
written with the `tokenizers` library's ids of tricky strings to
tests/fixtures/tokenizer/wordpiece/<name>.json:
  {"tokens" (Hugging Face's spelling), "special" (ids of the special tokens),
   "lowercase", "strip_accents", "cases": [[text, ids]]}

  cased           lowercase false, strip_accents false (bert-base-cased's)
  lowercase-only  lowercase true, strip_accents false"""
import json
import pathlib

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "tokenizer" / "wordpiece"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
CORPUS = [
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX. Paris, London and Berlin.",
    "Café naïve résumé coöperate façade jalapeño Ångström Zürich Straße CAFÉ NAÏVE Ärger ärger",
    "Привет, как дела? ПРИВЕТ. Ελληνικά ΕΛΛΗΝΙΚΆ γράμματα. İstanbul ISTANBUL istanbul Ⱥ ⱥ ǅ ǆ",
    "日本語のテキストと中文文本，以及한국어 문장。Hangul 한국어 한국어",
    "HTTPServer parseJSONResponse getUserID McDonald's iPhone e\u0301cole E\u0301COLE",
]
CASES = [
    "Hello World", "HELLO world", "Café CAFÉ cafe\u0301", "naïve Naïve NAÏVE", "İstanbul ISTANBUL istanbul",
    "Ελληνικά ΕΛΛΗΝΙΚΆ", "Привет ПРИВЕТ", "한국어 문장", "McDonald's iPhone", "Ⱥ ⱥ ǅ ǆ Ǆ",
    "e\u0301cole E\u0301COLE", "Straße STRASSE", "日本語テキスト", "",
]


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, lowercase, strip in (("cased", False, False), ("lowercase-only", True, False)):
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase, strip_accents=strip)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(vocab_size=800, special_tokens=SPECIALS, show_progress=False)
        tok.train_from_iterator(CORPUS * 4, trainer)
        vocab = tok.get_vocab()
        tokens = sorted(vocab, key=vocab.get)
        assert [vocab[t] for t in tokens] == list(range(len(tokens)))
        cases = [[text, tok.encode(text, add_special_tokens=False).ids] for text in CASES]
        doc = {"tokens": tokens, "special": {t: vocab[t] for t in SPECIALS}, "lowercase": lowercase,
               "strip_accents": strip, "cases": cases}
        (OUT / f"{name}.json").write_text(json.dumps(doc, ensure_ascii=False, indent=0) + "\n")
        print(f"{name}: {len(tokens)} tokens, {len(cases)} cases")


if __name__ == "__main__":
    main()
