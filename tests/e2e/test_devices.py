"""Device selection on the command line: `pasada devices` (the CPU, then
each Vulkan device, and which one `--device vulkan` picks; as a table and as
JSON), `--device DEV` on every command that runs a model (cpu, vulkan or
vulkan:N; any other value is a usage error, a device that is not there a
one-line runtime error; `--device cpu` is the default and changes nothing),
and `--gpu-layers N` beside it (the first N layers on the GPU, the rest on
the CPU: N from 1 to 99999, only with a Vulkan device; more layers than the
model has is the engine's one-line error).
The checks that need Vulkan devices are skipped, with the reason, when
`pasada devices --json` lists none (they fail instead when
PASADA_REQUIRE_VULKAN=1, as scripts/test sets it)."""
import glob
import json
import os
import re
import subprocess

import pytest

from conftest import FIXTURES

TINY_LLAMA = FIXTURES / "tiny" / "llama.gguf"
MISSING = "/nonexistent/dir/model.gguf"
DEVICE_ERROR = "--device: expected cpu, vulkan or vulkan:N, got '{}'"
GPU_LAYERS_ERROR = "--gpu-layers: expected a layer count from 1 to 99999, got '{}'"
GPU_LAYERS_NEED_A_GPU = "--gpu-layers needs a GPU: --device vulkan or vulkan:N"
# Mesa's lavapipe (its devices are named llvmpipe) is installed when its ICD is.
LAVAPIPE_ICDS = glob.glob("/usr/share/vulkan/icd.d/lvp_icd*.json")


def cli(binary, *args, timeout=600):
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)


@pytest.fixture(scope="module")
def vulkan_devices(devices):
    vk = devices["vulkan"]
    if not vk["devices"]:
        why = "no Vulkan devices: " + (vk["error"] or "the loader lists none")
        if os.environ.get("PASADA_REQUIRE_VULKAN") == "1":
            pytest.fail(why + ", and PASADA_REQUIRE_VULKAN=1")
        pytest.skip(why)
    return vk["devices"]


def one_line_runtime_error(res):
    lines = res.stderr.splitlines()
    assert res.returncode == 1, f"exit {res.returncode}: {res.stderr}"
    assert len(lines) == 1 and lines[0].startswith("pasada: error: "), f"expected one line: {res.stderr!r}"
    return lines[0]


# ---- pasada devices ----

def test_devices_lists_the_cpu_first(pasada_bin):
    res = cli(pasada_bin, "devices")
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    lines = res.stdout.splitlines()
    assert re.match(r"cpu\s+\S.*, \d+ threads\s+\S+\s+kernels (scalar|avx2|avx512|avx512_vnni|amx)$", lines[0]), lines
    # then the Vulkan devices (or one line saying why there are none), and the default GPU
    assert len(lines) >= 2
    assert lines[1].startswith("vulkan"), lines


def test_devices_json(pasada_bin, devices):
    cpu = devices["cpu"]
    assert cpu["device"] == "cpu"
    assert cpu["kernels"] in ("scalar", "avx2", "avx512", "avx512_vnni", "amx")
    assert cpu["threads"] >= 1 and cpu["name"] and cpu["isa"]
    vk = devices["vulkan"]
    assert isinstance(vk["built"], bool)
    if vk["error"] is not None:  # no Vulkan here: said in one line, no devices
        assert vk["devices"] == [] and vk["default"] is None
        assert "\n" not in vk["error"] and vk["error"]
    for i, d in enumerate(vk["devices"]):
        assert d["device"] == f"vulkan:{d['index']}" and d["index"] == i
        assert d["type"] in ("discrete", "integrated", "virtual", "cpu", "other")
        assert d["name"] and d["memory"] >= 0 and d["subgroup"] >= 0
        assert all(isinstance(d[k], bool) for k in ("fp16", "int8", "coopmat", "usable"))
        assert (d["missing"] is None) == d["usable"]


def test_devices_default_gpu_rule(pasada_bin, devices):
    """--device vulkan is the first usable discrete device, else integrated,
    else virtual; a CPU implementation is never the default."""
    want = None
    for kind in ("discrete", "integrated", "virtual"):
        hit = [d for d in devices["vulkan"]["devices"] if d["usable"] and d["type"] == kind]
        if hit:
            want = hit[0]["device"]
            break
    assert devices["vulkan"]["default"] == want
    last = cli(pasada_bin, "devices").stdout.splitlines()[-1]
    if devices["vulkan"]["error"]:
        assert last.startswith("vulkan") and devices["vulkan"]["error"] in last
    elif want:
        assert last.startswith(f"--device vulkan: {want} ("), last
    else:
        assert last == "--device vulkan: no GPU (a CPU Vulkan device is used only when named: vulkan:N)"


