"""The `pasada` command line end to end: help and exit codes, one-line
errors, `run` (greedy and seeded reproducibility, chat templates, stats,
context limits), `tokenize` (special tokens, prompt sources, vocabulary-only
files), `info`, and `chat` (the KV cache kept across turns: the second turn
prefills only its new tokens)."""
import os
import re
import subprocess

import pytest

from conftest import FIXTURES

TINY_LLAMA = FIXTURES / "tiny" / "llama.gguf"  # has no chat template
MISSING = "/nonexistent/dir/model.gguf"

STATS_RE = re.compile(r"^pasada: load ([\d.]+) s \| prompt (\d+) tokens, ([\d.]+) tok/s \| "
                      r"generated (\d+) tokens, ([\d.]+) tok/s", re.M)
TURN_RE = re.compile(r"^pasada: turn (\d+) \| prefilled (\d+) tokens \(reused (\d+) cached\), "
                     r"[\d.]+ tok/s \| generated (\d+) tokens", re.M)
SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "SUMMARY: ")


def cli(binary, *args, input=None, timeout=600, env=None):
    """Runs pasada; stdin is empty (not a terminal) unless `input` is given."""
    kw = dict(input=input) if input is not None else dict(stdin=subprocess.DEVNULL)
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, timeout=timeout,
                          env=env, **kw)


def text(b):
    return b.decode("utf-8", errors="replace")


def ids_of(res):
    assert res.returncode == 0, text(res.stderr)
    lines = text(res.stdout).splitlines()
    assert len(lines) == 1, res.stdout
    return [int(x) for x in lines[0].split()] if lines[0] else []


def assert_runtime_error(res, *must_contain):
    err = text(res.stderr)
    assert res.returncode == 1, f"exit {res.returncode}: {err}"
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), f"expected one line: {err!r}"
    assert lines[0].startswith("pasada: error: "), err
    for s in must_contain:
        assert str(s) in lines[0], f"{s!r} not in {lines[0]!r}"


def assert_usage_error(res, cmd):
    err = text(res.stderr)
    assert res.returncode == 2, f"exit {res.returncode}: {err}"
    lines = err.splitlines()
    assert len(lines) == 2, f"expected a reason and a hint: {err!r}"
    assert lines[0].startswith("pasada"), err
    hint = f"try 'pasada {cmd} --help'" if cmd else "try 'pasada --help'"
    assert lines[1] == hint, err


# ---- help, version, exit codes ----

COMMANDS = ["run", "chat", "info", "tokenize"]


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["help"], *[[c, "--help"] for c in COMMANDS],
                                  *[[c, "-h"] for c in COMMANDS]])
def test_help_exits_0(pasada_bin, args):
    res = cli(pasada_bin, *args)
    assert res.returncode == 0, text(res.stderr)
    assert text(res.stdout).startswith("usage: pasada"), res.stdout
    assert res.stderr == b""


def test_version(pasada_bin):
    res = cli(pasada_bin, "--version")
    assert res.returncode == 0
    assert re.fullmatch(r"pasada \d+\.\d+\.\d+\n", text(res.stdout))


def test_run_help_lists_the_options(pasada_bin):
    out = text(cli(pasada_bin, "run", "--help").stdout)
    for opt in ["-m", "-p", "-f", "-n", "--temp", "--top-k", "--top-p", "--min-p",
                "--repeat-penalty", "--presence-penalty", "--frequency-penalty", "--seed", "-t",
                "-c", "--chat", "--chat-template", "--system", "--no-stats"]:
        assert re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", out), f"{opt} not in run --help"


OPTION_VALUES = {
    "-n": "4", "--n-predict": "4", "-t": "1", "--threads": "1", "-c": "64", "--ctx-size": "64",
    "--temp": "0.5", "--top-k": "5", "--top-p": "0.9", "--min-p": "0.1",
    "--repeat-penalty": "1.1", "--repeat-last-n": "32", "--presence-penalty": "0.5",
    "--frequency-penalty": "0.5", "--seed": "7", "--chat-template": "chatml",
    "--system": "be brief", "-p": "x", "--prompt": "x", "--kv-type": "f32", "--device": "cpu",
    "--gpu-layers": "4", "--draft-max": "4", "--lookup-ngram": "2", "--quantize": "Q8_0",
}
# Options that are valid only beside another: what test_help_tells_the_truth adds.
OPTION_NEEDS = {"--gpu-layers": ["--device", "vulkan"]}
FLAGS = {"--chat", "--no-stats", "--verbose", "--raw", "--vocab-only", "--lookup", "--mtp"}


