"""Every pre-tokenizer pasada knows (src/tokenizer/pretok.c) against the
patterns of the tokenizers that define them, run by another engine: the
`regex` package (the Python port of the engine tiktoken and Hugging Face's
Python tooling use) splits the same texts with the same sequence of
patterns, each piece of a level split again by the next, matches and the
text between them both kept ("isolated", as Hugging Face's Split); pasada's
pieces (tok_tool `pre`, PCRE2) must be identical. The texts: llama.cpp's
tokenizer test texts (scripts/fetch-vocabs; skipped without them) and tricky
strings of our own (case changes inside words, combining marks and
titlecase letters, long digit runs, CJK with kana, full-width forms,
contractions in both cases, whitespace runs before text and at the end).

The patterns here are the published ones (each tokenizer's tokenizer.json or
tiktoken's definition); the vocabulary corpus test (test_vocab_corpus.py)
checks the ids end to end where a vocabulary with reference cases exists."""
import json
import os
import pathlib
import subprocess
import unicodedata

import pytest

regex = pytest.importorskip("regex")

from conftest import BUILD  # noqa: E402

CACHE = pathlib.Path(os.environ.get("PASADA_CACHE", pathlib.Path.home() / ".cache" / "pasada"))
VOCABS = pathlib.Path(os.environ.get("PASADA_VOCABS_DIR", CACHE / "vocabs"))
FIXTURE_VOCAB = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tiny-llama-valid.gguf"

