"""The tokenizer against the reference ids in tests/fixtures/tokenizer (written by
scripts/make-tokenizer-fixtures.py from the original tokenizers), through tok_tool.

(a) every fixture string encodes to the same ids, with special-token text kept as text and
    with it parsed as special tokens; also with the pre-tokenizers of other families (GPT-2,
    Llama 3, Qwen 2) run on SmolLM2's vocabulary;
(b) decoding gives the original string back wherever the reference tokenizer does, and always
    the reference's decoding;
(c) the chat templates render the fixture conversations exactly, and the rendered prompt
    tokenizes to the reference ids with a single BOS;
(d) the streaming detokenizer never emits a broken UTF-8 character, even when characters are
    split across tokens or a sequence stops in the middle of one, and its chunks add up to
    the whole decoding (checked against token bytes read from the GGUF by a small reader
    here, decoded with Python's "replace" rule);
(e) 100 KB of text tokenizes in well under a second, also for pathological inputs;
(f) the same ids under AddressSanitizer + UBSan."""
import json
import os
import pathlib
import struct
import subprocess

import pytest

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tokenizer"
MODELS = {"smollm2": "smollm2.json", "gemma3": "gemma3.json"}
SAN_MARKS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")


def load_fixture(model):
    """The fixture with its omitted fields filled in (see scripts/make-tokenizer-fixtures.py)."""
    fx = json.loads((FIXTURES / MODELS[model]).read_text())
    for c in fx["cases"]:
        c.setdefault("ids_special", c["ids"])
        c.setdefault("decoded", c["text"])
    return fx


def serve(tool, model_path, requests, env=None, timeout=600, args=()):
    """Runs tok_tool's request loop once for all requests; returns the parsed answers."""
    if not tool.exists():
        pytest.fail(f"{tool} is missing: run scripts/test (it builds what tests need)")
    data = "".join(r + "\n" for r in requests).encode()
    res = subprocess.run([str(tool), str(model_path), "serve", *args], input=data,
                         capture_output=True, timeout=timeout, env=env)
    err = res.stderr.decode(errors="replace")
    assert res.returncode == 0, err[-3000:]
    assert not any(m in err for m in SAN_MARKS), err[-3000:]
    out = res.stdout.decode("utf-8")  # strict: one broken character anywhere fails here
    lines = out.split("\n")[:-1]
    assert len(lines) == len(requests), out[-2000:]
    answers = [json.loads(line) for line in lines]
    for a in answers:
        assert not (isinstance(a, dict) and "error" in a), a
    return answers


def enc(text):
    return "enc " + json.dumps(text)


@pytest.fixture(params=list(MODELS))
def model(request):
    name = request.param
    return name, request.getfixturevalue(name), load_fixture(name)


def test_fixture_size():
    for name in MODELS:
        fx = load_fixture(name)
        assert len(fx["cases"]) >= 250
        assert sum(any(m in c["text"] for m in ("<|im_start|>", "<start_of_turn>", "<bos>", "<|endoftext|>"))
                   for c in fx["cases"]) >= 4
        assert len(fx["chat"]) >= 3