def test_devices_table_matches_json(pasada_bin, devices):
    lines = cli(pasada_bin, "devices").stdout.splitlines()
    for d in devices["vulkan"]["devices"]:
        row = [ln for ln in lines if ln.startswith(d["device"] + " ")]
        assert len(row) == 1, lines
        assert d["name"] in row[0] and f" {d['type']} " in row[0]
        assert f"subgroup {d['subgroup']}" in row[0]
        assert ("(not usable: " in row[0]) == (not d["usable"])
        assert ("(--device vulkan)" in row[0]) == (d["device"] == devices["vulkan"]["default"])


@pytest.mark.parametrize("args", [["--bogus"], ["extra"], ["--json=1"]])
def test_devices_usage_errors(pasada_bin, args):
    res = cli(pasada_bin, "devices", *args)
    assert res.returncode == 2, res.stderr
    assert res.stderr.splitlines()[-1] == "try 'pasada devices --help'"


def test_devices_in_the_help(pasada_bin):
    assert re.search(r"^  devices\s", cli(pasada_bin, "--help").stdout, re.M)
    res = cli(pasada_bin, "devices", "--help")
    assert res.returncode == 0 and res.stdout.startswith("usage: pasada devices")
    assert "--json" in res.stdout


# ---- --device on the commands that run a model ----

# Each command with the arguments it needs besides --device; parsing --device
# comes before anything is loaded, so the files need not exist.
COMMANDS = {
    "run": ["-m", MISSING, "-p", "x"],
    "chat": ["-m", MISSING],
    "serve": ["-m", MISSING, "--port", "0"],
    "bench": ["-m", MISSING, "--no-ceilings", "-q"],
    "profile": ["-m", MISSING, "--no-ceilings", "-q"],
    "verify": ["-m", MISSING, "-q"],
    "perplexity": ["-m", MISSING, "-f", MISSING, "-q"],
    "kld": ["--base", MISSING, "-m", MISSING, "-f", MISSING, "-q"],
}
# The usage errors of these commands are one line with the hint in it; the
# others' are the reason and a "try 'pasada CMD --help'" line.
ONE_LINE_USAGE = {"bench", "profile", "serve"}


@pytest.mark.parametrize("value", ["tpu", "vulkan:x", "vulkan:-1", "vulkan:", "vulkan:+1", "Vulkan", "cpu:avx2",
                                   "ref", "vulkan:1x", ""])
@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_bad_device_is_a_usage_error(pasada_bin, cmd, value):
    res = cli(pasada_bin, cmd, *COMMANDS[cmd], "--device", value)
    assert res.returncode == 2, f"exit {res.returncode}: {res.stderr}"
    lines = res.stderr.splitlines()
    assert lines[0].startswith(f"pasada {cmd}: " + DEVICE_ERROR.format(value)), res.stderr
    if cmd in ONE_LINE_USAGE:
        assert len(lines) == 1, res.stderr
    else:
        assert lines == [lines[0], f"try 'pasada {cmd} --help'"], res.stderr


@pytest.mark.parametrize("value", ["cpu", "vulkan", "vulkan:0", "vulkan:12"])
@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_good_device_is_accepted(pasada_bin, cmd, value):
    """A well-formed --device passes parsing: the command fails on the
    missing model (exit 1, one line), not on its arguments."""
    res = cli(pasada_bin, cmd, *COMMANDS[cmd], "--device", value)
    assert res.returncode == 1, f"exit {res.returncode}: {res.stderr}"
    assert MISSING in res.stderr, res.stderr


@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_help_documents_device(pasada_bin, cmd):
    out = cli(pasada_bin, cmd, "--help").stdout
    assert re.search(r"--device DEV\s", out), out
    assert "vulkan:N" in out and "pasada devices" in out


def assert_usage_error(res, cmd, message):
    """Exit 2 and the message as the command's usage errors give it: one
    line for bench, profile and serve, else the reason and the hint."""
    assert res.returncode == 2, f"exit {res.returncode}: {res.stderr}"
    lines = res.stderr.splitlines()
    assert lines and lines[0].startswith(f"pasada {cmd}: {message}"), res.stderr
    if cmd in ONE_LINE_USAGE:
        assert len(lines) == 1, res.stderr
    else:
        assert lines == [lines[0], f"try 'pasada {cmd} --help'"], res.stderr


