"""The tokenizer against llama.cpp's vocabulary corpus: each
ggml-vocab-*.gguf of the corpus (scripts/fetch-vocabs: the vocabulary-only
GGUF files of llama.cpp's models/ and their reference cases, ids written by
the original Hugging Face tokenizers) whose tokenizer pasada supports must
encode every case to exactly the reference ids (special-token text parsed as
specials, no BOS/EOS: how the references were made), release and ASan builds.

SUPPORTED lists the vocabularies that must load (a file there that pasada
refuses fails the test); any other vocabulary must be refused with one line
naming what is not supported (never half-loaded). Without the corpus the test
fails when PASADA_REQUIRE_VOCABS=1 (scripts/test sets it) and skips otherwise."""
import json
import os
import pathlib
import struct
import subprocess

import pytest

from conftest import ASAN_BUILD, BUILD

CACHE = pathlib.Path(os.environ.get("PASADA_CACHE", pathlib.Path.home() / ".cache" / "pasada"))
VOCABS = pathlib.Path(os.environ.get("PASADA_VOCABS_DIR", CACHE / "vocabs"))
SEPARATOR = "\n__ggml_vocab_test__\n"
# by tokenizer.ggml.pre (BPE) or the file's name (SPM)
SUPPORTED = ["bert-bge", "command-r", "deepseek-coder", "deepseek-llm", "falcon", "gemma-4", "gpt-2", "llama-bpe",
             "llama-spm", "mpt", "phi-3", "qwen2", "qwen35", "refact", "starcoder"]
SAN_MARKS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")


def corpus():
    files = sorted(VOCABS.glob("ggml-vocab-*.gguf"))
    if not files:
        if os.environ.get("PASADA_REQUIRE_VOCABS") == "1":
            pytest.fail(f"no vocabularies in {VOCABS}: run scripts/fetch-vocabs")
        pytest.skip(f"no vocabularies in {VOCABS} (scripts/fetch-vocabs)")
    return files


def cases(vocab):
    """The reference cases of a vocabulary: [(text, ids)], or [] when it has none."""
    inp, out = vocab.with_name(vocab.name + ".inp"), vocab.with_name(vocab.name + ".out")
    if not inp.exists() or not out.exists():
        return []
    texts = inp.read_text(encoding="utf-8").split(SEPARATOR)
    last = SEPARATOR.rstrip("\n")
    if texts and texts[-1].endswith(last):
        texts[-1] = texts[-1][: -len(last)]
    ids = out.read_text(encoding="utf-8").split("\n")
    assert len(ids) >= len(texts), f"{out.name}: {len(ids)} lines for {len(texts)} texts"
    return [(t, [int(x) for x in ids[i].split()]) for i, t in enumerate(texts)]


def tool(kind):
    path = (BUILD if kind == "release" else ASAN_BUILD) / "tok_tool"
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/test (it builds what tests need)")
    return path


@pytest.mark.parametrize("kind", ["release", "asan"])
def test_vocab_corpus(kind):
    exe = tool(kind)
    checked, refused = [], []
    for vocab in corpus():
        name = vocab.name[len("ggml-vocab-"):-len(".gguf")]
        info = subprocess.run([str(exe), str(vocab), "info"], capture_output=True, text=True, timeout=120)
        assert not any(m in info.stderr for m in SAN_MARKS), info.stderr[-3000:]
        if info.returncode != 0:
            lines = info.stderr.splitlines()
            assert name not in SUPPORTED, f"{vocab.name} refused: {info.stderr.strip()}"
            assert len(lines) == 1 and "not supported" in lines[0], f"{vocab.name}: {info.stderr}"
            refused.append(name)
            continue
        pre = json.loads(info.stdout).get("pre")
        todo = cases(vocab)
        if not todo:
            continue
        assert name in SUPPORTED or pre in SUPPORTED, f"{vocab.name} (pre {pre}) loads: add it to SUPPORTED"
        reqs = "".join("encs " + json.dumps(t) + "\n" for t, _ in todo).encode()
        res = subprocess.run([str(exe), str(vocab), "serve"], input=reqs, capture_output=True, timeout=600)
        err = res.stderr.decode(errors="replace")
        assert res.returncode == 0 and not any(m in err for m in SAN_MARKS), err[-3000:]
        got = [json.loads(line) for line in res.stdout.decode("utf-8").split("\n")[:-1]]
        assert len(got) == len(todo), f"{vocab.name}: {len(got)} answers to {len(todo)} requests"
        wrong = [(t, want, ids) for (t, want), ids in zip(todo, got) if ids != want]
        assert not wrong, f"{vocab.name} (pre {pre}): {len(wrong)} of {len(todo)} cases differ, " \
                          f"first: {wrong[0][0]!r}: expected {wrong[0][1]}, got {wrong[0][2]}"
        checked.append(name)
    missing = [n for n in SUPPORTED if n not in checked]
    assert not missing, f"no reference cases checked for {missing} (in {VOCABS})"