@pytest.mark.parametrize("cmd", COMMANDS)
def test_help_tells_the_truth(pasada_bin, cmd, tmp_path):
    """Every option a command's --help lists is accepted with a valid value:
    parsing succeeds and the command fails only on the missing model (exit 1,
    not the usage error's 2)."""
    prompt_file = tmp_path / "prompt.txt"
    prompt_file.write_text("x")
    grammar_file = tmp_path / "g.gbnf"
    grammar_file.write_text('root ::= "x"')
    schema_file = tmp_path / "s.json"
    schema_file.write_text('{"type": "object"}')
    values = dict(OPTION_VALUES, **{"-f": prompt_file, "--file": prompt_file,
                                    "--chat-template-file": prompt_file, "--draft": prompt_file,
                                    "--grammar": grammar_file, "--json-schema": schema_file})
    help_text = text(cli(pasada_bin, cmd, "--help").stdout)
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-z])(?![\w-])", help_text))
    assert options, help_text
    for opt in sorted(options):
        if opt in ("-h", "--help"):
            continue
        assert opt in values or opt in FLAGS or opt in ("-m", "--model"), \
            f"{cmd} --help lists {opt}: add a value for it to this test"
        arg = [opt] if opt in FLAGS else [opt, values.get(opt, MISSING)]
        arg += OPTION_NEEDS.get(opt, [])
        if cmd == "info":
            args = ["info", *arg] if opt in ("-m", "--model") else ["info", *arg, MISSING]
        else:
            args = [cmd, "-m", MISSING, *arg]
            if cmd in ("run", "tokenize") and opt not in ("-p", "--prompt", "-f", "--file"):
                args += ["-p", "x"]
        res = cli(pasada_bin, *args)
        assert res.returncode == 1, f"pasada {' '.join(map(str, args))}: {text(res.stderr)}"
        assert_runtime_error(res, MISSING)


SERVE_VALUES = {
    "--host": "127.0.0.1", "--port": "0", "--parallel": "2", "--ctx": "64", "--threads": "1",
    "--device": "cpu", "--gpu-layers": "4", "--prefill-chunk": "32", "--kv-block-size": "32",
    "--kv-blocks": "16", "--kv-memory": "8", "--kv-type": "q8", "--max-queue": "3",
    "--max-body": "2048", "--max-connections": "8", "--api-key": "k", "--cors-origin": "*",
    "--responses-store": "4", "--alias": "m", "--chat-template": "chatml",
    "--shutdown-grace": "1", "--drain-delay": "1", "--kv-events": "tcp://127.0.0.1:1",
    "--kv-events-topic": "t", "--kv-events-replay": "tcp://127.0.0.1:2", "--draft": "draft.gguf", "--draft-max": "4", "--spec-max-seqs": "2",
    "--pooling": "mean", "--quantize": "q8_0",
}
SERVE_FLAGS = ("-v", "--verbose", "--lookup", "--mtp", "--embeddings", "--matryoshka")
SERVE_NEEDS = {"--gpu-layers": ["--device", "vulkan"], "--kv-events-topic": ["--kv-events", "tcp://127.0.0.1:1"],
               "--kv-events-replay": ["--kv-events", "tcp://127.0.0.1:1"]}


def test_serve_help_tells_the_truth(pasada_bin, tmp_path):
    """Every option `pasada serve --help` lists is accepted with a valid
    value: the server starts listening and fails only on the missing model
    (exit 1), never with the usage error's 2."""
    template = tmp_path / "t.jinja"
    template.write_text("{{ messages[0].content }}")
    values = dict(SERVE_VALUES, **{"--chat-template-file": template})
    help_text = text(cli(pasada_bin, "serve", "--help").stdout)
    options = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-z])(?![\w-])", help_text))
    assert "--kv-events" in options and "--drain-delay" in options, help_text
    for opt in sorted(options - {"-h", "--help", "-m", "--model"}):
        assert opt in values or opt in SERVE_FLAGS, \
            f"serve --help lists {opt}: add a value for it to this test"
        arg = [opt] if opt in SERVE_FLAGS else [opt, values[opt]]
        args = ["serve", "-m", MISSING, *([] if opt == "--port" else ["--port", "0"]), *arg,
                *SERVE_NEEDS.get(opt, [])]
        res = cli(pasada_bin, *args)
        assert res.returncode == 1, f"pasada {' '.join(map(str, args))}: {text(res.stderr)}"
        assert MISSING in text(res.stderr), text(res.stderr)