@pytest.mark.parametrize("value", ["0", "-1", "x", "1.5", "", "+3", " 3", "3 ", "100000", "1e2", "0x10",
                                   "99999999999"])
@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_bad_gpu_layers_is_a_usage_error(pasada_bin, cmd, value):
    res = cli(pasada_bin, cmd, *COMMANDS[cmd], "--device", "vulkan", "--gpu-layers", value)
    assert_usage_error(res, cmd, GPU_LAYERS_ERROR.format(value))


@pytest.mark.parametrize("device", [None, "cpu"])
@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_gpu_layers_without_a_gpu_is_a_usage_error(pasada_bin, cmd, device):
    dev = ["--device", device] if device else []
    res = cli(pasada_bin, cmd, *COMMANDS[cmd], *dev, "--gpu-layers", "4")
    assert_usage_error(res, cmd, GPU_LAYERS_NEED_A_GPU)


@pytest.mark.parametrize("backend", ["ref", "cpu", "cpu:scalar"])
def test_verify_gpu_layers_needs_a_gpu_under_test(pasada_bin, backend):
    res = cli(pasada_bin, "verify", *COMMANDS["verify"], "--backend", backend, "--gpu-layers", "4")
    assert_usage_error(res, "verify", GPU_LAYERS_NEED_A_GPU)


@pytest.mark.parametrize("value", ["1", "099", "99999"])
@pytest.mark.parametrize("device", ["vulkan", "vulkan:12"])
@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_good_gpu_layers_is_accepted(pasada_bin, cmd, device, value):
    """A layer count with a Vulkan device passes parsing, in either order:
    the command fails on the missing model (exit 1), not on its arguments."""
    for args in (["--device", device, "--gpu-layers", value], ["--gpu-layers", value, "--device", device]):
        res = cli(pasada_bin, cmd, *COMMANDS[cmd], *args)
        assert res.returncode == 1, f"exit {res.returncode}: {res.stderr}"
        assert MISSING in res.stderr, res.stderr


def test_verify_gpu_layers_with_backend_is_accepted(pasada_bin):
    res = cli(pasada_bin, "verify", *COMMANDS["verify"], "--backend", "vulkan:0", "--gpu-layers", "3")
    assert res.returncode == 1, f"exit {res.returncode}: {res.stderr}"
    assert MISSING in res.stderr, res.stderr


@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_help_documents_gpu_layers(pasada_bin, cmd):
    out = cli(pasada_bin, cmd, "--help").stdout
    assert re.search(r"--gpu-layers N\s", out), out
    assert "the rest on the CPU" in re.sub(r"\s+", " ", out), out


@pytest.mark.parametrize("other", [["--backend", "ref"], ["--kernels", "scalar"]])
def test_verify_device_and_backend_exclude_each_other(pasada_bin, other):
    res = cli(pasada_bin, "verify", "-m", MISSING, "--device", "cpu", *other)
    assert res.returncode == 2, res.stderr
    assert "both name the backend under test" in res.stderr.splitlines()[0]


def test_device_cpu_runs_as_before(pasada_bin, smollm2):
    args = ["run", "-m", smollm2, "-p", "The three primary colors are", "-n", "16", "--temp", "0", "--no-stats"]
    plain = cli(pasada_bin, *args)
    on_cpu = cli(pasada_bin, *args, "--device", "cpu")
    assert plain.returncode == 0 and on_cpu.returncode == 0, plain.stderr + on_cpu.stderr
    assert plain.stdout.strip()
    assert on_cpu.stdout == plain.stdout
    assert on_cpu.stderr == plain.stderr == ""


def test_device_cpu_is_the_backend(pasada_bin):
    res = cli(pasada_bin, "run", "-m", TINY_LLAMA, "-p", "x", "-n", "1", "--temp", "0", "--verbose",
              "--device", "cpu")
    assert res.returncode == 0, res.stderr
    assert re.search(r"^pasada: model .*, backend cpu, loaded in", res.stderr, re.M), res.stderr


# ---- Vulkan devices ----

def test_lavapipe_is_listed_as_a_cpu_device(devices, vulkan_devices):
    if not devices["vulkan"]["built"]:
        pytest.skip("this build has no Vulkan")
    if not LAVAPIPE_ICDS:
        pytest.skip("Mesa's lavapipe is not installed (no lvp_icd*.json)")
    cpus = [d for d in vulkan_devices if d["type"] == "cpu"]
    assert any("llvmpipe" in d["name"] for d in cpus), vulkan_devices


