#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer/{smollm2,gemma3}.json: reference token ids, decodings and chat
renderings for tests/e2e/test_tokenizer.py.

Needs the heavy venv (transformers, tokenizers, sentencepiece, gguf, jinja2); CI never runs it:
    /root/.cache/pasada/ref-venv/bin/python scripts/make-tokenizer-fixtures.py [MODELS_DIR]

The first reference is each model's tokenizer as transformers rebuilds it from the GGUF
metadata (AutoTokenizer.from_pretrained(dir, gguf_file=name)). Every id list is also computed
by a second reference built independently from the same metadata, closer to the original:
  * SmolLM2: a `tokenizers` BPE with SmolLM2's own pipeline, Digits(individual_digits=True)
    then ByteLevel (llama.cpp's "smollm" pre-tokenizer: \p{N} then the GPT-2 regex).
    transformers' GGUF path sets up plain ByteLevel, without the digit split, so it differs
    where a number character touches a space or a newline (" ½" -> "Ġ½"; "2\n\n1." splits
    the newlines "\n","\n" instead of "\n\n"; "𝟏𝟐𝟑" merges across digits).
  * Gemma 3: the `sentencepiece` library running a ModelProto made from the GGUF's pieces,
    scores and types (what Gemma's tokenizer.model is: SentencePiece BPE, byte fallback, no
    dummy prefix). transformers' GGUF path turns the user-defined space runs ("  " .. 31
    spaces) into BPE merges, so a run longer than 31 spaces splits differently (40 spaces:
    16+24 instead of SentencePiece's greedy 31+9).
The fixture's ids are the independent reference's (they equal transformers' everywhere else);
cases where transformers differs keep its ids under "transformers_ids", for the record.
Each case: "text", "ids" (special-token text kept as text), "ids_special" (parsed as special
tokens; absent when equal to "ids"), "decoded" (the reference's decoding of "ids"; absent when
equal to "text"). The SmolLM2 fixture also has "ids_pre_<name>" (absent when equal to "ids"):
its vocabulary behind the pre-tokenizers of other families (gpt2, llama-bpe, qwen2), built
with `tokenizers` from the regexes transformers carries, to test those regexes on a real
vocabulary.
Gemma 3's GGUF has no chat template, so the official Gemma 3 template (google/gemma-3-*-it,
tokenizer_config.json) is set on the tokenizer and rendered by transformers (jinja2).
"""
import functools
import json
import pathlib
import sys
import unicodedata

import gguf
from transformers import AutoTokenizer

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "fixtures" / "tokenizer"
MODELS = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "~/.cache/pasada/models").expanduser()

SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3 = "gemma-3-270m-q4_k_m.gguf"

GEMMA3_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    "    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    "        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'image' -%}\n"
    "                {{ '<start_of_image>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    "        {{ raise_exception(\"Invalid content type\") }}\n"
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n"
    "{%- endif -%}\n"
)


def tricky_strings():
    """At least 250 strings that stress pre-tokenizers, merges, byte fallback and specials."""
    s = [
        "", " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", "\n\n\n", " \n ", "\t\t\t", "\u00a0",
        "Hello world", "Hello, world!", "hello world", "HELLO WORLD", " Hello", "Hello ", " Hello ",
        "  leading two", "trailing two  ", "   three   spaces   ", "a  b   c    d", "a\tb\t\tc",
        "tab\tthen space \t mixed", "line1\nline2", "line1\r\nline2\r\n", "line1\rline2",
        "mixed\r\n\n\r\r\n end", "para one.\n\npara two.\n\n\npara three.", "\n leading newline",
        "trailing newline\n", "spaces before newline   \nnext", "\n\n\n\n\n\n\n\n\n\n\n\n\n",
        " " * 40, "\t" * 12, "\n" * 40, " \t \n \r\n \t ", "x" + " " * 33 + "y",
        "word" + "\n" * 5 + "word", "a" + "\t" * 40 + "b",
        # contractions, all cases
        "it's", "don't", "they're", "we've", "I'm", "you'll", "he'd", "IT'S", "DON'T", "THEY'RE",
        "WE'VE", "I'M", "YOU'LL", "HE'D", "It'S a test", "'s 't 're 've 'm 'll 'd", "'S'T'RE'VE'M'LL'D",
        "rock 'n' roll", "the dogs' bones", "O'Neill's", "can't won't shan't", "y'all'd've",
        "'tis", "''", "'", "' s", "quote 'inner' quote", "\"double\" quotes", "‘curly’ “quotes”",
        # numbers
        "0", "7", "42", "123", "1234", "12345", "1234567890", "3.14159", "1,000,000", "1.000.000,00",
        "1 000 000", "-17", "+42", "1e10", "6.022e23", "0x1F", "0b1011", "2024-01-15", "12:34:56",
        "$1,234.56", "€99,99", "100%", "1/2", "3rd 4th 21st", "v1.2.3", "192.168.0.1",
        "9" * 60, "12345678901234567890123456789012345678901234567890", "١٢٣٤٥ Arabic-Indic digits",
        "४२ देवनागरी अंक", "½ ¾ ² ³ ⅓ Ⅻ ①", "²³", " ½", "x²+y²=z²", "𝟏𝟐𝟑",
        # accents, NFC and NFD
        "café", "naïve", "résumé", "Ångström", "Zürich", "São Paulo", "Dvořák", "Łódź", "ß straße",
        "İstanbul ı", "ΑΒΓ αβγ", "Привет мир", "Ελληνικά",
    ]
    for word in ["café", "naïve", "résumé", "Ångström", "Zürich", "São Paulo", "Dvořák", "ñ Ñ"]:
        s.append(unicodedata.normalize("NFD", word))
    s.append("e\u0301\u0301\u0301 stacked combining")
    s.append("Z̸̢̛͓̣a̷͎̐l̶̨̈g̵̳̿o̴̡̓ text")
    s += [
        # CJK, Arabic, Hindi, Thai and more scripts
        "你好，世界！", "中文字符测试", "日本語のテキストです。", "カタカナ ひらがな 漢字", "한국어 텍스트입니다",
        "東京都渋谷区", "我爱北京天安门", "「引用」と『二重』", "ｆｕｌｌｗｉｄｔｈ　ｓｐａｃｅ", "mixed中文and English",
        "مرحبا بالعالم", "اللغة العربية جميلة", "שלום עולם", "नमस्ते दुनिया", "हिन्दी भाषा", "ภาษาไทย",
        "สวัสดีครับ ยินดีต้อนรับ", "Tiếng Việt có dấu", "ქართული", "Հայերեն", "ᚠᛇᚻ runes", "ꦗꦮ",
        "አማርኛ", "தமிழ்", "বাংলা ভাষা", "ਪੰਜਾਬੀ", "ગુજરાતી", "ಕನ್ನಡ", "മലയാളം", "සිංහල", "ລາວ", "ខ្មែរ",
        "မြန်မာ", "བོད་ཡིག", "Монгол", "ᓀᐦᐃᔭᐍᐏᐣ", "𐌰𐌱𐌲 gothic", "𓀀𓀁 hieroglyphs",
        # emoji and other 4-byte characters
        "😀", "😀😃😄😁", "I ❤️ NY", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸🇫🇷🇯🇵", "🇺", "👩🏾‍💻 coding",
        "🤖 robot says 🤖🤖", "emoji at end 🎉", "🎉 at start", "a😀b😀c", "🧑‍🤝‍🧑", "❤", "✨✨✨",
        "𝕳𝖊𝖑𝖑𝖔 𝔀𝓸𝓻𝓵𝓭", "𝒜ℬ𝒞", "🀄🃏", "\U0010FFFD", "\U0001F9D1\u200D\U0001F680",
        "zero\u200bwidth", "soft\u00adhyphen", "bidi \u202ertl override\u202c", "\ufeffBOM start",
        "nbsp\u00a0here", "em\u2003space", "ideographic\u3000space", "line\u2028sep",
        "mongolian\u180evowel sep", "next\u0085line", " \u00a0 \u2009x", "\u3000\u3000twice",
        "\x00nul", "bell\x07", "esc\x1b[31mred\x1b[0m", "del\x7f", "\x1c\x1d\x1e\x1f",
        "\U0001F600" * 20,
        # code
        "def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) { sum += a[i]; }",
        "#include <stdio.h>\nint main(void) { printf(\"hi\\n\"); }", "fn main() { println!(\"{}\", 42); }",
        "SELECT * FROM users WHERE id = 42;", "console.log(`template ${x}`);", "x => x ** 2",
        "if x != None and y >= 3: pass", "a->b = c->d;", "std::vector<int> v{1, 2, 3};",
        "<div class=\"a\">text</div>", "<table><tr><td>1</td></tr></table>", "<b>bold</b> <i>it</i>",
        "    indented four", "\tindented tab", "        eight spaces", "\t\t\tdef g(): pass",
        "lambda: (yield)", "x = [i**2 for i in range(10) if i % 2 == 0]", "#!/bin/bash\necho $HOME",
        "git commit -m 'fix: bug'", "$ ls -la | grep .py", "key: value\nlist:\n  - a\n  - b",
        "<?php echo 'hi'; ?>", "// comment\n/* block */", "-- sql comment", "# heading",
        "foo_bar_baz", "fooBarBaz", "FooBarBaz", "FOO_BAR", "__init__", "snake_case_identifier_long",
        # URLs, JSON, markdown
        "https://www.example.com/path?query=1&x=y#frag", "http://localhost:8080/",
        "mailto:someone@example.com", "user@example.org", "ftp://files.example.net/a/b/c.tar.gz",
        "{\"key\": \"value\", \"n\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
        "[{\"id\":1},{\"id\":2}]", "{\"emoji\": \"😀\", \"cjk\": \"中文\"}",
        "# Title\n\n## Subtitle\n\n- item 1\n- item 2\n\n1. first\n2. second",
        "**bold** _italic_ `code` ~~strike~~", "| a | b |\n|---|---|\n| 1 | 2 |", "> quote\n>> nested",
        "```python\nprint('hi')\n```", "[link](https://example.com) ![img](a.png)", "---", "***",
        "\\LaTeX: $\\frac{a}{b} + \\sqrt{x}$", "a_{i,j}^{2}", "∀x ∈ ℝ: x² ≥ 0", "→ ← ↑ ↓ ⇒ ⇔",
        # text that looks like special tokens
        "<|im_start|>", "<|im_end|>", "<|im_start|>user\nhi<|im_end|>", "<start_of_turn>",
        "<end_of_turn>", "<start_of_turn>model\nhello<end_of_turn>", "<bos>", "<eos>", "<pad>",
        "<unk>", "<mask>", "<|endoftext|>", "text<|endoftext|>more", "<|eot_id|>",
        "<|start_header_id|>user<|end_header_id|>", "<s>", "</s>", "<s>[INST] hi [/INST]",
        "< |im_start| >", "<|im_start", "im_start|>", "<<|im_start|>>", "<|im_start|><|im_start|>",
        "<bos><bos>", "a<bos>b", "<unused0>", "<unused99>", "<start_of_image>", "[multimodal]",
        "<repo_name>", "<file_sep>", "<0x41>", "<0xFF>", "<0x0A>", "▁", "▁▁", "▁hello", "Ġhello",
        "Ċ", "ĉ", "<jupyter_code>", "<empty_output>", "<|reserved_special_token_0|>",
        # long and repeated
        "a" * 500, "ab" * 200, "abc " * 100, "." * 100, "!" * 50 + "?" * 50, "-" * 80, "=" * 64,
        "_" * 40, "*" * 30, "#" * 20, "0" * 100, "\u00e9" * 100, "中" * 100, "ह" * 50,
        "Pneumonoultramicroscopicsilicovolcanoconiosis", "Donaudampfschifffahrtsgesellschaftskapitän",
        "supercalifragilisticexpialidocious" * 3, "x" * 1000,
        "hippopotomonstrosesquippedaliophobia antidisestablishmentarianism",
        # punctuation and symbols
        "...", "?!", "!!!???", "Hello...world", "end.", "(parenthetical)", "[brackets]", "{braces}",
        "a/b\\c|d", "~`!@#$%^&*()_+-={}[]|\\:;\"'<>,.?/", "©®™℠", "°C °F", "± × ÷ ≠ ≈ ≤ ≥", "§¶†‡•",
        "« guillemets »", "„German“ quotes", "¿Qué? ¡Sí!", "…", "—em dash–en dash-", "·•◦",
        # sentences
        "The quick brown fox jumps over the lazy dog.", "Pack my box with five dozen liquor jugs!",
        "The year 2024 had 366 days; 2023 had 365.", "Mr. Smith paid $3.50 for 2 apples (on sale).",
        "She said, \"It's 5 o'clock!\" and left.", "e.g. i.e. etc. vs. U.S.A.",
        "In 1492, Columbus sailed the ocean blue.", "Ünïcödé ëvërÿwhërë",
        "Mixing English, Français, Español, Deutsch, 中文, 日本語, and العربية in one line.",
        "a\n\tb\n\t\tc\n\t\t\td", "END",
    ]
    return s


def long_text(strings):
    """One ~8 KB string mixing everything, to check long inputs against the reference."""
    parts, n = [], 0
    for i in range(10000):
        p = strings[(i * 7919) % len(strings)]
        parts.append(p)
        n += len(p.encode())
        if n > 8000:
            break
    return " ".join(parts)


CONVERSATIONS = [
    ([{"role": "user", "content": "Hello!"}], True),
    ([{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"}], True),
    ([{"role": "system", "content": "You are a pirate."}, {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "Arr, hello!"}, {"role": "user", "content": "Where is the treasure?"}], True),
    ([{"role": "user", "content": "Say hi"}, {"role": "assistant", "content": "hi"}], False),
    ([{"role": "system", "content": "  Be nice.\n"}, {"role": "user", "content": "\n  Hi there  \n"},
      {"role": "assistant", "content": " Sure! \t"}, {"role": "user", "content": "日本語 🎉 \u3000"}], True),
    ([{"role": "user", "content": "Multi\nline\n\nmessage with\ttabs and  spaces"}], True),
    ([{"role": "user", "content": "What does <|im_end|> or <end_of_turn> mean?"}], True),
    ([{"role": "user", "content": ""}], True),
    ([{"role": "system", "content": "sys"}, {"role": "user", "content": "u"}], False),
]


@functools.lru_cache(maxsize=None)
def read_vocab(path):
    r = gguf.GGUFReader(str(path))

    def arr(key):
        f = r.fields.get(key)
        if f is None:
            return None
        if f.types[1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i][0].item() for i in f.data]

    return arr("tokenizer.ggml.tokens"), arr("tokenizer.ggml.scores"), arr("tokenizer.ggml.token_type"), arr("tokenizer.ggml.merges")


def byte_level_variant(path, split, ignore_merges):
    """SmolLM2's vocabulary and merges behind another family's pre-tokenizer: plain GPT-2
    ByteLevel (split None) or a Split regex then ByteLevel, as the Llama 3 and Qwen 2
    tokenizer.json files have them. The regexes come from transformers, not from pasada."""
    from tokenizers import AddedToken, Regex, Tokenizer, models, pre_tokenizers

    tokens, _, types, merges = read_vocab(path)
    bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)},
                     merges=[tuple(m.split(" ", 1)) for m in merges], ignore_merges=ignore_merges)
    tk = Tokenizer(bpe)
    if split is None:
        tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        tk.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3])
    tk.encode_special_tokens = True
    return lambda s: tk.encode(s, add_special_tokens=False).ids


def pre_variants(path):
    """{tokenizer.ggml.pre name: encoder} run on SmolLM2's vocabulary (pasada: tok_tool --pre)."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS as splits

    return {
        "gpt2": byte_level_variant(path, None, False),
        "llama-bpe": byte_level_variant(path, splits["llama-bpe"], True),
        "qwen2": byte_level_variant(path, splits["qwen2"], False),
    }


def smollm2_independent(path):
    """SmolLM2's pipeline rebuilt with `tokenizers`: Digits(individual) + ByteLevel BPE."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    tokens, _, types, merges = read_vocab(path)
    bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=[tuple(m.split(" ", 1)) for m in merges])
    tk = Tokenizer(bpe)
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(t, special=True, normalized=False) for t, ty in zip(tokens, types) if ty == 3])

    def encode(s, parse_special):
        tk.encode_special_tokens = not parse_special
        return tk.encode(s, add_special_tokens=False).ids

    return encode


def gemma3_independent(path):
    """Gemma's tokenizer.model rebuilt from the GGUF and run by `sentencepiece`."""
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    tokens, scores, types, _ = read_vocab(path)
    m = pb.ModelProto()
    m.trainer_spec.model_type = pb.TrainerSpec.BPE
    m.trainer_spec.vocab_size = len(tokens)
    m.trainer_spec.byte_fallback = True
    m.trainer_spec.unk_id, m.trainer_spec.bos_id, m.trainer_spec.eos_id, m.trainer_spec.pad_id = 3, 2, 1, 0
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.add_dummy_prefix = False
    m.normalizer_spec.remove_extra_whitespaces = False
    m.normalizer_spec.escape_whitespaces = True
    for i, (t, sc, ty) in enumerate(zip(tokens, scores, types)):
        p = m.pieces.add()
        # llama.cpp's converter writes the user-defined space runs with real spaces; in the
        # SentencePiece model they are "▁" runs (the normalizer turns spaces into "▁" first).
        p.piece = t.replace(" ", "\u2581") if ty == 4 else t
        p.score = sc
        p.type = 2 if i == 3 else ty  # <unk> is CONTROL in the GGUF, UNKNOWN in SentencePiece
    sp = spm.SentencePieceProcessor(model_proto=m.SerializeToString())
    # SentencePiece never reads control tokens in the text; with parse_special the text is cut
    # at them first (leftmost-longest, as Hugging Face's added-token matcher) and each stretch
    # encoded on its own.
    controls = sorted({t for t, ty in zip(tokens, types) if ty == 3}, key=len, reverse=True)
    by_text = {t: i for i, t in reversed(list(enumerate(tokens)))}

    def encode(s, parse_special):
        if not parse_special:
            return sp.encode(s)
        ids, start, i = [], 0, 0
        while i < len(s):
            hit = next((c for c in controls if s.startswith(c, i)), None) if s[i] == "<" or s[i] == "[" else None
            if hit is None:
                i += 1
                continue
            ids += sp.encode(s[start:i]) + [by_text[hit]]
            i = start = i + len(hit)
        return ids + sp.encode(s[start:])

    return encode


def hf_encode(tok, s, parse_special):
    bt = tok.backend_tokenizer
    bt.encode_special_tokens = not parse_special
    try:
        return bt.encode(s, add_special_tokens=False).ids
    finally:
        bt.encode_special_tokens = False


def build(name, independent):
    path = MODELS / name
    tok = AutoTokenizer.from_pretrained(str(MODELS), gguf_file=name)
    if name == GEMMA3:
        tok.chat_template = GEMMA3_TEMPLATE
    other = independent(path)
    variants = pre_variants(path) if name == SMOLLM2 else {}
    strings = tricky_strings()
    strings.append(long_text(strings))
    cases, disagreements = [], []
    for s in strings:
        case = {"text": s}
        for key, parse_special in [("ids", False), ("ids_special", True)]:
            hf, ref = hf_encode(tok, s, parse_special), list(other(s, parse_special))
            case[key] = ref
            if hf != ref:  # the long text only notes it: its id lists would be most of the file
                case["transformers_" + key] = hf if len(s) < 1000 else "differs"
                disagreements.append({"text": s, "parse_special": parse_special, "transformers": hf, "independent": ref})
        for pre, encode in variants.items():  # stored where they differ from "ids"
            ids = encode(s)
            if ids != case["ids"]:
                case["ids_pre_" + pre] = ids
        decoded = tok.backend_tokenizer.decode(case["ids"], skip_special_tokens=False)
        # Kept small: ids_special only where special-token text made a difference, decoded
        # only where it is not the text itself.
        if case["ids_special"] == case["ids"] and case.get("transformers_ids_special") == case.get("transformers_ids"):
            del case["ids_special"]
            case.pop("transformers_ids_special", None)
        if decoded != s:
            case["decoded"] = decoded
        cases.append(case)
    chats = []
    for messages, gen in CONVERSATIONS:
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
        hf, ref = tok(text, add_special_tokens=False)["input_ids"], list(other(text, True))
        chat = {"messages": messages, "add_generation_prompt": gen, "text": text, "ids": ref}
        if hf != ref:
            chat["transformers_ids"] = hf
            disagreements.append({"chat": text, "transformers": hf, "independent": ref})
        chats.append(chat)
    doc = {
        "model": name,
        "reference": "transformers %s GGUF tokenizer (AutoTokenizer.from_pretrained(dir, gguf_file=...))"
        % __import__("transformers").__version__,
        "independent_reference": "tokenizers Digits+ByteLevel BPE" if name == SMOLLM2 else "sentencepiece BPE ModelProto",
        "bos_text": tok.bos_token if name == GEMMA3 else "",
        "pre_variants": sorted(variants),
        "cases": cases,
        "chat": chats,
    }
    return doc, disagreements


def dump(doc):
    """JSON with one case or chat per line: small, and diffs stay readable."""
    lines = ["{"]
    for i, (key, value) in enumerate(doc.items()):
        end = "," if i + 1 < len(doc) else ""
        if isinstance(value, list):
            items = [" " + json.dumps(v, ensure_ascii=True) for v in value]
            lines.append(f" {json.dumps(key)}: [")
            lines.append(",\n".join(items))
            lines.append(" ]" + end)
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=True)}{end}")
    return "\n".join(lines) + "\n}\n"


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, independent in [(SMOLLM2, smollm2_independent), (GEMMA3, gemma3_independent)]:
        doc, disagreements = build(name, independent)
        out = OUT / ("smollm2.json" if name == SMOLLM2 else "gemma3.json")
        out.write_text(dump(doc))
        print(f"{out.relative_to(ROOT)}: {len(doc['cases'])} strings, {len(doc['chat'])} chats, "
              f"{len(disagreements)} id lists where transformers' GGUF rebuild differs (kept as transformers_ids)")
        for d in disagreements[:20]:
            print("  differs:", json.dumps(d, ensure_ascii=False)[:300])



if __name__ == "__main__":
    main()