@pytest.mark.parametrize("args,cmd", [
    ([], None),
    (["bogus"], None),
    (["--bogus"], None),
    (["run"], "run"),
    (["run", "-m"], "run"),
    (["run", "-m", "{smol}", "-p", "x", "--bogus"], "run"),
    (["run", "-m", "{smol}", "-p", "x", "-z"], "run"),
    (["run", "-m", "{smol}", "-p", "a", "-f", "b"], "run"),
    (["run", "-m", "{smol}", "-p", "x", "--temp", "hot"], "run"),
    (["run", "-m", "{smol}", "-p", "x", "--temp", "-1"], "run"),
    (["run", "-m", "{smol}", "-p", "x", "-n", "-2"], "run"),
    (["run", "-m", "{smol}", "-p", "x", "-n", "12abc"], "run"),
    (["run", "-m", "{smol}", "-p", "x", "--top-p", "1.5"], "run"),
    (["run", "-m", "{smol}", "-p", "x", "--seed", "abc"], "run"),
    (["run", "-m", "{smol}", "-p", "x", "--chat-template", "nope"], "run"),
    (["run", "-m", "{smol}", "-p", "x", "extra"], "run"),
    (["run", "-m", "{smol}", "-p", "x", "--no-stats=1"], "run"),
    (["run", "-m", "{smol}", "-p", "x", "--kv-type", "q4"], "run"),
    (["chat", "-m", "{smol}", "--kv-type", "F16"], "chat"),
    (["chat"], "chat"),
    (["chat", "-m", "{smol}", "--top-k", "-3"], "chat"),
    (["chat", "-m", "{smol}", "stray"], "chat"),
    (["info"], "info"),
    (["info", "a.gguf", "b.gguf"], "info"),
    (["info", "--bogus", "a.gguf"], "info"),
    (["tokenize", "-p", "x"], "tokenize"),
    (["tokenize", "-m", "{smol}", "-p", "x", "--raw=yes"], "tokenize"),
    (["tokenize", "-m", "{smol}", "-p", "a", "-f", "b"], "tokenize"),
])
def test_usage_errors_exit_2(pasada_bin, smollm2, args, cmd):
    args = [a.format(smol=smollm2) for a in args]
    assert_usage_error(cli(pasada_bin, *args), cmd)


@pytest.mark.parametrize("args", [
    ["run", "-m", MISSING, "-p", "hi"],
    ["chat", "-m", MISSING],
    ["info", MISSING],
    ["tokenize", "-m", MISSING, "-p", "hi"],
])
def test_missing_model_is_one_line(pasada_bin, args):
    assert_runtime_error(cli(pasada_bin, *args), MISSING)


def test_missing_prompt_file_is_one_line(pasada_bin, smollm2):
    assert_runtime_error(cli(pasada_bin, "run", "-m", smollm2, "-f", "/nonexistent/prompt.txt"),
                         "/nonexistent/prompt.txt")


# ---- run ----

def run_text(pasada_bin, model, *args, input=None):
    res = cli(pasada_bin, "run", "-m", model, *args, input=input)
    assert res.returncode == 0, text(res.stderr)
    return text(res.stdout), text(res.stderr)


def test_run_greedy_is_deterministic(pasada_bin, smollm2):
    args = ["-p", "The three primary colors are", "-n", "16", "--temp", "0", "--no-stats"]
    a, err = run_text(pasada_bin, smollm2, *args)
    b, _ = run_text(pasada_bin, smollm2, *args)
    assert a.strip(), "no text generated"
    assert a == b
    assert err == ""