def test_device_that_is_not_there_is_one_line(pasada_bin, vulkan_devices):
    n = len(vulkan_devices)
    if n > 7:
        pytest.skip(f"this machine has {n} Vulkan devices: vulkan:7 exists")
    res = cli(pasada_bin, "run", "-m", TINY_LLAMA, "-p", "x", "-n", "1", "--device", "vulkan:7")
    line = one_line_runtime_error(res)
    assert "7" in line, line


def test_device_vulkan_without_a_gpu_is_one_line(pasada_bin, devices, vulkan_devices):
    if devices["vulkan"]["default"]:
        pytest.skip(f"this machine has a GPU: {devices['vulkan']['default']}")
    res = cli(pasada_bin, "run", "-m", TINY_LLAMA, "-p", "x", "-n", "1", "--device", "vulkan")
    one_line_runtime_error(res)


def test_device_vulkan_runs_on_the_default_gpu(pasada_bin, devices, vulkan_devices):
    if not devices["vulkan"]["default"]:
        pytest.skip("no GPU among the Vulkan devices (--device vulkan has none to pick)")
    res = cli(pasada_bin, "run", "-m", TINY_LLAMA, "-p", "x", "-n", "4", "--temp", "0", "--no-stats",
              "--verbose", "--device", "vulkan")
    assert res.returncode == 0, res.stderr
    assert re.search(r", backend vulkan", res.stderr), res.stderr


def test_named_cpu_vulkan_device_runs(pasada_bin, vulkan_devices):
    """A CPU implementation of Vulkan is never the default but runs when named."""
    named = [d for d in vulkan_devices if d["type"] == "cpu" and d["usable"]]
    if not named:
        pytest.skip("no usable Vulkan device of type cpu (Mesa's lavapipe)")
    dev = named[0]["device"]
    res = cli(pasada_bin, "run", "-m", TINY_LLAMA, "-p", "x", "-n", "4", "--temp", "0", "--no-stats", "--verbose",
              "--device", dev)
    assert res.returncode == 0, res.stderr
    assert f", backend {dev}, " in res.stderr, res.stderr


# ---- --gpu-layers on a Vulkan device ----

def test_gpu_layers_beyond_the_model_is_one_line(pasada_bin, smollm2, vulkan_device):
    """SmolLM2-135M has 30 layers: asking for 999 on the GPU is the engine's
    one-line error at load, naming the count."""
    res = cli(pasada_bin, "run", "-m", smollm2, "-p", "x", "-n", "1", "--device", vulkan_device,
              "--gpu-layers", "999")
    line = one_line_runtime_error(res)
    assert re.search(r"\b30\b", line), line
    assert "999" in line, line


def test_gpu_layers_split_gives_the_cpu_text(pasada_bin, smollm2, vulkan_device):
    """The first 10 of SmolLM2's 30 layers on the GPU and the rest on the
    CPU write the text the CPU alone does. The prompt is one whose greedy
    continuation has no near tie among its first 12 tokens: where one has,
    the rounding of the CPU's 8-bit activations or of an f16 KV value is
    enough to pick the other token on any backend (the split's accuracy
    against the reference is verify's to measure, below)."""
    args = ["run", "-m", smollm2, "-p", "The largest planet in the solar system is", "--temp", "0", "-n", "12",
            "--no-stats"]
    on_cpu = cli(pasada_bin, *args, "--device", "cpu")
    split = cli(pasada_bin, *args, "--device", vulkan_device, "--gpu-layers", "10", "--verbose")
    assert on_cpu.returncode == 0, on_cpu.stderr
    assert split.returncode == 0, split.stderr
    assert on_cpu.stdout.strip()
    assert split.stdout == on_cpu.stdout
    assert f", backend {vulkan_device}/10, " in split.stderr, split.stderr


@pytest.mark.parametrize("layers", [1, 10, 30])
def test_gpu_layers_split_passes_verify(pasada_bin, smollm2, vulkan_device, layers):
    """Each split (one layer on the GPU, a third, all 30: the output too)
    is within verify's tolerances of the reference path, and verify names
    the backend it composed."""
    res = cli(pasada_bin, "verify", "-m", smollm2, "--device", vulkan_device, "--gpu-layers", layers,
              "-n", "32", "-q", "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["backend"] == f"{vulkan_device}/{layers}", report["backend"]
    assert report["pass"], report["failure"]
