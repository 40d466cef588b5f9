"""Shared fixtures of the end-to-end tests: where the binaries and models are.

PASADA_BUILD_DIR (default build/) holds the release binaries; PASADA_ASAN_BUILD_DIR
(default build-asan/) the AddressSanitizer + UBSan build when it exists;
PASADA_MODELS_DIR (default ~/.cache/pasada/models) the fetched models;
PASADA_CHAT_TEMPLATES the corpus of real chat templates (default: the
workplace's shared folder, ../shared/chat-templates from the repository root,
or /work/shared/chat-templates for a clone made elsewhere).
The test command (scripts/test) builds both and fetches the models first, so a
missing binary or model is a failure, not a skip."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def _dir(env, default):
    return pathlib.Path(os.environ.get(env, default)).expanduser().resolve()


BUILD = _dir("PASADA_BUILD_DIR", ROOT / "build")
ASAN_BUILD = _dir("PASADA_ASAN_BUILD_DIR", ROOT / "build-asan")
MODELS = _dir("PASADA_MODELS_DIR", "~/.cache/pasada/models")



def _chat_templates():
    env = os.environ.get("PASADA_CHAT_TEMPLATES")
    if env:
        return pathlib.Path(env).expanduser().resolve()
    for c in (ROOT.parent / "shared" / "chat-templates", pathlib.Path("/work/shared/chat-templates")):
        if c.is_dir():
            return c.resolve()
    return (ROOT.parent / "shared" / "chat-templates").resolve()


CHAT_TEMPLATES = _chat_templates()

SMOLLM2 = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3 = MODELS / "gemma-3-270m-q4_k_m.gguf"
MINILM = MODELS / "all-MiniLM-L6-v2"  # a Hugging Face folder (scripts/fetch-models minilm)


def _need(path):
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/test (it builds and fetches what tests need)")
    return path


# ---- the CLI on untrusted input: one line on stderr, exit 1, no sanitizer report ----

SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer",
                   "runtime error:", "SUMMARY: ")
SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0", "UBSAN_OPTIONS": "print_stacktrace=1"}


def run_cli(kind, args, timeout=120):
    """Runs `pasada ARGS` of the "release" or the "asan" build (with leak
    detection), stdin closed; returns the CompletedProcess."""
    path = _need((BUILD if kind == "release" else ASAN_BUILD) / "pasada")
    env = dict(os.environ, **SAN_ENV) if kind == "asan" else None
    return subprocess.run([str(path), *map(str, args)], capture_output=True, text=True,
                          errors="replace", timeout=timeout, env=env, stdin=subprocess.DEVNULL)


def assert_one_line_error(res, where, hints=(), names=()):
    """The contract for rejected input: exit status 1, no sanitizer report,
    exactly one line on stderr starting "pasada: ", containing every string
    of `names` and (case-insensitive) at least one of `hints` when given."""
    where = f"{where}: exit {res.returncode}\nstderr:\n{res.stderr[-3000:]}"
    assert not any(m in res.stderr for m in SANITIZER_MARKS), "sanitizer report: " + where
    assert res.returncode == 1, where
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and res.stderr.endswith("\n"), "expected one line: " + where
    line = lines[0]
    assert line.startswith("pasada: "), where
    for n in names:
        assert n in line, f"the message does not name {n}: " + where
    if hints:
        assert any(h.lower() in line.lower() for h in hints), \
            f"the message does not say what is wrong (expected one of {list(hints)}): " + where


@pytest.fixture(scope="session")
def pasada_bin():
    return _need(BUILD / "pasada")


@pytest.fixture(scope="session")
def build_dir():
    return _need(BUILD)


@pytest.fixture(scope="session")
def asan_build_dir():
    return _need(ASAN_BUILD)


@pytest.fixture(scope="session")
def smollm2():
    return _need(SMOLLM2)


@pytest.fixture(scope="session")
def gemma3():
    return _need(GEMMA3)


@pytest.fixture(scope="session")
def minilm_gguf(tmp_path_factory):
    """all-MiniLM-L6-v2 as GGUF, converted from its Hugging Face folder by
    scripts/bert-to-gguf.py (numpy and gguf only) once per session."""
    import subprocess
    import sys
    _need(MINILM / "model.safetensors")
    out = tmp_path_factory.mktemp("minilm") / "all-MiniLM-L6-v2.gguf"
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "bert-to-gguf.py"), str(MINILM), str(out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return out


@pytest.fixture(scope="session")
def devices(pasada_bin):
    """`pasada devices --json`: the CPU and the Vulkan devices."""
    import json
    import subprocess
    res = subprocess.run([str(pasada_bin), "devices", "--json"], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.fixture(scope="session")
def vulkan_device(devices):
    """'vulkan:N' for the GPU tests: `pasada devices`' default (a real GPU),
    else the first usable device (lavapipe). Without one they skip, or
    fail when PASADA_REQUIRE_VULKAN=1 (scripts/test sets it: lavapipe is
    installed there)."""
    vk = devices.get("vulkan", {})
    usable = [d["device"] for d in vk.get("devices", []) if d.get("usable")]
    dev = vk.get("default") or (usable[0] if usable else None)
    if dev is None:
        if os.environ.get("PASADA_REQUIRE_VULKAN") == "1":
            pytest.fail("no usable Vulkan device (pasada devices), and PASADA_REQUIRE_VULKAN=1")
        pytest.skip("no usable Vulkan device (pasada devices)")
    return dev
