"""Runs the libFuzzer targets for about 10 seconds each (PASADA_FUZZ_SECONDS) and fails on any
crash, sanitizer report, leak or timeout they find:
- fuzz_gguf (tests/fuzz/fuzz_gguf.c): the GGUF reader, seeded with the
  malformed corpus and the valid tiny model;
- fuzz_safetensors (tests/fuzz/fuzz_safetensors.c): the safetensors reader
  and its JSON checks, seeded with the safetensors files of the Hugging Face
  folders (tests/fixtures/hf, tests/fixtures/malformed-hf);
- fuzz_model (tests/fuzz/fuzz_model.c): a model's whole way from its file
  to logits (tokenizer, hyper-parameters, weights, a forward pass), with
  edits to the headers of the tiny fixture models;
- fuzz_openai (tests/fuzz/fuzz_openai.c): the server's request bodies,
  seeded with valid and invalid ones for each endpoint;
- fuzz_output (tests/fuzz/fuzz_output.c): the parser of generated text into
  content, reasoning and tool calls, seeded with the assistant turns the
  corpus's chat templates render (tests/fixtures/output/cases.json) and
  with the inputs it has found (tests/fixtures/output/fuzz);
- fuzz_template (tests/fuzz/fuzz_template.c): the Jinja chat-template engine
  (a template, then optionally its JSON variables), seeded with the corpus of
  real chat templates (../shared/chat-templates), a few of every construct
  and the inputs it has found (tests/fixtures/templates/fuzz).
- fuzz_grammar (tests/fuzz/fuzz_grammar.c): GBNF grammars and JSON schemas
  compiled for a vocabulary and followed byte by byte, seeded with a few
  grammars and the schema cases (tests/fixtures/schemas/cases.json).
The fuzz build lives in PASADA_FUZZ_BUILD_DIR (default build-fuzz/, made by
scripts/build fuzz); a missing binary is a failure, not a skip."""
import json
import os
import pathlib
import shutil
import subprocess

import pytest
from conftest import CHAT_TEMPLATES

from conftest import FIXTURES, ROOT

FUZZ_BUILD = pathlib.Path(os.environ.get("PASADA_FUZZ_BUILD_DIR", ROOT / "build-fuzz")).expanduser()
SECONDS = int(os.environ.get("PASADA_FUZZ_SECONDS", "10"))


def run_fuzzer(name, corpus, tmp_path, max_len):
    fuzzer = FUZZ_BUILD / name
    if not fuzzer.exists():
        pytest.fail(f"{fuzzer} is missing: run scripts/build fuzz (clang, -DPASADA_FUZZ=ON)")
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    res = subprocess.run(
        [str(fuzzer), f"-max_total_time={SECONDS}", f"-max_len={max_len}", "-timeout=10",
         "-rss_limit_mb=2048", "-print_final_stats=1", f"-artifact_prefix={artifacts}/",
         str(corpus)],
        capture_output=True, text=True, errors="replace", timeout=SECONDS + 120, cwd=tmp_path,
        env=dict(os.environ, ASAN_OPTIONS="detect_leaks=1", PASADA_FUZZ_FIXTURES=str(FIXTURES)))
    crashes = sorted(p.name for p in artifacts.iterdir())
    assert res.returncode == 0 and not crashes, (
        f"{name} exit {res.returncode}, artifacts {crashes} (reproduce: {fuzzer} FILE)\n"
        f"{res.stderr[-4000:]}")
    assert "Done" in res.stderr and "stat::number_of_executed_units" in res.stderr, res.stderr[-2000:]


