"""The Jinja chat-template renderer (`pasada template`) against Python's jinja2 configured as
Hugging Face transformers' apply_chat_template configures it (tests/tools/render_templates.py).

(a) every template of the corpus of real chat templates (../shared/chat-templates from the
    repository root) with every conversation of tests/fixtures/templates/conversations.json:
    where jinja2 renders, pasada's prompt is byte-identical; where jinja2 raises (a template
    rejecting a conversation through raise_exception, or an operation Python refuses), pasada
    fails too, with exit status 1 and one line on stderr;
(b) a sample of the corpus under AddressSanitizer + UBSan;
(c) -m MODEL: the template and the BOS/EOS text come from the GGUF file (read here with the
    gguf package), rendered the same as jinja2 renders them;
(d) untrusted templates (endless recursion, huge ranges, output that doubles, deep nesting,
    unterminated tags, bytes that are not UTF-8) fail quickly with one line, also under ASan;
(e) usage errors exit 2; --help describes the options;
(f) run --chat and chat render with the model's own Jinja template by default (the prompt
    jinja2 renders), with a template file by --chat-template-file, and fail on one line when
    the template raises or does not parse."""
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest
from conftest import CHAT_TEMPLATES

from conftest import ROOT, FIXTURES

sys.path.insert(0, str(ROOT / "tests" / "tools"))
import render_templates  # noqa: E402

CORPUS = CHAT_TEMPLATES
CONVERSATIONS = FIXTURES / "templates" / "conversations.json"
NOW = "1767225600"  # 2026-01-01 00:00:00 UTC, for strftime_now
ENV = dict(os.environ, PASADA_TEMPLATE_NOW=NOW, TZ="UTC")
SAN_MARKS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")


def corpus():
    if not CORPUS.is_dir():
        return []
    return sorted(CORPUS.glob("*.jinja"))


def fixture():
    with open(CONVERSATIONS, encoding="utf-8") as f:
        return json.load(f)


def case_files(tmp_path, fx, conv):
    """The conversation file and the pasada arguments of one fixture conversation."""
    body = {k: v for k, v in conv.items() if k not in ("name", "use_tools", "add_generation_prompt")}
    path = tmp_path / f"{conv['name']}.json"
    path.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
    args = ["-f", str(path)]
    tools = fx["tools"] if conv.get("use_tools") else None
    if tools is not None:
        tools_path = tmp_path / "tools.json"
        tools_path.write_text(json.dumps(tools, ensure_ascii=False), encoding="utf-8")
        args += ["--tools", str(tools_path)]
    agp = conv.get("add_generation_prompt", True)
    if not agp:
        args.append("--no-generation-prompt")
    return body, tools, agp, args


def reference(template, body, tools, agp):
    """(text, None) when jinja2 renders, (None, error) when it raises."""
    os.environ["PASADA_TEMPLATE_NOW"] = NOW
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        return render_templates.render_compiled(template, body, tools, agp), None
    except Exception as e:  # any template error: the case must fail in pasada too
        return None, f"{type(e).__name__}: {e}"


def run(binary, args, timeout=60):
    return subprocess.run([str(binary), "template", *args], capture_output=True, env=ENV,
                          stdin=subprocess.DEVNULL, timeout=timeout)


def check_case(binary, path, fx, conv, tmp_path, compiled):
    body, tools, agp, args = case_files(tmp_path, fx, conv)
    ref, err = reference(compiled, body, tools, agp)
    res = run(binary, ["--chat-template-file", str(path), *args])
    stderr = res.stderr.decode("utf-8", "replace")
    assert not any(m in stderr for m in SAN_MARKS), stderr
    where = f"{path.name} / {conv['name']}"
    if ref is not None:
        assert res.returncode == 0, f"{where}: jinja2 renders, pasada fails: {stderr}"
        out = res.stdout.decode("utf-8")
        if out != ref:
            import difflib
            diff = "".join(list(difflib.unified_diff(ref.splitlines(True), out.splitlines(True),
                                                     "jinja2", "pasada", n=1))[:40])
            pytest.fail(f"{where}: output differs from jinja2's\n{diff}")
        return "identical"
    assert res.returncode == 1, f"{where}: jinja2 raises ({err}), pasada exits {res.returncode}"
    lines = stderr.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("pasada: error: "), f"{where}: {stderr!r}"
    return "both fail"


RESULTS = {}


def corpus_params():
    """The templates, or one skipped case saying where the corpus was looked for."""
    return corpus() or [pytest.param(None, marks=pytest.mark.skip(
        reason=f"no template corpus at {CORPUS} (../shared/chat-templates from the repository root)"))]