@pytest.mark.parametrize("model", ["smollm2", "gemma3"])
def test_prefetch_settings_keep_the_output(pasada_bin, model, request):
    """PASADA_PREFETCH / _X4 / _START / _BATCH only change how weights are asked for: the same text
    whatever they are (SmolLM2: Q4_1 in 16-row groups; Gemma 3: Q4_K and Q6_K in 4-row
    groups, Q8_0); a value that is not a byte count is ignored with a one-line warning."""
    args = ["run", "-m", request.getfixturevalue(model), "-p", "The three primary colors are",
            "-n", "16", "--temp", "0", "--no-stats"]
    base = cli(pasada_bin, *args)
    assert base.returncode == 0, text(base.stderr)
    for pf, x4, start, batch in [("0", "0", "0", "0"), ("16384", "0", "0", "4096"),
                                 ("0", "16384", "65536", "1048576"), ("4096", "1048576", "1048576", "64")]:
        env = dict(os.environ, PASADA_PREFETCH=pf, PASADA_PREFETCH_X4=x4, PASADA_PREFETCH_START=start,
                   PASADA_PREFETCH_BATCH=batch)
        res = cli(pasada_bin, *args, env=env)
        assert res.returncode == 0, text(res.stderr)
        assert res.stdout == base.stdout, (pf, x4, start, batch)
        assert text(res.stderr) == ""
    env = dict(os.environ, PASADA_PREFETCH="lots", PASADA_PREFETCH_X4="1048577",
               PASADA_PREFETCH_START="-1", PASADA_PREFETCH_BATCH="4k")
    res = cli(pasada_bin, *args, env=env)
    assert res.returncode == 0, text(res.stderr)
    assert res.stdout == base.stdout
    warn = text(res.stderr).splitlines()
    assert len(warn) == 4, warn
    assert "PASADA_PREFETCH=lots ignored" in warn[0]
    assert "PASADA_PREFETCH_X4=1048577 ignored" in warn[1]
    assert "PASADA_PREFETCH_START=-1 ignored" in warn[2]
    assert "PASADA_PREFETCH_BATCH=4k ignored" in warn[3]


def test_run_kv_types(pasada_bin, smollm2):
    """Every KV cache type generates; each is deterministic; they agree for the first tokens."""
    args = ["-p", "The three primary colors are", "-n", "24", "--temp", "0", "--no-stats"]
    f16, _ = run_text(pasada_bin, smollm2, *args)
    f16b, _ = run_text(pasada_bin, smollm2, *args, "--kv-type", "f16")
    f32, _ = run_text(pasada_bin, smollm2, *args, "--kv-type", "f32")
    f32b, _ = run_text(pasada_bin, smollm2, *args, "--kv-type", "f32")
    q8, _ = run_text(pasada_bin, smollm2, *args, "--kv-type", "q8")
    q8b, _ = run_text(pasada_bin, smollm2, *args, "--kv-type", "q8")
    assert f16.strip() and f32.strip() and q8.strip()
    assert f16 == f16b, "f16 is not the default"
    assert f32 == f32b
    assert q8 == q8b
    assert q8.split()[:2] == f32.split()[:2], (q8, f32)
    # rounding K and V to halves perturbs the logits slightly: the greedy texts
    # agree at least at their start
    assert f16.split()[:2] == f32.split()[:2], (f16, f32)


def test_run_seed_reproduces_sampling(pasada_bin, smollm2):
    base = ["-p", "Once upon a time", "-n", "12", "--temp", "1.5", "--top-k", "0", "--top-p",
            "1", "--min-p", "0", "--no-stats"]
    a, _ = run_text(pasada_bin, smollm2, *base, "--seed", "1234")
    b, _ = run_text(pasada_bin, smollm2, *base, "--seed", "1234")
    assert a.strip() and a == b
    others = {run_text(pasada_bin, smollm2, *base, "--seed", s)[0] for s in ("1", "2")}
    assert len(others | {a}) > 1, "different seeds all gave the same text"


@pytest.mark.parametrize("model", ["smollm2", "gemma3"])
def test_run_chat_answers(pasada_bin, request, model):
    path = request.getfixturevalue(model)
    out, err = run_text(pasada_bin, path, "--chat", "-p", "What is the capital of France?",
                        "-n", "24", "--temp", "0")
    assert out.strip(), f"empty answer; stderr: {err}"
    assert "<|im_start|>" not in out and "<start_of_turn>" not in out
    m = STATS_RE.search(err)
    assert m and 0 < int(m.group(4)) <= 24, err


