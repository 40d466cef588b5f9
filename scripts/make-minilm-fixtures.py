#!/usr/bin/env python3
"""make-minilm-fixtures.py: the reference of all-MiniLM-L6-v2 (BERT) for
tests/e2e/test_bert.py, from the Hugging Face folder scripts/fetch-models
unpacks (~/.cache/pasada/models/all-MiniLM-L6-v2):

  tests/fixtures/minilm/minilm.npz
    sentences       100 sentences (str)
    emb             their embeddings, float32 [100, 384]: transformers'
                    BertModel, the mean of the last hidden states over the
                    tokens, L2-normalised (what sentence-transformers computes
                    with this model's modules.json: Transformer, Pooling mean,
                    Normalize)
    tok_texts       the sentences and tricky strings (accents, CJK,
                    punctuation, long words, [UNK], control characters)
    tok_ids, tok_off  their ids from the `tokenizers` library
                    (tokenizer.json, special tokens added, no padding or
                    truncation), concatenated, with offsets

Needs the reference venv (torch, transformers, tokenizers): see docs/parity.md.
Usage: make-minilm-fixtures.py [--model DIR] [--out tests/fixtures/minilm]
"""
import argparse
import itertools
import pathlib

import numpy as np
import tokenizers
import torch
import transformers

ROOT = pathlib.Path(__file__).resolve().parents[1]

WRITTEN = [
    "This is an example sentence.",
    "Each sentence is converted to a vector.",
    "The quick brown fox jumps over the lazy dog.",
    "A man is eating food.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Two men pushed carts through the woods.",
    "The new movie is awesome!",
    "The cat sits outside; the dog plays in the garden.",
    "Do you like pizza? I prefer pasta, honestly...",
    "Café, naïve, résumé, and piñata are borrowed words.",
    "Ünïcödé çhäràctérs with áccents are stripped.",
    "Москва — столица России.",
    "東京は日本の首都です。",
    "北京欢迎你，上海也欢迎你！",
    "서울은 한국의 수도입니다.",
    "Ελληνικά: η γρήγορη καφέ αλεπού.",
    "Emoji are unknown to this vocabulary 🙂🚀.",
    "Supercalifragilisticexpialidocious is a very long word.",
    "Pneumonoultramicroscopicsilicovolcanoconiosis appears in dictionaries.",
    "E-mail me at someone@example.com or visit https://example.org/path?q=1.",
    "Prices rose 3.5% to $1,234.56 in Q4 2023.",
    "C++ and C# are languages; so is Python 3.11.",
    "\"Quoted text,\" she said, 'and more (in brackets) [here] {there}.'",
    "Tabs\tand\nnewlines   and   many   spaces.",
    "ALL CAPS SENTENCES ARE LOWERCASED FIRST.",
    "MiXeD CaSe WoRdS lIkE iPhone and eBay.",
    "The mitochondria is the powerhouse of the cell.",
    "Photosynthesis converts light energy into chemical energy.",
    "Gradient descent minimises a loss function step by step.",
    "Transformers use attention to mix information across tokens.",
    "The stock market fell sharply after the announcement.",
    "She plays the violin every evening after dinner.",
    "Rain is expected tomorrow across the northern regions.",
    "He forgot his umbrella and got completely soaked.",
    "The committee will review the proposal next week.",
    "Our flight was delayed by three hours due to fog.",
    "Fresh bread smells wonderful in the early morning.",
    "The museum exhibits ancient Egyptian artifacts.",
    "Quantum computers exploit superposition and entanglement.",
]

SUBJECTS = ["The teacher", "A small child", "My neighbour", "The old sailor", "An engineer", "The doctor"]
VERBS = ["reads", "writes about", "dreams of", "carefully repairs", "talks about"]
OBJECTS = ["a broken clock.", "the northern lights.", "ancient history.", "her first bicycle."]

TRICKY = [
    "", " ", "hello", "HELLO", "Héllo wörld", "ÅÄÖ åäö ØÆ øæ", "ﬁnance ﬂow", "İstanbul ıi",
    "中文字符和日本語の文字", "한국어 텍스트", "ไทย ภาษา", "عربي نص", "עברית",
    "...!!!???", "a.b,c;d:e", "(parentheses) [brackets] {braces} <angles>", "---___***",
    "¿Qué? ¡Sí!", "«guillemets» „quotes“", "naïve cooperation coöperate",
    "x" * 99, "y" * 101, "antidisestablishmentarianism", "unbelievably-long-hyphenated-compound-word",
    "[UNK] [CLS] [SEP] [MASK] [PAD]", "🙂", "a🙂b", "\u0000null\u0000", "zero\u200bwidth", "control\u0007bell",
    "soft\u00adhyphen", "combining e\u0301 and a\u0308", "full　width　space", "ｆｕｌｌｗｉｄｔｈ",
    "1234567890", "3.14159 2.71828", "$100 €200 £300 ¥400",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=str(pathlib.Path.home() / ".cache/pasada/models/all-MiniLM-L6-v2"))
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "minilm"))
    a = ap.parse_args()
    templated = [f"{s} {v} {o}" for s, v, o in itertools.product(SUBJECTS, VERBS, OBJECTS)]
    sentences = WRITTEN + templated[:100 - len(WRITTEN)]
    assert len(sentences) == 100

    tok = transformers.AutoTokenizer.from_pretrained(a.model)
    model = transformers.AutoModel.from_pretrained(a.model).eval()
    enc = tok(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = model(**enc).last_hidden_state.double()
    mask = enc["attention_mask"][..., None].double()
    emb = torch.nn.functional.normalize((h * mask).sum(1) / mask.sum(1), dim=1).float().numpy()

    fast = tokenizers.Tokenizer.from_file(str(pathlib.Path(a.model) / "tokenizer.json"))
    fast.no_padding()
    fast.no_truncation()
    texts = sentences + TRICKY
    ids = [fast.encode(t).ids for t in texts]
    off = np.cumsum([0] + [len(i) for i in ids]).astype(np.int32)
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "minilm.npz", sentences=np.array(sentences), emb=emb,
                        tok_texts=np.array(texts), tok_ids=np.concatenate(ids).astype(np.int32), tok_off=off)
    print(f"{out / 'minilm.npz'}: {len(sentences)} embeddings, {len(texts)} tokenizations")


if __name__ == "__main__":
    main()
