"""`pasada bench`: the JSON report has every field with sane values, the table
prints, bad arguments exit 2 and runtime failures exit 1, each with one line
on stderr. Functional only: no assertion on speed."""
import json
import os
import signal
import subprocess
import time

import pytest


def run(pasada_bin, *args, timeout=300):
    return subprocess.run([str(pasada_bin), "bench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def report(pasada_bin, smollm2):
    res = run(pasada_bin, "-m", smollm2, "-p", 32, "-n", 8, "-r", 1, "-t", 2, "--json",
              "--price-per-hour", "1.5")
    assert res.returncode == 0, res.stderr
    return res


def test_json_is_one_object_on_stdout(report):
    lines = report.stdout.strip().splitlines()
    assert len(lines) == 1
    assert isinstance(json.loads(lines[0]), dict)
    assert "bench:" in report.stderr  # progress goes to stderr


def test_json_fields_and_values(report, smollm2):
    r = json.loads(report.stdout)
    assert r["model"] == smollm2.name
    assert r["arch"] == "llama"
    assert r["threads"] == 2 and r["repeats"] == 1
    assert r["weights"]["main_type"] == "Q4_1"
    assert r["weights"]["int8_dot"] is True
    for key in ("file_tensor_bytes", "params_layers", "params_output"):
        assert r["weights"][key] > 0

    assert r["backend"] == "cpu" and r["device"] is None
    c = r["ceilings"]
    assert c["source"] == "cpu"
    assert c["threads"] == 2
    for key in ("read_gbs", "read_buffer_bytes", "fma_gflops", "int8_gops"):
        assert c[key] > 0, key
    assert c["fma_isa"] in ("avx512", "avx2", "scalar")
    # the part of the buffer the kernel gave 2 MB pages: a count, never more than the buffer
    assert 0 <= c["read_buffer_huge_bytes"] <= c["read_buffer_bytes"]
    # each ceiling is the higher of the probe before the runs and the one after
    for key in ("read_gbs", "fma_gflops", "int8_gops"):
        assert c["before"][key] > 0 and c["after"][key] > 0, key
        assert c[key] == max(c["before"][key], c["after"][key]), key
    assert c["int8_isa"] in ("amx", "avx512_vnni", "avx_vnni", "avx2", "scalar")

    pp = r["pp"]
    assert pp["tokens"] == 32
    assert 0 < pp["tok_s"]["min"] <= pp["tok_s"]["median"] <= pp["tok_s"]["max"]
    for key in ("flops_per_run", "gflops", "pct_fma_peak", "pct_int8_peak", "usd_per_mtok"):
        assert pp[key] > 0, key

    tg = r["tg"]
    assert tg["tokens"] == 8
    assert 0 < tg["tok_s"]["min"] <= tg["tok_s"]["median"] <= tg["tok_s"]["max"]
    for key in ("weight_bytes_per_token", "kv_bytes_per_token", "avg_context", "gbs", "pct_read_bw",
                "usd_per_mtok"):
        assert tg[key] > 0, key
    # a token reads at least every layer matrix
    assert tg["weight_bytes_per_token"] < r["weights"]["file_tensor_bytes"] * 1.01

    # the bound each test is under, recomputed from the report's own figures: the larger
    # of the time at the read ceiling and at the compute ceiling (int8 dot here)
    n_batch = r["n_batch"]
    batches = -(-pp["tokens"] // n_batch)
    t_mem = batches * r["weights"]["file_tensor_bytes"] / (c["read_gbs"] * 1e9)
    t_cmp = pp["flops_per_run"] / (c["int8_gops"] * 1e9)
    assert pp["bound"] == ("memory" if t_mem > t_cmp else "compute")
    assert pp["ceiling_tok_s"] == pytest.approx(pp["tokens"] / max(t_mem, t_cmp), rel=1e-9)
    assert pp["read_ceiling_tok_s"] == pytest.approx(pp["tokens"] / t_mem, rel=1e-9)
    assert pp["pct_ceiling"] == pytest.approx(100 * pp["tok_s"]["median"] / pp["ceiling_tok_s"], rel=1e-9)
    t_mem = (tg["weight_bytes_per_token"] + tg["kv_bytes_per_token"]) / (c["read_gbs"] * 1e9)
    flops = 2 * (r["weights"]["params_layers"] + r["weights"]["params_output"])
    assert tg["compute_ceiling_tok_s"] < c["int8_gops"] * 1e9 / flops  # attention adds to the FLOPs
    assert tg["read_ceiling_tok_s"] == pytest.approx(1 / t_mem, rel=1e-9)
    assert tg["bound"] == "memory"  # a 135M model's decode on any CPU
    assert tg["ceiling_tok_s"] == pytest.approx(min(1 / t_mem, tg["compute_ceiling_tok_s"]), rel=1e-9)
    assert tg["pct_ceiling"] == pytest.approx(100 * tg["tok_s"]["median"] / tg["ceiling_tok_s"], rel=1e-9)

    m = r["memory"]
    for key in ("rss_bytes", "hwm_bytes", "kv_bytes", "weights_bytes", "rss_over_weights_plus_kv"):
        assert m[key] > 0, key
    assert m["hwm_bytes"] >= m["rss_bytes"]
    assert r["price_per_hour"] == 1.5


def test_table_and_no_ceilings(pasada_bin, smollm2):
    res = run(pasada_bin, "-m", smollm2, "-p", 16, "-n", 4, "-r", 1, "-t", 1, "--no-ceilings", "-q")
    assert res.returncode == 0, res.stderr
    assert "pp16" in res.stdout and "tg4" in res.stdout
    assert "bound" not in res.stdout  # no ceilings, no bound
    assert res.stderr == ""  # -q: no progress


def test_json_without_ceilings_or_pp(pasada_bin, smollm2):
    res = run(pasada_bin, "-m", smollm2, "-p", 0, "-n", 4, "-r", 1, "-t", 1, "--no-ceilings", "--json", "-q")
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert r["ceilings"] is None and r["pp"] is None
    assert r["tg"]["tok_s"]["median"] > 0
    assert r["tg"]["pct_read_bw"] is None
    for key in ("bound", "ceiling_tok_s", "pct_ceiling", "read_ceiling_tok_s", "compute_ceiling_tok_s"):
        assert r["tg"][key] is None, key


def test_vulkan_device_ceilings(pasada_bin, smollm2, vulkan_device):
    """On a Vulkan device the ceilings are the device's own (read bandwidth and
    fp32 FMA rate, measured by shaders before and after the runs) and pp/tg are
    shares of them; the device is named in the JSON and in the table. Few
    tokens: lavapipe runs at about 1 token a second."""
    res = run(pasada_bin, "-m", smollm2, "--device", vulkan_device, "-p", 8, "-n", 2, "-r", 1, "--json")
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert r["backend"] == vulkan_device
    d = r["device"]
    assert d["api"] == "vulkan" and d["name"] and d["version"]
    assert d["type"] in ("discrete", "integrated", "virtual", "cpu", "other")
    assert r["kernels"] == f"vulkan:{d['index']}"
    assert vulkan_device in ("vulkan", r["kernels"])
    c = r["ceilings"]
    assert c["source"] == "device" and isinstance(c["timestamps"], bool)
    for key in ("read_gbs", "read_buffer_bytes", "fma_gflops"):
        assert c[key] > 0, key
    assert c["read_buffer_bytes"] >= 16 << 20
    for key in ("threads", "read_buffer_huge_bytes", "fma_isa", "int8_gops", "int8_isa"):
        assert c[key] is None, key  # CPU-only figures
    for key in ("read_gbs", "fma_gflops"):
        assert c["before"][key] > 0 and c["after"][key] > 0, key
        assert c[key] == max(c["before"][key], c["after"][key]), key
    pp, tg = r["pp"], r["tg"]
    assert pp["pct_fma_peak"] > 0 and pp["pct_int8_peak"] is None
    assert pp["pct_fma_peak"] == pytest.approx(100 * pp["gflops"] / c["fma_gflops"], rel=1e-6)
    assert tg["pct_read_bw"] > 0
    assert tg["pct_read_bw"] == pytest.approx(100 * tg["gbs"] / c["read_gbs"], rel=1e-6)
    assert "measuring the ceilings of vulkan:" in res.stderr

    res = run(pasada_bin, "-m", smollm2, "--device", vulkan_device, "-p", 4, "-n", 1, "-r", 1, "-q")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert f"setup     device vulkan:{d['index']}, {d['name']} ({d['type']}," in out
    assert "ceilings  the device's: read" in out and "int8" not in out
    assert "% of fp32 FMA" in out and "% of read bandwidth" in out


def test_kv_types(pasada_bin, smollm2):
    """The default KV cache is F16, half the bytes of --kv-type f32; q8 is one
    byte a value plus a float scale per position and KV head (SmolLM2: 64
    values a head)."""
    pools = {}
    for kv in (None, "f32", "q8"):
        extra = ["--kv-type", kv] if kv else []
        res = run(pasada_bin, "-m", smollm2, "-p", 0, "-n", 4, "-r", 1, "-t", 1, "--no-ceilings", "--json", "-q",
                  *extra)
        assert res.returncode == 0, res.stderr
        m = json.loads(res.stdout)["memory"]
        pools[m["kv_type"]] = m["kv_bytes"]
    assert set(pools) == {"f16", "f32", "q8"}
    assert pools["f32"] == 2 * pools["f16"]
    assert pools["q8"] * 128 == pools["f16"] * (64 + 4)


def test_ceilings_alone(pasada_bin):
    """--ceilings: the machine's ceilings without a model, as one JSON object
    with the report's keys (an engine comparison takes them around another
    engine's run), or one table line."""
    res = run(pasada_bin, "--ceilings", "-t", 2, "--json", "-q")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 1
    c = json.loads(lines[0])
    assert c["source"] == "cpu" and c["threads"] == 2
    for key in ("read_gbs", "read_buffer_bytes", "fma_gflops", "int8_gops"):
        assert c[key] > 0, key
    assert 0 <= c["read_buffer_huge_bytes"] <= c["read_buffer_bytes"]
    assert c["fma_isa"] in ("avx512", "avx2", "scalar")
    assert c["int8_isa"] in ("amx", "avx512_vnni", "avx_vnni", "avx2", "scalar")
    res = run(pasada_bin, "--ceilings", "-t", 1)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("ceilings  1 thread: read ") and "GB/s" in res.stdout


def test_help(pasada_bin):
    res = run(pasada_bin, "--help")
    assert res.returncode == 0
    for opt in ("-m", "-p", "-n", "-t", "-r", "--json", "--price-per-hour", "--ceilings"):
        assert opt in res.stdout


@pytest.mark.parametrize("args", [
    [],                                    # no model
    ["-m"],                                # option without its value
    ["-m", "x.gguf", "--frobnicate"],      # unknown option
    ["-m", "x.gguf", "-p", "abc"],
    ["-m", "x.gguf", "-n", "-1"],
    ["-m", "x.gguf", "-t", "0"],
    ["-m", "x.gguf", "-r", "0"],
    ["-m", "x.gguf", "-p", "0", "-n", "0"],
    ["-m", "x.gguf", "--price-per-hour", "cheap"],
    ["-m", "x.gguf", "--price-per-hour", "-1"],
    ["-m", "x.gguf", "-p", "12x"],
    ["-m", "x.gguf", "-b", "0"],
    ["-m", "x.gguf", "--batch=70000"],
    ["-m", "x.gguf", "-r", "1001"],
    ["-m", "x.gguf", "--seed", "-3"],
    ["-m", "x.gguf", "--seed", "seven"],
    ["-m", "x.gguf", "--json=yes"],        # a switch given a value
    ["-m", "x.gguf", "stray"],
    ["-m", "x.gguf", "--kv-type", "q4"],
    ["--ceilings", "-m", "x.gguf"],        # the machine alone: no model,
    ["--ceilings", "-p", "16"],            # nothing a model's run takes
    ["--ceilings", "-r", "2"],
    ["--ceilings", "--no-ceilings"],
    ["--ceilings", "--device", "cpu"],
    ["--ceilings", "-t", "0"],
])
def test_bad_arguments_exit_2(pasada_bin, args):
    res = run(pasada_bin, *args)
    assert res.returncode == 2, res.stderr
    assert res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, words", [
    (["-b", "0"], ["--batch", "'0'", "batch size"]),
    (["-b0"], ["--batch", "'0'"]),
    (["--threads=300"], ["--threads", "'300'", "[1, 256]"]),
    (["--seed", "-3"], ["--seed", "'-3'"]),
    (["--frobnicate"], ["unknown option", "--frobnicate"]),
    (["-x"], ["unknown option", "-x"]),
    (["-p"], ["-p", "needs a value"]),
])
def test_bad_value_message_names_option_and_value(pasada_bin, args, words):
    res = run(pasada_bin, "-m", "x.gguf", *args)
    assert res.returncode == 2
    line = res.stderr.strip()
    assert "\n" not in line and line.startswith("pasada bench: ") and "--help" in line
    for w in words:
        assert w in line, (w, line)


def test_missing_model_exits_1(pasada_bin, tmp_path):
    missing = tmp_path / "nope.gguf"
    res = run(pasada_bin, "-m", missing, "-p", 8, "-n", 2, "-r", 1)
    assert res.returncode == 1
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0]


