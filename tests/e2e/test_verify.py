"""`pasada verify`: the fast path against the reference path on the real
models, for every kernel table this CPU has; a deliberately broken kernel is
caught (tests/tools/verify_fault.c injects one); --save / --against round
trip, which also shows that decoding one token per call gives the very bits
of a batched prefill; malformed logits files and bad arguments get one line
and the documented exit status. The quantize round trip (quantize, load,
verify) for every output type is in test_tools_quantize.py.
Prompts are cut short (-n) to keep the slow reference path quick."""
import json
import subprocess

import gguf
import numpy as np
import pytest

N = "12"  # tokens per prompt: 4 built-in prompts, 48 positions


def run(*args, timeout=600):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)


def verify_json(pasada_bin, model, *args):
    p = run(pasada_bin, "verify", "-m", model, "-n", N, "-q", "--json", *args)
    assert p.returncode in (0, 3), p.stderr
    return p.returncode, json.loads(p.stdout)


@pytest.mark.parametrize("backend,against", [("ref", "cpu"), ("cpu:scalar", "cpu"), ("ref", "ref")])
def test_any_two_backends(pasada_bin, smollm2, backend, against):
    """verify compares any two backends; a backend against itself is exact."""
    p = run(pasada_bin, "verify", "-m", smollm2, "-n", "12", "-q", "--json", "--backend", backend,
            "--against-backend", against, "-b", "5")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["backend"] == backend and d["against"] == against and d["pass"]
    worst = max(l["max_rel_err"] for l in d["layers"])
    if backend == against:
        assert worst == 0 and d["logits"]["kl_mean"] == 0 and d["logits"]["top1"] == 1
    else:
        assert worst > 0


@pytest.mark.parametrize("kernels", ["scalar", "avx2", "avx512", "avx512_vnni", "amx"])
def test_every_kernel_table_passes(pasada_bin, smollm2, kernels):
    p = run(pasada_bin, "verify", "-m", smollm2, "-n", N, "-q", "--json", "--kernels", kernels, "-b", "7")
    if p.returncode == 1 and "has no" in p.stderr:
        pytest.skip(f"this CPU has no {kernels} instructions")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["kernels"] == kernels and d["pass"] and d["failure"] == ""
    assert len(d["layers"]) == 30 and d["positions"] == 48
    worst = max(l["mean_rel_err"] for l in d["layers"])
    print(f"\n  {kernels}: worst layer mean rel err {worst:.3e}, KL {d['logits']['kl_mean']:.2e}, "
          f"top-1 {d['logits']['top1']:.3f}", end="")
    # The fast path is close to the reference, but not identical (8-bit activations).
    assert 0 < worst < d["tolerances"]["hidden_mean"]
    assert 0 < d["logits"]["kl_mean"] < d["tolerances"]["kl_mean"]


def test_gemma3_passes_with_table_output(pasada_bin, gemma3):
    p = run(pasada_bin, "verify", "-m", gemma3, "-n", "12", "-q")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("pasada verify: gemma-3-270m-q4_k_m.gguf")
    assert sum(1 for ln in lines if ln.split() and ln.split()[0].isdigit()) == 18  # one row per layer
    assert lines[-1].startswith("PASS")


@pytest.mark.parametrize("mode", ["tail", "sign"])
def test_broken_kernel_is_caught(build_dir, smollm2, mode):
    p = run(build_dir / "verify_fault", smollm2, mode, N)
    assert p.returncode == 3, p.stderr
    d = json.loads(p.stdout)
    assert not d["pass"] and d["first_bad_layer"] == 0, d["failure"]
    assert d["failure"].startswith("layer 0:")


def test_wrapped_but_intact_kernel_passes(build_dir, smollm2):
    # The same wrapper with the fault switched off: what fails above is the fault.
    p = run(build_dir / "verify_fault", smollm2, "none", N)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.fixture(scope="module")
def saved(pasada_bin, smollm2, tmp_path_factory):
    """The fast path's logits on the built-in prompts, saved by --save."""
    path = tmp_path_factory.mktemp("verify") / "logits.gguf"
    rc, d = verify_json(pasada_bin, smollm2, "--save", path)
    assert rc == 0
    return path, d


def test_save_then_against_is_exact_even_one_token_per_call(pasada_bin, smollm2, saved):
    saved, d = saved
    r = gguf.GGUFReader(saved)
    n_vocab = int(r.fields["logits.n_vocab"].parts[-1][0])
    logits = next(t for t in r.tensors if t.name == "logits")
    assert n_vocab == 49152 and logits.data.shape == (d["positions"], n_vocab)
    # Batched prefill (64 per call) saved; one token per call compared: same bits.
    rc, a = verify_json(pasada_bin, smollm2, "--against", saved, "-b", "1")
    assert rc == 0 and a["against"].startswith("pasada SmolLM2")
    assert "layers" not in a
    assert a["logits"] == {"kl_mean": 0, "kl_max": 0, "kl_max_position": 0, "top1": 1, "max_abs_diff": 0}