def test_run_chat_stops_at_end_of_turn(pasada_bin, smollm2):
    out, err = run_text(pasada_bin, smollm2, "--chat", "-p",
                        "What is the capital city of France? Answer in one word.",
                        "-n", "-1", "-c", "512", "--temp", "0")
    m = STATS_RE.search(err)
    assert m, err
    assert int(m.group(4)) < 400, "generation did not stop at the end of the turn"
    assert "context full" not in err
    assert "Paris" in out


def test_run_chat_without_template_says_what_to_do(pasada_bin):
    res = cli(pasada_bin, "run", "-m", TINY_LLAMA, "--chat", "-p", "hi", "-n", "2")
    assert_runtime_error(res, "--chat-template", TINY_LLAMA)
    res = cli(pasada_bin, "run", "-m", TINY_LLAMA, "--chat-template", "chatml", "-p", "hi",
              "-n", "2")
    assert res.returncode == 0, text(res.stderr)


def test_run_stats_line(pasada_bin, smollm2):
    prompt = "The quick brown fox jumps over the lazy dog."
    out, err = run_text(pasada_bin, smollm2, "-p", prompt, "-n", "8", "--temp", "0")
    lines = err.splitlines()
    assert len(lines) == 1, err
    m = STATS_RE.match(lines[0])
    assert m, err
    n_prompt = len(ids_of(cli(pasada_bin, "tokenize", "-m", smollm2, "-p", prompt)))
    assert int(m.group(2)) == n_prompt
    assert int(m.group(4)) == 8
    assert float(m.group(3)) > 0 and float(m.group(5)) > 0
    _, err = run_text(pasada_bin, smollm2, "-p", prompt, "-n", "8", "--temp", "0", "--no-stats")
    assert err == ""


def test_run_prompt_sources_agree(pasada_bin, smollm2, tmp_path):
    prompt = "Here is a list of fruits:\n1."
    f = tmp_path / "prompt.txt"
    f.write_text(prompt)
    args = ["-n", "8", "--temp", "0", "--no-stats"]
    a, _ = run_text(pasada_bin, smollm2, "-p", prompt, *args)
    b, _ = run_text(pasada_bin, smollm2, "-f", f, *args)
    c, _ = run_text(pasada_bin, smollm2, *args, input=prompt.encode())
    assert a == b == c and a.strip()


def test_run_prompt_longer_than_context(pasada_bin, smollm2):
    prompt = " ".join(["word"] * 80)
    n = len(ids_of(cli(pasada_bin, "tokenize", "-m", smollm2, "-p", prompt)))
    assert n > 32
    assert_runtime_error(cli(pasada_bin, "run", "-m", smollm2, "-c", "32", "-p", prompt),
                         f"{n} tokens", "32")


def test_run_stops_when_context_is_full(pasada_bin, smollm2):
    out, err = run_text(pasada_bin, smollm2, "-c", "24", "-p", "Once upon a time", "-n", "-1",
                        "--temp", "0")
    m = STATS_RE.search(err)
    assert m and "stopped: context full" in err, err
    # every position is used, and the last token sampled is printed too
    assert int(m.group(2)) + int(m.group(4)) == 24 + 1, err
    assert out.strip()


def test_run_empty_prompt_without_bos(pasada_bin, smollm2):
    # SmolLM2 adds no BOS: an empty prompt gives nothing to start from
    assert_runtime_error(cli(pasada_bin, "run", "-m", smollm2, "-p", ""), "empty")


# ---- tokenize ----

def test_tokenize_special_tokens_and_raw(pasada_bin, smollm2):
    s = "<|im_start|>user\nHello<|im_end|>"
    im_start = ids_of(cli(pasada_bin, "tokenize", "-m", smollm2, "-p", "<|im_start|>"))
    assert len(im_start) == 1
    default = ids_of(cli(pasada_bin, "tokenize", "-m", smollm2, "-p", s))
    raw = ids_of(cli(pasada_bin, "tokenize", "-m", smollm2, "--raw", "-p", s))
    assert default[0] == im_start[0]
    assert im_start[0] not in raw
    assert len(raw) > len(default)