def test_info(build_dir, smollm2, gemma3):
    for path, want in [
        (smollm2, {"model": "gpt2", "pre": "smollm", "n_vocab": 49152, "bos": 1, "eos": 2,
                   "add_bos": False, "chat": "chatml",
                   "default_system": "You are a helpful AI assistant named SmolLM, trained by Hugging Face"}),
        (gemma3, {"model": "llama", "pre": "default", "n_vocab": 262144, "bos": 2, "eos": 1,
                  "add_bos": True, "chat": "gemma", "default_system": ""}),
    ]:
        res = subprocess.run([str(build_dir / "tok_tool"), str(path), "info"], capture_output=True,
                             text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        info = json.loads(res.stdout)
        for k, v in want.items():
            assert info[k] == v, (path.name, k, info[k])
        assert info["eos"] in info["eog"]
        assert info["max_output"] <= 256  # PASADA_DETOK_PIECE_MAX holds any push
    assert 2 in json.loads(subprocess.run([str(build_dir / "tok_tool"), str(smollm2), "info"],
                                          capture_output=True, text=True).stdout)["eog"]  # <|im_end|>
    assert 106 in json.loads(subprocess.run([str(build_dir / "tok_tool"), str(gemma3), "info"],
                                            capture_output=True, text=True).stdout)["eog"]  # <end_of_turn>


def test_encode_identical(build_dir, model):
    name, path, fx = model
    cases = fx["cases"]
    requests = [enc(c["text"]) for c in cases] + ["encs " + json.dumps(c["text"]) for c in cases]
    answers = serve(build_dir / "tok_tool", path, requests)
    plain, special = answers[:len(cases)], answers[len(cases):]
    bad = [(c["text"][:60], c["ids"][:20], got[:20]) for c, got in zip(cases, plain) if got != c["ids"]]
    bad_s = [(c["text"][:60], c["ids_special"][:20], got[:20])
             for c, got in zip(cases, special) if got != c["ids_special"]]
    print(f"{name}: {len(cases) - len(bad)}/{len(cases)} identical (plain), "
          f"{len(cases) - len(bad_s)}/{len(cases)} identical (parse_special)")
    assert not bad, f"{len(bad)} of {len(cases)} differ, e.g. {bad[:5]}"
    assert not bad_s, f"{len(bad_s)} of {len(cases)} differ with parse_special, e.g. {bad_s[:5]}"


@pytest.mark.parametrize("pre", ["gpt2", "llama-bpe", "qwen2"])
def test_other_pretokenizers(build_dir, smollm2, pre):
    """The regexes of other families (Llama 3, Qwen 2, GPT-2), on SmolLM2's real vocabulary,
    against Hugging Face `tokenizers` running the same regexes (Oniguruma there, PCRE2 here)."""
    fx = load_fixture("smollm2")
    assert pre in fx["pre_variants"]
    cases = fx["cases"]
    answers = serve(build_dir / "tok_tool", smollm2, [enc(c["text"]) for c in cases], args=("--pre", pre))
    bad = [(c["text"][:60], c.get("ids_pre_" + pre, c["ids"])[:16], got[:16])
           for c, got in zip(cases, answers) if got != c.get("ids_pre_" + pre, c["ids"])]
    differs = sum("ids_pre_" + pre in c for c in cases)
    print(f"{pre}: {len(cases) - len(bad)}/{len(cases)} identical ({differs} differ from smollm's)")
    assert differs > 0  # the variant really changes something
    assert not bad, f"{len(bad)} of {len(cases)} differ, e.g. {bad[:5]}"


def test_decode_round_trip(build_dir, model):
    name, path, fx = model
    cases = fx["cases"]
    answers = serve(build_dir / "tok_tool", path,
                    ["dec " + " ".join(map(str, c["ids"])) for c in cases]
                    + ["decs " + " ".join(map(str, c["ids_special"])) for c in cases])
    plain, special = answers[:len(cases)], answers[len(cases):]
    round_trips = 0
    for c, got, got_s in zip(cases, plain, special):
        assert got == c["decoded"], (c["text"][:80], got[:80])
        if c["decoded"] == c["text"]:
            round_trips += 1
            assert got == c["text"]
            assert got_s == c["text"], (c["text"][:80], got_s[:80])  # specials rendered back
    assert round_trips >= len(cases) - 5, round_trips


def test_chat_templates(build_dir, model):
    name, path, fx = model
    requests = []
    for chat in fx["chat"]:
        parts = [json.dumps(x) for m in chat["messages"] for x in (m["role"], m["content"])]
        requests.append(f"chat {int(chat['add_generation_prompt'])} " + " ".join(parts))
    answers = serve(build_dir / "tok_tool", path, requests)
    for chat, got in zip(fx["chat"], answers):
        # The template's leading BOS is left to the tokenizer (add_special): rendered text
        # lacks it, and the ids have exactly one.
        assert fx["bos_text"] + got["text"] == chat["text"], (got["text"], chat["text"])
        assert got["ids"] == chat["ids"], (chat["text"], got["ids"], chat["ids"])


# ---- streaming: token bytes straight from the GGUF, read by a small reader of our own ----

GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


TOKEN_KEYS = ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.model")


def gguf_token_texts(path, keys=TOKEN_KEYS):
    """The metadata values of `keys` (by default tokenizer.ggml.tokens, token_type and
    model; strings as bytes), read without the gguf package (which takes half a minute
    on a 262k vocabulary)."""
    data = pathlib.Path(path).read_bytes()
    pos = 8  # magic, version

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("Q")
        s = data[pos:pos + n]
        pos += n
        return s

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("I"), take("Q")
            if et in GGUF_SCALARS:
                fmt = "<%d%s" % (n, GGUF_SCALARS[et])
                nonlocal pos
                v = struct.unpack_from(fmt, data, pos)
                pos += struct.calcsize(fmt)
                return list(v)
            return [value(et) for _ in range(n)]
        return take(GGUF_SCALARS[t])

    take("Q")  # tensors
    n_kv = take("Q")
    out = {}
    for _ in range(n_kv):
        key = string().decode()
        v = value(take("I"))
        if key in keys:
            out[key] = v
    return out


def token_bytes(path):
    kv = gguf_token_texts(path)
    texts, types = kv["tokenizer.ggml.tokens"], kv["tokenizer.ggml.token_type"]
    if kv["tokenizer.ggml.model"] == b"gpt2":
        printable = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE]
        extra = [b for b in range(256) if b not in printable]
        rev = {chr(b): b for b in printable}
        rev.update({chr(256 + i): b for i, b in enumerate(extra)})
        return [b"" if ty == 3 else bytes(rev[c] for c in t.decode()) if ty == 1 else t
                for t, ty in zip(texts, types)]
    pieces = []
    for t, ty in zip(texts, types):
        if ty == 6:
            pieces.append(bytes([int(t[3:5], 16)]))
        elif ty in (2, 3):
            pieces.append(b"")
        else:
            pieces.append(t.replace("\u2581".encode(), b" "))
    return pieces