def with_strings(src, dst, strings):
    """Writes a copy of the vocabulary-only GGUF `src` (no tensors) to `dst`
    with the string values of the keys in `strings` replaced (a key the file
    lacks is added), read and written without the gguf package (which takes
    half a minute on a 262k vocabulary)."""
    data = src.read_bytes()
    pos = 8

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, data, pos)[0]
        pos += struct.calcsize("<" + fmt)
        return v

    def skip(t):
        nonlocal pos
        if t == 8:
            n = take("Q")
            pos += n
        elif t == 9:
            et, n = take("I"), take("Q")
            if et in SCALAR_SIZE:
                pos += SCALAR_SIZE[et] * n
            else:
                for _ in range(n):
                    skip(et)
        else:
            pos += SCALAR_SIZE[t]

    def kv(key, s):
        k, v = key.encode(), s.encode()
        return struct.pack("<Q", len(k)) + k + struct.pack("<IQ", 8, len(v)) + v

    assert take("Q") == 0, f"{src.name} has tensors"
    n_kv = take("Q")
    body, todo = [], dict(strings)
    for _ in range(n_kv):
        start = pos
        n = take("Q")
        key = data[pos:pos + n].decode()
        pos += n
        skip(take("I"))
        body.append(kv(key, todo.pop(key)) if key in todo else data[start:pos])
    body += [kv(k, s) for k, s in todo.items()]
    dst.write_bytes(data[:8] + struct.pack("<QQ", 0, len(body)) + b"".join(body))


SCALAR_SIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def test_granite_embedding_311m_is_gemma4s_tokenizer(tmp_path):
    """llama.cpp runs tokenizer.ggml.pre granite-embed-multi-311m (Granite
    Embedding 311M multilingual, a byte-level-named vocabulary) as Gemma 4's
    SentencePiece-style BPE: the Gemma 4 vocabulary named so encodes every
    reference case of Gemma 4 to its ids."""
    vocab = VOCABS / "ggml-vocab-gemma-4.gguf"
    if not vocab.exists():
        corpus()  # fails or skips as the corpus test does
        pytest.skip(f"{vocab} is missing")
    renamed = tmp_path / "granite.gguf"
    with_strings(vocab, renamed, {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "granite-embed-multi-311m"})
    info = subprocess.run([str(tool("release")), str(renamed), "info"], capture_output=True, text=True, timeout=120)
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout).get("pre") == "granite-embed-multi-311m"
    todo = cases(vocab)
    assert todo
    reqs = "".join("encs " + json.dumps(t) + "\n" for t, _ in todo).encode()
    res = subprocess.run([str(tool("release")), str(renamed), "serve"], input=reqs, capture_output=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr.decode(errors="replace")[-2000:]
    got = [json.loads(line) for line in res.stdout.decode("utf-8").split("\n")[:-1]]
    wrong = [(t, want, ids) for (t, want), ids in zip(todo, got) if ids != want]
    assert len(got) == len(todo) and not wrong, wrong[:1]