def test_tokenize_adds_bos_per_model_flag(pasada_bin, gemma3):
    default = ids_of(cli(pasada_bin, "tokenize", "-m", gemma3, "-p", "Hello world"))
    raw = ids_of(cli(pasada_bin, "tokenize", "-m", gemma3, "--raw", "-p", "Hello world"))
    assert default == [2] + raw  # gemma3: add_bos_token, BOS id 2
    turn = ids_of(cli(pasada_bin, "tokenize", "-m", gemma3, "-p", "<start_of_turn>"))
    assert len(turn) == 2 and turn[0] == 2


def test_tokenize_prompt_sources_agree(pasada_bin, smollm2, tmp_path):
    data = "Hello, world!\nSecond line \u2014 \u00fcn\u00efc\u00f6de \u2713 \U0001F600\n\tend  ".encode()
    f = tmp_path / "text.txt"
    f.write_bytes(data)
    from_file = ids_of(cli(pasada_bin, "tokenize", "-m", smollm2, "-f", f))
    from_stdin = ids_of(cli(pasada_bin, "tokenize", "-m", smollm2, input=data))
    from_arg = ids_of(cli(pasada_bin, "tokenize", "-m", smollm2, "-p", data.decode()))
    assert from_file == from_stdin == from_arg
    assert len(from_file) > 10


def test_tokenize_empty_text(pasada_bin, smollm2):
    assert ids_of(cli(pasada_bin, "tokenize", "-m", smollm2, "--raw", "-p", "")) == []


def write_vocab_only(src, dst):
    """Copies the tokenizer.* metadata of `src` into a GGUF without tensors."""
    import gguf
    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(str(dst), arch="llama")
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), vtype, sub_type=sub)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_tokenize_vocab_only_file(pasada_bin, smollm2, tmp_path):
    vocab = tmp_path / "smollm2-vocab.gguf"
    write_vocab_only(smollm2, vocab)
    assert vocab.stat().st_size < smollm2.stat().st_size // 10
    s = "<|im_start|>user\nVocabulary-only files tokenize the same. \u00e9\u00e8"
    for extra in ([], ["--raw"]):
        want = ids_of(cli(pasada_bin, "tokenize", "-m", smollm2, *extra, "-p", s))
        got = ids_of(cli(pasada_bin, "tokenize", "-m", vocab, *extra, "-p", s))
        assert got == want
    res = cli(pasada_bin, "info", "--vocab-only", vocab)
    assert res.returncode == 0, text(res.stderr)
    assert "49152" in text(res.stdout)
    # running needs the tensors: a clear one-line error
    assert_runtime_error(cli(pasada_bin, "run", "-m", vocab, "-p", "hi"))


# ---- info ----

@pytest.mark.parametrize("model", ["smollm2", "gemma3"])
def test_info(pasada_bin, request, model):
    path = request.getfixturevalue(model)
    res = cli(pasada_bin, "info", path)
    assert res.returncode == 0, text(res.stderr)
    out = text(res.stdout).lower()
    assert ("gemma3" if model == "gemma3" else "llama") in out
    assert "tensors" in out
    # K and V of every layer per position: layers x kv heads x (k + v head size) x 2 bytes
    assert ("18.0 kib per position" if model == "gemma3" else "22.5 kib per position") in out
    # Q8: a byte a value plus a float scale per layer, KV head and K or V
    # (Gemma 3 270M: 18 layers, 1 KV head of 256; SmolLM2: 30 x 3 of 64)
    assert ("9.1 kib as q8" if model == "gemma3" else "12.0 kib as q8") in out
    assert cli(pasada_bin, "info", "-m", path).stdout == res.stdout


# ---- chat ----

def chat(pasada_bin, model, lines, *args):
    res = cli(pasada_bin, "chat", "-m", model, "--temp", "0", *args,
              input="".join(l + "\n" for l in lines).encode())
    assert res.returncode == 0, text(res.stderr)
    err = text(res.stderr)
    turns = [tuple(int(g) for g in m.groups()) for m in TURN_RE.finditer(err)]
    return text(res.stdout), err, turns