def test_invalid_model_exits_1(pasada_bin, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file at all")
    res = run(pasada_bin, "-m", bad, "-p", 8, "-n", 2, "-r", 1, "--no-ceilings", "-q")
    assert res.returncode == 1
    assert len(res.stderr.strip().splitlines()) == 1


def processes_with(arg):
    """{pid: VmRSS in bytes} of the processes whose command line has arg."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if arg.encode() not in argv:
                continue
            with open(f"/proc/{d}/status") as f:
                rss = [int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:")]
            out[int(d)] = rss[0] if rss else 0
        except (OSError, ValueError):
            pass
    return out


def wait_for(cond, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def test_probe_child_holds_its_buffer_and_ends_with_bench(pasada_bin, smollm2, tmp_path):
    """The probes run in a child process that keeps its read buffer mapped
    through the timed runs (freeing gigabytes during them costs a CPU on a
    virtual machine) and ends when bench does: after a normal exit, and
    after the bench process is killed."""
    model = tmp_path / f"probe-child-{os.getpid()}.gguf"
    model.symlink_to(smollm2)
    res = run(pasada_bin, "-m", model, "-p", 0, "-n", 4, "-r", 1, "-t", 1, "--json", "-q")
    assert res.returncode == 0, res.stderr
    buffer_bytes = json.loads(res.stdout)["ceilings"]["read_buffer_bytes"]
    assert wait_for(lambda: not processes_with(str(model)), 10), "the probe child outlived bench"

    proc = subprocess.Popen([str(pasada_bin), "bench", "-m", str(model), "-p", "0", "-n", "64", "-r", "1000",
                             "-t", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in proc.stderr:  # progress: the first timed run has ended
            if "run 1/" in line:
                break
        procs = processes_with(str(model))
        children = {pid: rss for pid, rss in procs.items() if pid != proc.pid}
        assert len(children) == 1, procs
        # the child still holds the buffer it read (nearly all of it resident)
        assert list(children.values())[0] >= 0.9 * buffer_bytes, (children, buffer_bytes)
    finally:
        proc.kill()
        proc.wait()
    assert wait_for(lambda: not processes_with(str(model)), 10), "the probe child outlived a killed bench"


def test_probe_child_killed_is_a_clear_error(pasada_bin, smollm2, tmp_path):
    """A probe child that dies (killed, out of memory) fails the benchmark
    with one line and exit 1; sending it the next request must not kill
    bench with SIGPIPE."""
    model = tmp_path / f"probe-killed-{os.getpid()}.gguf"
    model.symlink_to(smollm2)
    proc = subprocess.Popen([str(pasada_bin), "bench", "-m", str(model), "-p", "0", "-n", "16", "-r", "3",
                             "-t", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "run 1/" in line:
            break
    for pid in processes_with(str(model)):
        if pid != proc.pid:
            os.kill(pid, signal.SIGKILL)
    lines += proc.stderr.readlines()
    assert proc.wait(timeout=120) == 1, lines
    assert lines[-1].startswith("pasada bench: ") and "probes' process" in lines[-1], lines