@pytest.mark.parametrize("path", corpus_params(), ids=lambda p: p.stem if p else "corpus")
def test_corpus(pasada_bin, path, tmp_path):
    fx = fixture()
    try:
        compiled = render_templates.compile_template(path.read_text(encoding="utf-8"))
    except Exception:
        compiled = None
    for conv in fx["conversations"]:
        if compiled is None:  # jinja2 cannot even compile it: pasada must refuse it
            _, _, _, args = case_files(tmp_path, fx, conv)
            res = run(pasada_bin, ["--chat-template-file", str(path), *args])
            assert res.returncode == 1 and res.stderr.count(b"\n") == 1, res.stderr
            RESULTS[(path.name, conv["name"])] = "both fail"
            continue
        RESULTS[(path.name, conv["name"])] = check_case(pasada_bin, path, fx, conv, tmp_path, compiled)


def test_corpus_summary(pasada_bin):
    """Runs after the corpus: how many pairs were identical (printed with -s or -rA)."""
    if not corpus():
        pytest.skip(f"no template corpus at {CORPUS} (the shared chat-templates folder)")
    fx = fixture()
    total = len(corpus()) * len(fx["conversations"])
    if len(RESULTS) != total:
        pytest.skip("run with the whole corpus (test_corpus) for the summary")
    same = sum(1 for v in RESULTS.values() if v == "identical")
    fail = sum(1 for v in RESULTS.values() if v == "both fail")
    print(f"\ntemplates: {same} of {total} (template, conversation) pairs byte-identical to jinja2, "
          f"{fail} rejected by both")
    assert same + fail == total


@pytest.mark.skipif(not corpus(), reason="no template corpus (../shared/chat-templates)")
def test_corpus_asan(asan_build_dir, tmp_path):
    """The conversations with tools and tool calls over every template, under ASan + UBSan."""
    fx = fixture()
    sample = [c for c in fx["conversations"] if c["name"] in ("tools_offered", "parallel_tool_calls",
                                                              "content_parts")]
    for path in corpus():
        try:
            compiled = render_templates.compile_template(path.read_text(encoding="utf-8"))
        except Exception:
            continue
        for conv in sample:
            check_case(asan_build_dir / "pasada", path, fx, conv, tmp_path, compiled)


def gguf_template(model):
    """The model's chat template and BOS/EOS token text, read with the gguf package."""
    gguf = pytest.importorskip("gguf")
    r = gguf.GGUFReader(str(model))

    def field(name):
        f = r.fields.get(name)
        return None if f is None else f.parts[f.data[0]]

    tmpl = field("tokenizer.chat_template")
    assert tmpl is not None, f"{model} has no chat template"
    tmpl = bytes(tmpl).decode("utf-8")
    toks = r.fields["tokenizer.ggml.tokens"]

    def token(key):
        i = field(key)
        return "" if i is None else bytes(toks.parts[toks.data[int(i[0])]]).decode("utf-8")

    return tmpl, token("tokenizer.ggml.bos_token_id"), token("tokenizer.ggml.eos_token_id")


def test_model_template(pasada_bin, smollm2, tmp_path):
    model = smollm2
    tmpl, bos, eos = gguf_template(model)
    compiled = render_templates.compile_template(tmpl)
    fx = fixture()
    checked = 0
    for conv in fx["conversations"]:
        body, tools, agp, args = case_files(tmp_path, fx, conv)
        with_tokens = {"bos_token": bos, "eos_token": eos, **body}
        ref, err = reference(compiled, with_tokens, tools, agp)
        res = run(pasada_bin, ["-m", str(model), *args])
        if ref is None:
            assert res.returncode == 1 and res.stderr.count(b"\n") == 1, (conv["name"], err, res.stderr)
        else:
            assert res.returncode == 0, res.stderr
            assert res.stdout.decode("utf-8") == ref, conv["name"]
            checked += 1
    assert checked >= 3


def test_model_without_template(pasada_bin, gemma3, tmp_path):
    """Gemma 3 270M's file has no tokenizer.chat_template: a clear one-line error."""
    conv = tmp_path / "c.json"
    conv.write_text('{"messages": [{"role": "user", "content": "hi"}]}')
    res = run(pasada_bin, ["-m", str(gemma3), "-f", str(conv)])
    assert res.returncode == 1 and res.stderr.count(b"\n") == 1, res.stderr
    assert b"no chat template" in res.stderr