def test_chat_keeps_the_cache_between_turns(pasada_bin, smollm2):
    out, err, turns = chat(pasada_bin, smollm2, ["My name is Ana.", "What is my name?"], "-n",
                           "16")
    assert [t[0] for t in turns] == [1, 2], err
    (_, pre1, reused1, gen1), (_, pre2, reused2, gen2) = turns
    assert reused1 == 0 and pre1 > 0
    assert gen1 > 0 and gen2 > 0 and out.strip()
    assert "> " not in err, "the prompt is for terminals only"
    # The second turn reuses the whole first prompt and the answer (but for
    # its last token, never fed back) and prefills only the new message with
    # the template's markers around it.
    assert reused2 >= pre1 + gen1 - 1, turns
    suffix = "<|im_end|>\n<|im_start|>user\nWhat is my name?<|im_end|>\n<|im_start|>assistant\n"
    n_suffix = len(ids_of(cli(pasada_bin, "tokenize", "-m", smollm2, "-p", suffix)))
    n_message = len(ids_of(cli(pasada_bin, "tokenize", "-m", smollm2, "-p", "What is my name?")))
    assert n_message <= pre2 <= n_suffix + 2, turns


def test_chat_gemma_keeps_the_cache(pasada_bin, gemma3):
    out, err, turns = chat(pasada_bin, gemma3, ["Hello!", "Tell me a color."], "-n", "8")
    assert len(turns) == 2, err
    assert turns[1][2] >= turns[0][1], turns
    assert turns[1][1] < turns[1][2], turns


def test_chat_reset_and_eof(pasada_bin, smollm2):
    out, err, turns = chat(pasada_bin, smollm2, ["Hi", "/reset", "Hi"], "-n", "6")
    assert len(turns) == 2, err
    assert "conversation reset" in err
    assert turns[1][2] == 0 and turns[1][1] == turns[0][1], turns
    # the same conversation after a reset gives the same answer
    answers = [l for l in out.split("\n") if l]
    assert len(answers) == 2 and answers[0] == answers[1], out


def test_chat_system_message(pasada_bin, smollm2):
    _, err, turns = chat(pasada_bin, smollm2, ["Hi"], "-n", "4", "--system", "Be brief.")
    _, _, plain = chat(pasada_bin, smollm2, ["Hi"], "-n", "4")
    # SmolLM2's template puts its own default system prompt in when the
    # conversation has none; "Be brief." replaces it, so the prompt shrinks.
    assert turns[0][1] != plain[0][1], "the system message should change the prompt"


def test_chat_outgrows_the_context(pasada_bin, smollm2):
    msgs = [f"Please remember item number {i}: a red apple and a green pear." for i in range(5)]
    msgs.append(" ".join(["long"] * 200))  # alone larger than the context
    msgs.append("Thanks.")
    out, err, turns = chat(pasada_bin, smollm2, msgs, "-c", "96", "-n", "10")
    assert "dropped" in err, err
    assert "ignored" in err, err
    assert len(turns) == len(msgs) - 1, err


def test_chat_under_sanitizers(asan_build_dir, smollm2):
    binary = asan_build_dir / "pasada"
    if not binary.exists():
        pytest.fail(f"{binary} is missing: run scripts/test")
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1")
    msgs = ["Hi there.", "Name a fruit.", "/reset", " ".join(["long"] * 100), "Bye."]
    res = cli(binary, "chat", "-m", smollm2, "-c", "64", "-n", "12", "--temp", "0.7",
              "--seed", "5", "--repeat-penalty", "1.1",
              input="".join(m + "\n" for m in msgs).encode(), env=env)
    err = text(res.stderr)
    assert not any(m in err for m in SANITIZER_MARKS), err[-3000:]
    assert res.returncode == 0, err[-3000:]
    res = cli(binary, "run", "-m", smollm2, "-p", "Hello", "-n", "6", "--top-k", "0",
              "--top-p", "0.9", env=env)
    err = text(res.stderr)
    assert not any(m in err for m in SANITIZER_MARKS), err[-3000:]
    assert res.returncode == 0, err[-3000:]
    res = cli(binary, "tokenize", "-m", smollm2, "-p", "<|im_start|>hé", env=env)
    assert res.returncode == 0 and not any(m in text(res.stderr) for m in SANITIZER_MARKS)
