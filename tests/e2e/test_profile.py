"""`pasada profile`: the op times add up to the wall time (within 5%) for
prefill and decode on SmolLM2 and Gemma 3; the JSON report, the table, the
Chrome trace and the SVG chart are well formed and consistent with each
other; bad arguments exit 2 and runtime failures exit 1, each with one line on
stderr. Functional only: no assertion on speed."""
import json
import subprocess
import xml.etree.ElementTree as ET

import pytest

from conftest import FIXTURES

BOUNDS = {"memory", "compute", "overhead"}
LAYER_MATMULS = ("attn_qkv", "attn_output", "ffn_gate_up", "ffn_down")


def run(pasada_bin, *args, timeout=600):
    return subprocess.run([str(pasada_bin), "profile", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def smol(pasada_bin, smollm2, tmp_path_factory):
    """SmolLM2 with the ceilings measured, a trace and a chart."""
    d = tmp_path_factory.mktemp("profile")
    trace, svg = d / "trace.json", d / "chart.svg"
    res = run(pasada_bin, "-m", smollm2, "-p", 48, "-n", 12, "-t", 2, "--json", "--trace", trace, "--svg", svg)
    assert res.returncode == 0, res.stderr
    return {"report": json.loads(res.stdout), "stdout": res.stdout, "stderr": res.stderr, "trace": trace,
            "svg": svg}


def profile_gemma(pasada_bin, gemma3):
    res = run(pasada_bin, "-m", gemma3, "-p", 32, "-n", 16, "-t", 2, "--json", "--no-ceilings", "-q")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def gemma(pasada_bin, gemma3):
    return profile_gemma(pasada_bin, gemma3)


def _uncovered(r):
    """The phases whose op times miss the wall time by more than 5%."""
    return [f"{name}: ops {ph['ops_s']:.4f} s vs wall {ph['wall_s']:.4f} s"
            for name, ph in r["phases"].items() if name in ("prefill", "decode")
            and abs(ph["wall_s"] - ph["ops_s"]) > 0.05 * ph["wall_s"]]


def _check_sums(r):
    """Op times add up to the wall time within 5%, per phase, and the views agree."""
    assert not _uncovered(r), _uncovered(r)
    for name in ("prefill", "decode"):
        ph = r["phases"][name]
        wall, ops = ph["wall_s"], ph["ops_s"]
        assert wall > 0 and ops > 0
        assert ph["coverage"] == pytest.approx(ops / wall)
        assert ph["overhead_s"] == pytest.approx(wall - ops, abs=1e-9)
        # every (op, layer) row, and every by-name row but the overhead, sum to ops_s
        assert sum(o["time_s"] for o in ph["ops"]) == pytest.approx(ops, rel=1e-6)
        named = [o for o in ph["by_name"] if o["kind"] != "overhead"]
        assert sum(o["time_s"] for o in named) == pytest.approx(ops, rel=1e-6)
        overhead = [o for o in ph["by_name"] if o["kind"] == "overhead"]
        assert len(overhead) == 1 and overhead[0]["time_s"] == pytest.approx(wall - ops, abs=1e-9)
        # per layer: the layer-indexed rows
        per_layer = sum(o["time_s"] for o in ph["ops"] if o["layer"] is not None)
        assert sum(ph["layers_s"]) == pytest.approx(per_layer, rel=1e-6)


def test_op_times_add_up_smollm2(smol):
    _check_sums(smol["report"])


def test_op_times_add_up_gemma3(gemma, pasada_bin, gemma3):
    # Gemma 3's steps are short (16 tokens of a 270M model: ~0.2 s of decode),
    # so one preemption of the process between ops on a busy machine can take
    # more than 5% of a phase: such a run is repeated, at most twice.
    r = gemma
    for _ in range(2):
        if not _uncovered(r):
            break
        r = profile_gemma(pasada_bin, gemma3)
    _check_sums(r)


def test_json_structure(smol, smollm2):
    r = smol["report"]
    assert r["model"] == smollm2.name and r["arch"] == "llama" and r["layers"] == 30
    assert r["threads"] == 2 and r["profiler"] is True
    c = r["ceilings"]
    for key in ("read_gbs", "fma_gflops", "int8_gops"):
        assert c[key] > 0
    pre, dec = r["phases"]["prefill"], r["phases"]["decode"]
    assert pre["tokens"] == 48 and dec["tokens"] == 12 and dec["decode_calls"] == 12
    assert len(pre["layers_s"]) == 30 and all(t > 0 for t in pre["layers_s"])
    names = {o["name"] for o in dec["by_name"]}
    for n in LAYER_MATMULS + ("attention", "token_embd", "rope_table", "output", "sample",
                              "(engine overhead)"):
        assert n in names, n
    # the profile times the backend's ops: the norms, RoPE and the K/V store are part of the
    # products' ops (attn_qkv, ffn_gate_up, output), and (llama) the residual adds of
    # attn_output's and ffn_down's
    for n in ("attn_norm", "ffn_norm", "rope", "kv_store", "output_norm", "attn_residual", "ffn_residual"):
        assert n not in names, n
    assert "tokenize" in {o["name"] for o in pre["by_name"]}
    ops = {o["name"]: o for o in dec["ops"]}
    for layer in (0, 29):
        for m in LAYER_MATMULS:
            o = ops[f"blk.{layer}.{m}"]
            assert o["layer"] == layer and o["kind"] == "matmul" and o["calls"] == 12
            assert o["bytes"] > 0 and o["flops"] > 0 and o["gbs"] > 0 and o["gflops"] > 0
            assert o["bound"] in BOUNDS
            assert o["time_at_bandwidth_s"] > 0 and o["time_at_compute_s"] > 0
            # the gap is the time minus the larger of the two ceiling times
            roof = max(o["time_at_bandwidth_s"], o["time_at_compute_s"])
            assert o["gap_s"] == pytest.approx(o["time_s"] - roof, rel=1e-6, abs=1e-12)
    # a decode step reads every weight of a layer's matrices once (gate and up: two)
    assert ops["blk.0.ffn_gate_up"]["bytes"] > 2 * 576 * 1536 * 0.5 * 12
    for ph in (pre, dec):
        for o in ph["ops"] + ph["by_name"]:
            assert o["bound"] in BOUNDS
        gaps = [o["gap_s"] for o in ph["ops"]]
        assert gaps == sorted(gaps, reverse=True)  # largest gap first
    assert "measuring this machine's ceilings" in smol["stderr"]


def test_trace_is_chrome_trace_json(smol):
    r = smol["report"]
    t = json.loads(smol["trace"].read_text())
    events = t["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    for e in spans:
        assert e["dur"] >= 0 and e["ts"] >= 0 and e["pid"] == 1 and isinstance(e["name"], str)
    ops = [e for e in spans if e["cat"] not in ("step", "phase")]
    phases = {e["name"]: e for e in spans if e["cat"] == "phase"}
    steps = [e for e in spans if e["cat"] == "step"]
    total_ops = sum(r["phases"][p]["ops_s"] for p in ("prefill", "decode"))
    # durations are in microseconds; printed with 3 decimals
    assert sum(e["dur"] for e in ops) / 1e6 == pytest.approx(total_ops, rel=1e-3)
    for name in ("prefill", "decode"):
        assert phases[name]["dur"] / 1e6 == pytest.approx(r["phases"][name]["wall_s"], rel=1e-3)
        inside = [e for e in ops if e["args"]["phase"] == name]
        assert all(phases[name]["ts"] - 0.01 <= e["ts"] and e["ts"] + e["dur"] <= phases[name]["ts"] +
                   phases[name]["dur"] + 0.01 for e in inside)
    assert len(steps) == 1 + 12  # one prefill batch, 12 decode steps
    # one event per op call
    calls = sum(o["calls"] for p in ("prefill", "decode") for o in r["phases"][p]["ops"])
    assert len(ops) == calls
    assert any(e["name"] == "blk.3.ffn_gate_up" for e in ops)


def test_svg_is_well_formed(smol):
    root = ET.parse(smol["svg"]).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "prefill" in texts and "decode" in texts and "ffn_gate_up" in texts
    assert len(list(root.iter("{http://www.w3.org/2000/svg}rect"))) > 20


def test_json_gemma3_ops(gemma):
    assert gemma["arch"] == "gemma3" and gemma["ceilings"] is None
    names = {o["name"] for o in gemma["phases"]["decode"]["by_name"]}
    for n in ("post_attention_norm", "post_ffw_norm", "output"):
        assert n in names
    # the head norms are part of the q/k/v product's op
    for n in ("attn_q_norm", "attn_k_norm", "attn_norm", "rope", "kv_store"):
        assert n not in names, n
    for o in gemma["phases"]["decode"]["ops"]:
        assert o["bound"] is None and o["gap_s"] is None  # no ceilings: no verdicts


def test_table(pasada_bin, smollm2):
    res = run(pasada_bin, "-m", smollm2, "-p", 16, "-n", 4, "-t", 1, "--no-ceilings", "--top", 5)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    for s in ("phase", "prefill", "decode", "covered", "(engine overhead)", "ffn_down", "per layer",
              "blk.", "not measured (--no-ceilings)"):
        assert s in out, s
    assert "profile:" in res.stderr  # progress on stderr


@pytest.mark.parametrize("arch", ["qwen2", "qwen3", "gemma3"])
def test_tiny_archs(pasada_bin, arch):
    """F32 weights (the tiny fixtures) take the products' unfused path; the profile still
    shows one op per backend call: q/k/v with its biases and head norms."""
    res = run(pasada_bin, "-m", FIXTURES / "tiny" / f"{arch}.gguf", "-p", 8, "-n", 2, "-t", 1, "--json",
              "--no-ceilings", "-q")
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    names = {o["name"] for o in r["phases"]["prefill"]["by_name"]}
    assert {"attn_qkv", "attention", "attn_output", "ffn_gate_up", "ffn_down", "output"} <= names
    assert not names & {"attn_qkv_bias", "attn_q_norm", "rope", "kv_store"}
    assert res.stderr == ""


def test_off_and_prefill_only(pasada_bin, smollm2):
    res = run(pasada_bin, "-m", smollm2, "-p", 8, "-n", 2, "-t", 1, "--off", "--json", "-q")
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert r["profiler"] is False
    assert r["phases"]["prefill"]["wall_s"] > 0 and r["phases"]["decode"]["wall_s"] > 0
    assert "ops" not in r["phases"]["prefill"]
    res = run(pasada_bin, "-m", smollm2, "-p", 8, "-n", 0, "-t", 1, "--no-ceilings", "--json", "-q")
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert r["phases"]["decode"] is None and r["phases"]["prefill"]["ops_s"] > 0


def test_parallel_sequences(pasada_bin, smollm2):
    """--parallel 4: each decode step is one forward pass of 4 tokens (one per
    sequence), the op times still add up, and the KV cache type is reported."""
    res = run(pasada_bin, "-m", smollm2, "-p", 20, "-n", 5, "-t", 2, "--parallel", 4, "--json", "--no-ceilings",
              "-q", "--kv-type", "f32")
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert r["n_parallel"] == 4 and r["kv_type"] == "f32"
    dec = r["phases"]["decode"]
    assert dec["tokens"] == 20 and dec["decode_calls"] == 5
    ops = {o["name"]: o for o in dec["by_name"]}
    assert ops["attention"]["calls"] == 5 * 30 and ops["attention"]["tokens"] == 5 * 30 * 4
    assert ops["output"]["tokens"] == 20  # every sequence's logits
    # the pool's idle time while the other sequences were prefilled (untimed)
    # is not charged to the decode phase: it cannot exceed its wall time
    assert dec["barrier_idle_s"] <= dec["wall_s"]
    _check_sums(r)
    res = run(pasada_bin, "-m", smollm2, "-p", 8, "-n", 2, "-t", 1, "--no-ceilings", "-q")
    assert res.returncode == 0 and "1 sequence, KV f16" in res.stdout


def test_vulkan_gpu_times_per_shader(pasada_bin, smollm2, vulkan_device, tmp_path):
    """On a Vulkan device each phase reports the GPU time of every shader
    (timestamps after every command) instead of host timers around the ops;
    the shaders' times add up to the phase's GPU time, which fits in its wall
    time. Few tokens: lavapipe runs at about 1 token a second."""
    svg = tmp_path / "gpu.svg"
    res = run(pasada_bin, "-m", smollm2, "--device", vulkan_device, "-p", 4, "-n", 2, "--json", "--svg", svg)
    assert res.returncode == 0, res.stderr
    r = json.loads(res.stdout)
    assert r["backend"] == vulkan_device and r["device"]["api"] == "vulkan"
    assert r["kernels"] == f"vulkan:{r['device']['index']}"
    assert r["timing"] == "gpu_timestamps_per_shader" and r["ceilings"] is None
    for name in ("prefill", "decode"):
        ph = r["phases"][name]
        assert "ops" not in ph and "by_name" not in ph  # no host op timers on a GPU
        shaders = {s["name"]: s for s in ph["shaders"]}
        matmuls = [s for n, s in shaders.items() if n.startswith("matmul_")]
        assert matmuls and all(s["gpu_s"] > 0 and s["commands"] > 0 for s in matmuls), name
        assert {"rms_norm", "attention_f16"} <= set(shaders), name
        assert all(s["gpu_s"] >= 0 for s in ph["shaders"])
        assert sum(s["gpu_s"] for s in ph["shaders"]) == pytest.approx(ph["gpu_s"], rel=1e-6)
        assert [s["gpu_s"] for s in ph["shaders"]] == sorted((s["gpu_s"] for s in ph["shaders"]), reverse=True)
        assert 0 < ph["gpu_s"] <= ph["wall_s"] * 1.05
        assert ph["outside_gpu_s"] == pytest.approx(ph["wall_s"] - ph["gpu_s"], abs=1e-9)
        assert ph["ms_per_token"] == pytest.approx(ph["wall_s"] * 1e3 / ph["tokens"])
    # SmolLM2: 30 layers, 7 products each (q, k, v, o, gate, up, down) per pass
    assert sum(s["commands"] for s in r["phases"]["decode"]["shaders"] if s["kind"] == "matmul") >= 2 * 30 * 4
    root = ET.parse(svg).getroot()
    texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "prefill" in texts and "decode" in texts and "matmul_" in texts

    res = run(pasada_bin, "-m", smollm2, "--device", vulkan_device, "-p", 2, "-n", 1, "-q")
    assert res.returncode == 0, res.stderr
    assert "GPU timestamps per shader" in res.stdout and "(all shaders)" in res.stdout
    assert "matmul_" in res.stdout and "blk." not in res.stdout
    # no host op trace on a GPU: a usage error before anything runs
    res = run(pasada_bin, "-m", smollm2, "--device", vulkan_device, "--trace", tmp_path / "t.json")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "--trace" in res.stderr
    assert not (tmp_path / "t.json").exists()


def test_help(pasada_bin):
    res = run(pasada_bin, "--help")
    assert res.returncode == 0
    for opt in ("-m", "-p", "-n", "-t", "-b", "--trace", "--svg", "--json", "--no-ceilings", "--off", "--top",
                "--parallel", "--kv-type"):
        assert opt in res.stdout


@pytest.mark.parametrize("args", [
    [],                                    # no model
    ["-m"],                                # option without its value
    ["-m", "x.gguf", "--frobnicate"],      # unknown option
    ["-m", "x.gguf", "-p", "0"],           # a prompt of no tokens
    ["-m", "x.gguf", "-p", "abc"],
    ["-m", "x.gguf", "-p", "12x"],
    ["-m", "x.gguf", "-n", "-1"],
    ["-m", "x.gguf", "-t", "0"],
    ["-m", "x.gguf", "-b", "0"],
    ["-m", "x.gguf", "--seed", "-3"],
    ["-m", "x.gguf", "--top", "many"],
    ["-m", "x.gguf", "--trace", ""],
    ["-m", "x.gguf", "--off", "--svg", "x.svg"],
    ["-m", "x.gguf", "--seed", "seven"],
    ["-m", "x.gguf", "--batch=70000"],
    ["-m", "x.gguf", "--json=yes"],        # a switch given a value
    ["-m", "x.gguf", "stray"],
    ["-m", "x.gguf", "--parallel", "0"],
    ["-m", "x.gguf", "--parallel", "2000"],
    ["-m", "x.gguf", "--kv-type", "f8"],
])
def test_bad_arguments_exit_2(pasada_bin, args):
    res = run(pasada_bin, *args)
    assert res.returncode == 2, res.stderr
    assert res.stdout == ""
    assert len(res.stderr.strip().splitlines()) == 1


def test_missing_model_exits_1(pasada_bin, tmp_path):
    missing = tmp_path / "nope.gguf"
    res = run(pasada_bin, "-m", missing, "-p", 8, "-n", 2)
    assert res.returncode == 1
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0]


def test_invalid_model_exits_1(pasada_bin, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file at all")
    res = run(pasada_bin, "-m", bad, "-p", 8, "-n", 2, "--no-ceilings")
    assert res.returncode == 1
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("flag", ["--trace", "--svg"])
def test_unwritable_output_exits_1(pasada_bin, smollm2, tmp_path, flag):
    path = tmp_path / "no-such-dir" / "out"
    res = run(pasada_bin, "-m", smollm2, "-p", 8, "-n", 2, flag, path)
    assert res.returncode == 1
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0]