CONTRACTIONS = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
GPT2_WORDS = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
LLAMA3 = CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN2 = CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
QWEN35 = CONTRACTIONS + (r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
                         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
UPPER, LOWER = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]", r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]"
TEKKEN = (rf"[^\r\n\p{{L}}\p{{N}}]?{UPPER}*{LOWER}+|[^\r\n\p{{L}}\p{{N}}]?{UPPER}+{LOWER}*"
          r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT4O = (rf"[^\r\n\p{{L}}\p{{N}}]?{UPPER}*{LOWER}+{CONTRACTIONS}?"
         rf"|[^\r\n\p{{L}}\p{{N}}]?{UPPER}+{LOWER}*{CONTRACTIONS}?"
         r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
DEEPSEEK_LLM_LETTERS = None  # read from pretok.c below: a 200-range class of letters
DEEPSEEK3_WORDS = (r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
                   r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

KIMI_UP = r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]"
KIMI_LO = r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]"
# tokenization_kimi.py's pattern: class intersections (&&), the regex
# package's version 1 syntax
KIMI_K2 = (r"(?V1)[\p{Han}]+|[^\r\n\p{L}\p{N}]?" + KIMI_UP + "*" + KIMI_LO + "+" + CONTRACTIONS + "?"
           r"|[^\r\n\p{L}\p{N}]?" + KIMI_UP + "+" + KIMI_LO + "*" + CONTRACTIONS + "?"
           r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def afmoe_digits(piece):
    """AFMoE's digit rule, as its tokenizer describes it: each run of
    numeric characters (Unicode N) cut into threes from its end, the first
    group taking what is left (1 or 2) when the length is no multiple of 3;
    the text between runs stays whole."""
    out, i = [], 0
    while i < len(piece):
        j = i
        numeric = unicodedata.category(piece[i]).startswith("N")
        while j < len(piece) and unicodedata.category(piece[j]).startswith("N") == numeric:
            j += 1
        if not numeric:
            out.append(piece[i:j])
        else:
            k = i + (j - i) % 3
            if k > i:
                out.append(piece[i:k])
            out += [piece[a:a + 3] for a in range(k, j, 3)]
        i = j
    return out


PRETOKENIZERS = {
    "gpt2": [GPT2],
    "llama-bpe": [LLAMA3],
    "qwen2": [QWEN2],
    "smollm": [r"\p{N}", GPT2],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", GPT2_WORDS, r"[0-9][0-9][0-9]"],
    "deepseek-llm": [r"[\r\n]", "LETTERS", r"\s?[!-/:-~！-／：-～‘-‟　-。]+", r"\s+$",
                     r"[一-龥ࠀ-一가-퟿]+", r"\p{N}+"],
    "deepseek-coder": [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", r"[一-龥ࠀ-一가-퟿]+", r"\p{N}"],
    "deepseek-v3": [r"\p{N}{1,3}", r"[一-龥぀-ゟ゠-ヿ]+", DEEPSEEK3_WORDS],
    "qwen35": [QWEN35],
    "tekken": [TEKKEN],
    "gpt-4o": [GPT4O],
    "jais-2": [CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
               r"|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)"
               r"|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}"],
    "ufakzeka": [r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "seed-coder": [CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+"
                   r"|\s+(?!\S)|\s+"],
    "bailingmoe": [r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*"
                   r"|\s*[\r\n]|\s+(?!\S)|\s+"],
    "minicpm5": [r"\p{N}{1,3}", CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "bloom": [r" ?[^(\s|.,!?…。，、।۔،)]+"],
    "viking": [r" ?[^(\s|.,!?…。，、।۔،)]+", r"\p{N}"],
    # tokenizer.json's \b is Oniguruma's (Hugging Face's Split engine): word
    # characters are letters, marks, numbers and connector punctuation, not
    # the regex package's (or PCRE2's) \w; after a digit, \b is "no word
    # character next" (checked against the tokenizers library: "1²3" has no
    # boundary after the 1)
    "tiny_aya": [r"\d{1,3}(?=(?:\d{3})*(?![\p{L}\p{M}\p{N}\p{Pc}]))", GPT4O],
    "laguna": [r"[^\n]+|[\n]+", QWEN2],
    "exaone-moe": [CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}"
                   r"| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+"],
    "spark2_5": [r"\p{N}{1,3}", r"[一-龥぀-ゟ゠-ヿ]+",
                 r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
                 r"| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+", r"\p{N}"],
    "youtu": [r"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
              rf"[^\r\n\p{{L}}\p{{N}}]?{UPPER}*{LOWER}+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
              rf"|[^\r\n\p{{L}}\p{{N}}]?{UPPER}+{LOWER}*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
              r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "granite-embed-multi-97m": [GPT4O],
    "kimi-k2": [KIMI_K2],
    "afmoe": [afmoe_digits, r"[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+", DEEPSEEK3_WORDS],
    "superbpe": [r"\p{N}+", r"(?=(\d{3})+(?!\d))"],
    "gemma4": [r"[^\n]+|[\n]+"],
    # Hugging Face's Whitespace pre-tokenizer (the "whitespace" model drops
    # the gaps, whitespace, after this split)
    "whitespace": [r"\w+|[^\w\s]+"],
    "chameleon": [r"<sentinel:[0-9]+>", r"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", r"([\t\n]|    |  )", r"\p{N}",
                  r"[\p{P}!-/:-@\[-`{-~]", GPT2_WORDS],
}
# Other tokenizer.ggml.pre names of the same families (llama.cpp's mapping):
# each must split exactly as the family's name above.
ALIASES = {
    "llama-bpe": ["llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano",
                  "glm4", "glm5", "dbrx", "smaug-bpe", "chatglm-bpe"],
    "qwen2": ["deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "megrez", "hunyuan", "solar-open", "grok-2"],
    "smollm": ["starcoder", "refact", "codeshell", "command-r", "exaone", "minerva-7b", "mellum2"],
    "gpt2": ["default", "gpt-2", "phi-2", "mpt", "olmo", "jais", "roberta-bpe", "gigachat", "jina-es", "jina-de",
             "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code", "a.x-4.0", "mellum", "modern-bert",
             "trillion", "granite-docling", "exaone4"],
    "bloom": ["poro-chat", "gpt3-finnish"],
    "deepseek-v3": ["hunyuan-dense", "joyai-llm", "hy_v4"],
    "gpt-4o": ["llama4", "kanana2", "talkie", "minimax-m2"],
    "tiny_aya": ["cohere2moe"],
    "bailingmoe": ["bailingmoe2", "llada-moe"],
    "gemma4": ["granite-embed-multi-311m", "sarvam-moe"],
}
OWN_TEXTS = [
    "HelloWorld camelCaseXMLParser iPhone McDonald's WORLDWide",
    "I'M DON'T you'RE we've THEY'LL she'd It's",
    "ǅungla ǈj x̄ȳ e\u0301cole A\u030a Ω\u0301 ﬁne",
    "1234567890 12 345 6789 ١٢٣ ٤٥",
    "日本語のテキスト カタカナ 한국어 中文字符 ＡＢＣ１２３",
    "   leading spaces\n\n\ttabs\r\n  trailing   ",
    "a/b/c\n//comment\n$x+=y<=z^w~v|u`t",
    "emoji 🦙🦙 and 👍🏽 mixed!!! ... ？！",
    "don't stop\u00a0believing\u2003em space",
    "1 22 333 4444 55555 666666 x7777777y ab12cd ²³⁴5 ١٢٣٤",
    "Kimi中文Mixed 漢字かなカナ한글 ไทย ລາວ ខ្មែរ မြန်မာ",
    "<sentinel:12> IMGIMGABCZ IMGIMGJZ a  b    c\td",
    "snake_case a\u203fb x\u200dy z\u200cw 1²3½ Ⅻ ↀx Ⓐⓑ a.b,c;d!? a\u00a0b\u3000c\u0085d\u200be\u2028f",
    "1\u0301 2\u203f 3² 12\u0903 x1\u200d2 1234_ 5678\u0301 1_000",
    "",
]


def split_like_pasada(patterns, text):
    pieces = [text]
    for pattern in patterns:
        if callable(pattern):
            pieces = [p for piece in pieces for p in pattern(piece)]
            continue
        compiled = regex.compile(pattern)
        out = []
        for piece in pieces:
            gap = 0
            for m in compiled.finditer(piece):
                if m.end() == m.start():  # a match of zero width: a cut
                    if gap < m.start() < len(piece):
                        out.append(piece[gap:m.start()])
                        gap = m.start()
                    continue
                if m.start() > gap:
                    out.append(piece[gap:m.start()])
                out.append(m.group())
                gap = m.end()
            if gap < len(piece):
                out.append(piece[gap:])
        pieces = out
    return pieces


def deepseek_letters():
    """The DeepSeek LLM letter class, as pretok.c spells it (a long literal)."""
    src = (pathlib.Path(__file__).resolve().parents[2] / "src" / "tokenizer" / "pretok.c").read_text("utf-8")
    line = next(ln for ln in src.splitlines() if ln.startswith("#define RE_DEEPSEEK_LLM_LETTERS "))
    return json.loads(line.split(" ", 2)[2])


def texts():
    found = list(OWN_TEXTS)
    for inp in sorted(VOCABS.glob("ggml-vocab-*.gguf.inp")):
        found += inp.read_text("utf-8").split("\n__ggml_vocab_test__\n")
    return list(dict.fromkeys(found))


def pasada_pieces(name, todo):
    exe = BUILD / "tok_tool"
    if not exe.exists():
        pytest.fail(f"{exe} is missing: build the project first")
    reqs = "".join("pre " + json.dumps(t) + "\n" for t in todo).encode()
    res = subprocess.run([str(exe), str(FIXTURE_VOCAB), "serve", "--pre", name], input=reqs,
                         capture_output=True, timeout=300)
    assert res.returncode == 0, res.stderr.decode(errors="replace")[-2000:]
    got = [json.loads(line) for line in res.stdout.decode("utf-8").split("\n")[:-1]]
    assert len(got) == len(todo)
    return got


@pytest.mark.parametrize("name", list(PRETOKENIZERS))
def test_pretokenizer_matches_regex_engine(name):
    patterns = [deepseek_letters() if p == "LETTERS" else p for p in PRETOKENIZERS[name]]
    todo = texts()
    got = pasada_pieces(name, todo)
    wrong = [(t, g) for t, g in zip(todo, got) if g != split_like_pasada(patterns, t)]
    assert not wrong, (f"{name}: {len(wrong)} of {len(todo)} texts split differently; first {wrong[0][0]!r}: "
                       f"pasada {wrong[0][1]} regex {split_like_pasada(patterns, wrong[0][0])}")


@pytest.mark.parametrize("family", list(ALIASES))
def test_aliases_split_as_their_family(family):
    todo = texts()
    want = pasada_pieces(family, todo)
    for alias in ALIASES[family]:
        assert pasada_pieces(alias, todo) == want, f"{alias} does not split as {family}"
