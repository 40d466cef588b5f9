#!/usr/bin/env python3
"""make-split-bpe-fixtures.py: byte-level BPE vocabularies whose
tokenizer.json splits with the regexes of released tokenizers, for
tests/e2e/test_hf_split_bpe.py. Run with the reference venv
(scripts/setup-ref-venv; the `tokenizers` library):

    ~/.cache/pasada/ref-venv/bin/python scripts/make-split-bpe-fixtures.py

For each pre-tokenizer a vocabulary of 700 tokens is trained here on a
small mixed corpus with tokenizer.json's pre-tokenizer as the releases
write it (a Sequence of Splits on regexes, Isolated, or Digits with each
digit alone, then ByteLevel without its own regex), and the `tokenizers`
library's ids of tricky strings are kept:

    tests/fixtures/hf/split-bpe/<name>.tokenizer.json
    tests/fixtures/hf/split-bpe/cases.json   {name: [[text, ids], ...]}

  qwen35        Qwen3.5's regex
  tekken        Mistral NeMo's, with the model's ignore_merges
  gpt-4o        tiktoken o200k's (also Llama 4's)
  deepseek-v3   DeepSeek V3's three Splits (digits in threes, CJK and kana
                runs, words), with line breaks written as the characters
                themselves, not escapes, as its tokenizer.json has them
  deepseek-coder  DeepSeek Coder's four Splits and Digits
  llama-bpe     Llama 3's regex with ignore_merges; dbrx: the same regex
                without (llama.cpp names both; ignore_merges picks)

The regexes are the tokenizer.json strings llama.cpp's llama-vocab.cpp
quotes as the originals of these pre-tokenizers."""
import json
import pathlib

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "hf" / "split-bpe"

WORDS_UP = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]"
WORDS_LO = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
CONTR = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
LLAMA3 = CONTR + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
DIGITS = None  # Digits(individual_digits=True) in the sequence
# name: (the sequence before ByteLevel, the model's ignore_merges)
PRETOKENIZERS = {
    "qwen35": ([CONTR + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+"
                r"|\s+(?!\S)|\s+"], False),
    "tekken": ([rf"[^\r\n\p{{L}}\p{{N}}]?{WORDS_UP}*{WORDS_LO}+|[^\r\n\p{{L}}\p{{N}}]?{WORDS_UP}+{WORDS_LO}*"
                r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"], True),
    "gpt-4o": ([rf"[^\r\n\p{{L}}\p{{N}}]?{WORDS_UP}*{WORDS_LO}+{CONTR}?|[^\r\n\p{{L}}\p{{N}}]?{WORDS_UP}+{WORDS_LO}*"
                rf"{CONTR}?|\p{{N}}{{1,3}}| ?[^\s\p{{L}}\p{{N}}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"], False),
    "deepseek-v3": ([r"\p{N}{1,3}", "[一-龥\u3040-ゟ゠-ヿ]+",
                     "[!\"" + r"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"
                     r"|[^" + "\r\n" + r"\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
                     r"| ?[\p{P}\p{S}]+[" + "\r\n" + r"]*|\s*[" + "\r\n" + r"]+|\s+(?!\S)|\s+"], False),
    "deepseek-coder": (["[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", "[一-龥\u0800-一가-\ud7ff]+", DIGITS], False),
    "llama-bpe": ([LLAMA3], True),
    "dbrx": ([LLAMA3], False),
}
CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's what we'll do, they've said; I'm sure you'd agree.",
    "HTTPServer parseJSONResponse getUserID XMLHttpRequest camelCaseWord snake_case_word CONSTANT_VALUE",
    "Numbers: 1, 22, 333, 4444, 55555, 123456789, 3.14159, 2026-12-05, v1.2.3, 0x1F, 1e-6, $4,500.00",
    "Café naïve résumé coöperate façade jalapeño Ångström Zürich Straße",
    "e\u0301 a\u0300 o\u0308 n\u0303 combining marks: cafe\u0301 nai\u0308ve",
    "Привет, как дела? Всё хорошо. Ελληνικά γράμματα. עברית. العربية.",
    "日本語のテキストと中文文本，以及한국어 문장。",
    "def main():\n    return [x * 2 for x in range(10)]  # comment\n\n\tif a != b:\n\t\tpass\n",
    "path/to/file.txt and C:\\Users\\name\\file, <tag attr='v'>text</tag> {\"key\": [1, 2]}",
    "Emoji 😀🎉 and symbols ©®™ — dashes – and … ellipsis; tabs\tand\r\nwindows newlines\n\n\n",
]
CASES = [
    "Hello world", "It's ABCdef's and we'VE gone", "getHTTPResponseCode", "12345678 and 3.14",
    "Cafe\u0301 and cafe\u0301s", "  leading spaces", "trailing spaces   ", "a\n\nb\r\n\r\nc",
    "path/to//file.txt\n", "日本語テキスト", "Привет мир", "😀 emoji 🎉!", "x'S'T'RE", "tab\there",
    "MiXeD CaSe WoRdS", "don't won't can't", "1,000,000.00", "\u00e9\u0301\u0300", "",
    "def f(x):\n    return x ** 2\n",
]


def train(seq, ignore_merges):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True) if r is DIGITS else
        pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in seq] + [
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"], show_progress=False)
    tok.train_from_iterator(CORPUS * 4, trainer)
    return tok


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    cases = {}
    for name, (seq, ignore_merges) in PRETOKENIZERS.items():
        tok = train(seq, ignore_merges)
        tok.save(str(OUT / f"{name}.tokenizer.json"))
        cases[name] = [[text, tok.encode(text, add_special_tokens=False).ids] for text in CASES]
        # the file holds the regex strings the reader recognises
        saved = json.loads((OUT / f"{name}.tokenizer.json").read_text())["pre_tokenizer"]["pretokenizers"]
        assert [p["pattern"]["Regex"] if p["type"] == "Split" else None for p in saved[:-1]] == seq, name
    (OUT / "cases.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {len(PRETOKENIZERS)} vocabularies and {len(CASES)} cases each to {OUT}")


if __name__ == "__main__":
    main()