MALICIOUS = {
    "recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "huge_range": "{% for i in range(10**9) %}x{% endfor %}",
    "nested_loops": "{% for a in range(100000) %}{% for b in range(100000) %}{{ a }}{% endfor %}"
                    "{% endfor %}",
    "doubling": "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
                "{% endfor %}{{ ns.s }}",
    "repeat": "{{ 'x' * 10**12 }}",
    "deep_source": "{% if true %}" * 10000 + "x" + "{% endif %}" * 10000,
    "deep_expression": "{{ " + "(" * 10000 + "1" + ")" * 10000 + " }}",
    "unterminated_tag": "{% for m in messages %}{{ m.content ",
    "unterminated_block": "{% if true %}never closed",
    "unterminated_comment": "{# no end",
    "garbage": b"\xff\xfe{{ \x80\x81 }}\x00",
    "endless_loop_controls": "{% for i in range(100000) %}{% for j in range(100000) %}{% continue %}"
                             "{% endfor %}{% endfor %}",
}


@pytest.mark.parametrize("name", sorted(MALICIOUS))
def test_malicious_templates(pasada_bin, asan_build_dir, name, tmp_path):
    src = MALICIOUS[name]
    path = tmp_path / "t.jinja"
    path.write_bytes(src if isinstance(src, bytes) else src.encode())
    conv = tmp_path / "c.json"
    conv.write_text('{"messages": [{"role": "user", "content": "hi"}]}')
    for binary, limit in ((pasada_bin, 10), (asan_build_dir / "pasada", 60)):
        t0 = time.monotonic()
        res = run(binary, ["--chat-template-file", str(path), "-f", str(conv)], timeout=limit * 3)
        took = time.monotonic() - t0
        stderr = res.stderr.decode("utf-8", "replace")
        assert not any(m in stderr for m in SAN_MARKS), stderr
        assert res.returncode == 1, (name, res.returncode, stderr[-2000:])
        assert stderr.count("\n") == 1 and stderr.startswith("pasada: error: "), stderr
        assert took < limit, f"{name}: {took:.1f} s"


def test_usage(pasada_bin, tmp_path):
    res = subprocess.run([str(pasada_bin), "template", "--help"], capture_output=True, text=True)
    assert res.returncode == 0
    for opt in ("-m, --model", "--chat-template-file", "-f, --file", "--tools", "--no-generation-prompt",
                "PASADA_TEMPLATE_NOW"):
        assert opt in res.stdout
    conv = tmp_path / "c.json"
    conv.write_text('{"messages": []}')
    tmpl = tmp_path / "t.jinja"
    tmpl.write_text("{{ messages | length }}")
    for args in ([], ["-f", str(conv)], ["--chat-template-file", str(tmpl)], ["--bogus"],
                 ["--chat-template-file", str(tmpl), "-m", "x.gguf", "-f", str(conv)]):
        res = run(pasada_bin, args)
        assert res.returncode == 2, (args, res.stderr)
    res = run(pasada_bin, ["--chat-template-file", str(tmpl), "-f", str(conv)])
    assert res.returncode == 0 and res.stdout == b"0"
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    res = run(pasada_bin, ["--chat-template-file", str(tmpl), "-f", str(bad)])
    assert res.returncode == 1 and res.stderr.count(b"\n") == 1
    syntax = tmp_path / "syntax.jinja"
    syntax.write_text("line one\n{% for x in y %}\n{% endif %}\n")
    res = run(pasada_bin, ["--chat-template-file", str(syntax), "-f", str(conv)])
    assert res.returncode == 1 and b"template line 3" in res.stderr, res.stderr


def test_variables(pasada_bin, tmp_path):
    """Defaults and overrides of the variables the command passes, as transformers passes them."""
    tmpl = tmp_path / "t.jinja"
    tmpl.write_text("{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|"
                    "{{ bos_token }}|{{ eos_token }}|{{ extra }}|{{ messages[0].content }}|"
                    "{{ strftime_now('%Y-%m-%d') }}|{{ (tools or [{}])[0].x }}|{{ 1500.0 }}")
    conv = tmp_path / "c.json"
    conv.write_text('{"messages": [{"role": "user", "content": "hé"}], "bos_token": "<s>", '
                    '"extra": 1500.0, "add_generation_prompt": false}')
    res = run(pasada_bin, ["--chat-template-file", str(tmpl), "-f", str(conv)])
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode() == "True|True|True|<s>||1500.0|hé|2026-01-01||1500.0"
    tools = tmp_path / "tools.json"
    tools.write_text('[{"x": 1}]')
    res = run(pasada_bin, ["--chat-template-file", str(tmpl), "-f", str(conv), "--tools", str(tools),
                           "--no-generation-prompt"])
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode() == "False|True|False|<s>||1500.0|hé|2026-01-01|1|1500.0"