def test_streaming_detok(build_dir, model):
    name, path, fx = model
    pieces = token_bytes(path)
    multi = [c for c in fx["cases"] if any(ord(ch) > 127 for ch in c["text"]) and len(c["ids"]) < 400]
    requests, expected = [], []
    for c in multi:
        ids = c["ids"]
        # The whole sequence, then every prefix: a prefix may stop inside a character.
        for k in [len(ids)] + list(range(1, len(ids))):
            requests.append("stream " + " ".join(map(str, ids[:k])))
            expected.append(b"".join(pieces[i] for i in ids[:k]).decode("utf-8", "replace"))
    answers = serve(build_dir / "tok_tool", path, requests)
    held_back = cut_short = 0
    for req, chunks, want in zip(requests, answers, expected):
        assert "".join(chunks) == want, (req[:80], chunks, want)
        # A chunk that is empty while its token has bytes: a character was held back.
        ids = list(map(int, req.split()[1:]))
        held_back += any(ch == "" and pieces[i] for ch, i in zip(chunks, ids))
        cut_short += chunks[-1] == "\ufffd"
    print(f"{name}: {len(requests)} streams, {held_back} held a split character back, "
          f"{cut_short} ended inside a character")
    assert held_back > 20 and cut_short > 5
    # Whole sequences decode like the reference.
    whole = {tuple(map(int, r.split()[1:])): "".join(a) for r, a in zip(requests, answers)}
    for c in multi:
        assert whole[tuple(c["ids"])] == c["decoded"]


def test_speed(build_dir, model):
    name, path, fx = model
    mixed, n = [], 0
    while n < 100_000:
        for c in fx["cases"]:
            mixed.append(c["text"])
            n += len(c["text"].encode())
    texts = {
        "mixed": " ".join(mixed)[:100_000],
        "one long word": "a" * 100_000,
        "spaces": " " * 100_000,
        "digits": "1" * 100_000,
        "newlines": "\n" * 100_000,
        "emoji": "\U0001F600" * 25_000,
        "cjk": "中文字符" * 8_000,
        "specials": "<|im_start|><start_of_turn><bos>" * 3_000,
    }
    answers = serve(build_dir / "tok_tool", path, ["time 2 " + json.dumps(t) for t in texts.values()])
    for (label, text), a in zip(texts.items(), answers):
        print(f"{name} {label}: {len(text.encode())} bytes -> {a['tokens']} tokens in {a['seconds'] * 1e3:.1f} ms")
        assert a["seconds"] < 0.5, (label, a)


def test_under_sanitizers(asan_build_dir, model):
    name, path, fx = model
    cases = fx["cases"]
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1")
    requests = [enc(c["text"]) for c in cases] + ["encs " + json.dumps(c["text"]) for c in cases]
    requests += ["stream " + " ".join(map(str, c["ids"])) for c in cases]
    answers = serve(asan_build_dir / "tok_tool", path, requests, env=env, timeout=1200)
    assert answers[:len(cases)] == [c["ids"] for c in cases]
    assert answers[len(cases):2 * len(cases)] == [c["ids_special"] for c in cases]