def test_fuzz_gguf(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for seed in [*sorted((FIXTURES / "malformed").glob("*.gguf")), FIXTURES / "tiny-llama-valid.gguf"]:
        shutil.copy(seed, corpus / seed.name)
    assert len(list(corpus.iterdir())) >= 41
    run_fuzzer("fuzz_gguf", corpus, tmp_path, 16384)


def test_fuzz_safetensors(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    seeds = sorted((FIXTURES / "malformed-hf").glob("*/*.safetensors")) + sorted((FIXTURES / "hf").glob("*/*.safetensors"))
    for seed in seeds:
        shutil.copy(seed, corpus / f"{seed.parent.name}-{seed.name}")
    assert len(list(corpus.iterdir())) >= 40
    run_fuzzer("fuzz_safetensors", corpus, tmp_path, 16384)


def test_fuzz_model(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for k in range(4):  # each tiny model as it is, then cut inside its header and its data
        (corpus / f"model{k}").write_bytes(bytes([k]))
        (corpus / f"cut{k}").write_bytes(bytes([0x80 | k, 0x00, 0x10, 0x00]))
        (corpus / f"cut-data{k}").write_bytes(bytes([0x80 | k, 0x00, 0x00, 0x04]))
    run_fuzzer("fuzz_model", corpus, tmp_path, 4096)


def test_fuzz_openai(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    user = [{"role": "user", "content": "hi"}]
    bodies = [
        (0x00, {"messages": [{"role": "system", "content": "be brief"}, *user], "max_tokens": 4}),
        (0x04, {"model": "x", "stream": True, "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]},
                             {"role": "assistant", "content": "c"}, *user],
                "temperature": 0.5, "top_p": 0.9, "top_k": 5, "min_p": 0.1, "seed": 7,
                "stop": ["x", "yz"], "presence_penalty": 0.5, "frequency_penalty": -0.5,
                "logprobs": True, "top_logprobs": 3, "n": 1, "user": "u",
                "max_completion_tokens": 8}),
        (0x08, {"messages": user}),
        (0x0C, {"messages": user}),
        (0x01, {"prompt": "hello world", "max_tokens": 3, "stop": "o"}),
        (0x01, {"prompt": [1, 2, 3], "max_tokens": 2, "logprobs": 2}),
        (0x01, {"prompt": "x", "max_tokens": -1, "temperature": "hot"}),
        (0x02, {"content": "hello world"}),
        (0x02, {"text": "a b c", "add_special": True}),
        (0x03, {"tokens": [1, 2, 3, 4]}),
        (0x03, {"tokens": [-1]}),
        (0x10, {"messages": user}),  # bit 4: the byte-level BPE tokenizer
        (0x11, {"prompt": "h\u00e9llo w\u00f6rld \u65e5\u672c", "max_tokens": 2}),
        (0x12, {"content": "  tabs\tand\nnew lines 123 4567"}),
        (0x13, {"tokens": [0, 1, 2, 250, 251]}),
        (0x20, {"input": "hello world", "model": "m"}),  # bit 5: /v1/embeddings
        (0x30, {"input": ["a b", "c"], "encoding_format": "base64"}),
        (0x20, {"input": [[1, 2], [3]], "dimensions": 8}),
        (0x60, {"input": [1, 2, 3], "dimensions": 3}),  # bit 6: a Matryoshka model
        (0x20, {"input": "", "dimensions": 0, "encoding_format": "hex"}),
    ]
    for i, (head, body) in enumerate(bodies):
        (corpus / f"body{i:02d}").write_bytes(bytes([head]) + json.dumps(body).encode())
    (corpus / "broken").write_bytes(b"\x00{")
    run_fuzzer("fuzz_openai", corpus, tmp_path, 4096)


def test_fuzz_output(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    doc = json.loads((FIXTURES / "output" / "cases.json").read_text())
    # byte 0: the family (its index in srv_out_format), byte 1: tools,
    # in_reasoning and <think> markers, byte 2: where the streaming check cuts
    names = ["plain", "hermes", "llama3", "mistral", "gpt-oss", "deepseek", "qwen3-coder",
             "granite", "functionary", "command-r", "gemma", "kimi", "glm", "minimax",
             "deepseek-dsml", "functionary-v3.2", "firefunction", "command-r-plus", "minimax-m1",
             "apriel", "nemotron", "solar", "lfm2", "gigachat", "minicpm", "atem"]
    k = 0
    for t in doc["templates"]:
        for c in t["cases"]:
            flags = (1 if c["tools"] else 0) | (2 if c["in_reasoning"] else 0) | 4
            (corpus / f"case{k:04d}").write_bytes(
                bytes([names.index(t["format"]), flags, 128 + k % 120]) + c["text"].encode())
            k += 1
    assert k > 400
    # inputs that once broke the contract, in the fuzzer's own format: every
    # seed runs first, so each is checked on every run
    for p in sorted((FIXTURES / "output" / "fuzz").iterdir()):
        shutil.copy(p, corpus / f"found-{p.name}")
    run_fuzzer("fuzz_output", corpus, tmp_path, 4096)


def test_fuzz_template(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    templates = CHAT_TEMPLATES
    for path in sorted(templates.glob("*.jinja")) if templates.is_dir() else []:
        shutil.copy(path, corpus / path.name)
    snippets = [
        "{% for m in messages %}{{ m.role }}: {{ m.content | trim }}{% if not loop.last %}\n{% endif %}"
        "{% endfor %}",
        "{% macro f(x, y=2) %}{{ x ~ y }}{{ caller() if caller is defined }}{% endmacro %}"
        "{% call f(1) %}c{% endcall %}{{ f('a', y=[1, 2][1:]) }}",
        "{% set ns = namespace(n=0) %}{% for t in tools | selectattr('type', 'eq', 'function') %}"
        "{% set ns.n = ns.n + 1 %}{{ t.function | tojson(indent=2) }}{% endfor %}{{ ns.n }}",
        "{{ '%s-%05.1f' % ('a', 2.5) }}{{ '{:>4}'.format(1) }}{{ d | dictsort }}{{ 7 // 2 ** 2 }}",
        "{%- raw -%} {{ x }} {%- endraw %}{# c #}  {%+ if true -%} y {%- endif %}",
        "{{ strftime_now('%d %b %Y') }}\x00{\"d\": {\"b\": 1, \"a\": [1.5, null, true]}}",
    ]
    for i, s in enumerate(snippets):
        (corpus / f"snippet{i}").write_bytes(s.encode())  # after a NUL: the variables
    assert len(list(corpus.iterdir())) >= len(snippets)
    for p in sorted((FIXTURES / "templates" / "fuzz").iterdir()):  # inputs it has found
        shutil.copy(p, corpus / f"found-{p.name}")
    run_fuzzer("fuzz_template", corpus, tmp_path, 20000)


def test_fuzz_grammar(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    # byte 0: bit 0 a JSON schema (else GBNF), bit 1 the vocabulary; then
    # the grammar, a NUL, and text to follow
    grammars = [
        'root ::= value\nvalue ::= "{" ws (str ":" ws value ("," ws str ":" ws value)*)? "}" | str | [0-9]+\n'
        'str ::= "\\"" [^"\\\\]* "\\""\nws ::= [ \\t\\n]{0,4}\n',
        'root ::= "a" [b-d]* ("x" | "yz"){1,3} . [^\\n\\u00e9]?\n',
        'root ::= x x\nx ::= "(" x ")" | ""\n',
        'root ::= ([ぁ-ゟ] | "\\U0001F600")+ # comment\n',
        'root ::= "a" <[1]> [a-z]* (<[2]> | <s>)? <[7]>\n',  # token references
    ]
    for i, g in enumerate(grammars):
        for v in range(2):
            (corpus / f"g{i}{v}").write_bytes(bytes([2 * v]) + g.encode() + b"\0" + b'{"a": [1, (x)]}')
    for i, c in enumerate(json.loads((FIXTURES / "schemas" / "cases.json").read_text())):
        inst = json.dumps(c["valid"][0]) if c.get("valid") else "{}"
        (corpus / f"s{i}").write_bytes(bytes([1 | 2 * (i % 2)]) + json.dumps(c["schema"]).encode() + b"\0"
                                       + inst.encode())
    run_fuzzer("fuzz_grammar", corpus, tmp_path, 4096)