# ---- run --chat and chat with Jinja templates ----

STATS_RE = re.compile(r"prompt (\d+) tokens")


def pasada(binary, *args, input=None):
    kw = dict(input=input) if input is not None else dict(stdin=subprocess.DEVNULL)
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, env=ENV, timeout=300, **kw)


def prompt_tokens(binary, model, text):
    res = pasada(binary, "tokenize", "-m", model, "-p", text)
    assert res.returncode == 0, res.stderr
    return len(res.stdout.split())


def test_run_chat_uses_the_models_template(pasada_bin, smollm2, tmp_path):
    """run --chat renders the prompt with the model's own Jinja template: the same prompt
    (token count, greedy answer) as jinja2's rendering fed as a plain prompt."""
    tmpl, bos, eos = gguf_template(smollm2)
    msgs = {"messages": [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": "Name a colour."}], "bos_token": bos, "eos_token": eos}
    ref = render_templates.render(tmpl, msgs)
    chat = pasada(pasada_bin, "run", "-m", smollm2, "--chat", "--system", "Be brief.", "-p", "Name a colour.",
                  "-n", "8", "--temp", "0", "--verbose")
    assert chat.returncode == 0, chat.stderr
    err = chat.stderr.decode()
    assert "chat template the model's own (Jinja)" in err
    plain = pasada(pasada_bin, "run", "-m", smollm2, "-p", ref, "-n", "8", "--temp", "0")
    assert plain.returncode == 0, plain.stderr
    assert chat.stdout == plain.stdout
    assert int(STATS_RE.search(err).group(1)) == prompt_tokens(pasada_bin, smollm2, ref)


def test_run_chat_template_file(pasada_bin, smollm2, tmp_path):
    path = tmp_path / "t.jinja"
    path.write_text("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | upper }}<|im_end|>\n"
                    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    res = pasada(pasada_bin, "run", "-m", smollm2, "--chat-template-file", path, "-p", "hi there", "-n", "4",
                 "--temp", "0", "--verbose")
    assert res.returncode == 0, res.stderr
    err = res.stderr.decode()
    assert f"chat template {path} (Jinja)" in err
    want = "<|im_start|>user\nHI THERE<|im_end|>\n<|im_start|>assistant\n"
    assert int(STATS_RE.search(err).group(1)) == prompt_tokens(pasada_bin, smollm2, want)
    # both kinds of template named: a usage error; a template that raises: one line, exit 1
    res = pasada(pasada_bin, "run", "-m", smollm2, "--chat-template", "chatml", "--chat-template-file", path,
                 "-p", "x")
    assert res.returncode == 2, res.stderr
    path.write_text("line 1\n{{ raise_exception('no system messages here') if messages }}")
    res = pasada(pasada_bin, "run", "-m", smollm2, "--chat-template-file", path, "-p", "x", "-n", "1")
    assert res.returncode == 1 and res.stderr.count(b"\n") == 1, res.stderr
    assert b"template line 2: no system messages here" in res.stderr
    path.write_text("{% if %}")
    res = pasada(pasada_bin, "chat", "-m", smollm2, "--chat-template-file", path, input=b"hi\n")
    assert res.returncode == 1 and b"template line 1" in res.stderr, res.stderr


def test_chat_with_the_models_template(pasada_bin, smollm2):
    """chat keeps its cache across turns with the Jinja template as with a built-in one."""
    res = pasada(pasada_bin, "chat", "-m", smollm2, "--temp", "0", "-n", "6", "--verbose",
                 input=b"Hi\nWhat did I say?\n")
    assert res.returncode == 0, res.stderr
    err = res.stderr.decode()
    assert "chat template the model's own (Jinja)" in err
    turns = re.findall(r"turn (\d+) \| prefilled (\d+) tokens \(reused (\d+) cached\)", err)
    assert len(turns) == 2 and int(turns[1][2]) > 0, err
    builtin = pasada(pasada_bin, "chat", "-m", smollm2, "--temp", "0", "-n", "6", "--chat-template", "chatml",
                     input=b"Hi\nWhat did I say?\n")
    assert builtin.returncode == 0 and builtin.stdout == res.stdout