def write_logits(path, tokens, offsets, logits, n_vocab=None, source="test"):
    w = gguf.GGUFWriter(path, "logits")
    w.add_string("logits.source", source)
    w.add_uint32("logits.n_vocab", logits.shape[1] if n_vocab is None else n_vocab)
    w.add_array("logits.tokens", [int(t) for t in tokens])
    w.add_array("logits.prompt_offsets", [int(o) for o in offsets])
    w.add_tensor("logits", logits.astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_against_wrong_logits_fails(pasada_bin, smollm2, saved, tmp_path):
    r = gguf.GGUFReader(saved[0])
    toks = [int(x) for x in r.fields["logits.tokens"].contents()]
    offs = [int(x) for x in r.fields["logits.prompt_offsets"].contents()]
    logits = np.array(next(t for t in r.tensors if t.name == "logits").data)
    shifted = tmp_path / "shifted.gguf"  # every row one position late: a misaligned engine
    write_logits(shifted, toks, offs, np.roll(logits, 1, axis=0))
    rc, d = verify_json(pasada_bin, smollm2, "--against", shifted)
    assert rc == 3 and not d["pass"] and d["failure"].startswith("logits:")


@pytest.mark.parametrize("case,needle", [
    ("vocab", "vocabulary"), ("token", "out of the vocabulary"), ("offsets", "out of order"),
    ("shape", "expected"), ("notgguf", "")])
def test_malformed_logits_files(pasada_bin, smollm2, tmp_path, case, needle):
    f = tmp_path / "bad.gguf"
    V = 49152
    lg = np.random.default_rng(1).standard_normal((3, V)).astype(np.float32)
    if case == "vocab":
        write_logits(f, [1, 2, 3], [0, 3], lg, n_vocab=V + 1)
    elif case == "token":
        write_logits(f, [1, V, 3], [0, 3], lg)
    elif case == "offsets":
        write_logits(f, [1, 2, 3], [0, 2, 1, 3], lg)
    elif case == "shape":
        write_logits(f, [1, 2, 3, 4], [0, 4], lg)
    else:
        f.write_bytes(b"this is not a GGUF file at all")
    p = run(pasada_bin, "verify", "-m", smollm2, "--against", f, "-q")
    assert p.returncode == 1, p.stdout + p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and needle in p.stderr


def test_prompt_file(pasada_bin, smollm2, tmp_path):
    f = tmp_path / "prompts.txt"
    f.write_text("Hello there, how are you today?\n\n   \nOne two three four five six seven.\r\n")
    rc, d = verify_json(pasada_bin, smollm2, "-f", f)
    assert rc == 0 and d["prompts"] == 2
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n")
    p = run(pasada_bin, "verify", "-m", smollm2, "-f", empty, "-q")
    assert p.returncode == 1 and "no prompt" in p.stderr


@pytest.mark.parametrize("args,code,needle", [
    ([], 2, "no model"),
    (["-m", "M", "--kernels", "neon"], 2, "--kernels"),
    (["-m", "M", "--tol-top1", "2"], 2, "--tol-top1"),
    (["-m", "M", "--tol-kl", "-1"], 2, "--tol-kl"),
    (["-m", "M", "-n", "0"], 2, "--max-tokens"),
    (["-m", "M", "-f", "x", "--against", "y"], 2, "--against"),
    (["-m", "/nonexistent.gguf"], 1, "nonexistent"),
    (["-m", "M", "--backend", "tpu"], 1, "unknown backend 'tpu'"),
    (["-m", "M", "--against-backend", "cpu:neon"], 1, "no such kernel table"),
    (["-m", "M", "--kernels", "avx2", "--backend", "ref"], 2, "--kernels and --backend"),
    (["-m", "M", "--against", "y", "--against-backend", "ref"], 2, "--against-backend"),
])
def test_usage_and_runtime_errors(pasada_bin, smollm2, args, code, needle):
    args = [str(smollm2) if a == "M" else a for a in args]
    p = run(pasada_bin, "verify", *args)
    assert p.returncode == code, p.stderr
    assert needle in p.stderr


def test_help(pasada_bin):
    p = run(pasada_bin, "verify", "--help")
    assert p.returncode == 0
    for opt in ("--against", "--save", "--kernels", "--backend", "--against-backend", "--tol-hidden", "--tol-kl",
                "--tol-top1", "exit status"):
        assert opt in p.stdout
