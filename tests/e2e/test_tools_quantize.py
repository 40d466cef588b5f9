"""`pasada quantize` on the real model: its files load in llama.cpp and agree
with pasada; the plan's rules and sizes; metadata kept; failures leave no file.

tests/fixtures/quantize/smollm2.npz (scripts/make-quantize-fixtures.py) holds,
for each output type, the sha256 of the file pasada wrote from
SmolLM2-135M-Instruct Q4_1 and llama.cpp's log-probabilities on two prompts
from that very file (llama-cpp-python loaded it: that is the proof that the
file loads in llama.cpp). Here pasada quantizes again, the sha256 must be the
same (so the file checked is the file llama.cpp read: the quantizers are
deterministic, whatever the thread count), and pasada's logits on the file
must agree with llama.cpp's:
- mean KL(llama.cpp || pasada) <= KL_MAX over the partition {llama.cpp's top
  tokens holding 99% of its probability, each alone} + {the rest}, as
  tests/e2e/test_logit_parity.py computes it (a lower bound of the full KL);
- top-1 agreement >= TOP1_MIN, and wherever the top tokens differ llama.cpp's
  own top-1 / top-2 log-probability gap is below NEAR_TIE: the engines may
  order a near-tie differently, nothing else.
The bounds are set from what the engine shows on the unquantized source file
itself: when these fixtures were made, pasada against llama.cpp on
SmolLM2-135M-Instruct.Q4_1.gguf (the file test_logit_parity.py checks, and the
file `--type Q4_1` reproduces byte for byte) gave a mean KL of 3.6e-3 and
top-1 0.97 on these prompts; the quantized files gave 3.5e-3 to 9.1e-3 and
0.90 to 1.00 (68 positions: one position is 1.5%). A file that is not the
one llama.cpp read is far off: pasada's Q4_0 file scored against llama.cpp's
numbers for the Q4_K file gives KL 0.44, top-1 0.78. Tighten KL_MAX and
TOP1_MIN with the engine's parity.
Each quantized file also passes `pasada verify` (quantize, load, verify: the
round trip for every output type).
Run with pytest -s to see the numbers. See docs/tools.md.
"""
import hashlib
import json
import subprocess

import gguf
import numpy as np
import pytest

from conftest import FIXTURES

FIXTURE = FIXTURES / "quantize" / "smollm2.npz"
KL_MAX = 2e-2
TOP1_MIN = 0.85
NEAR_TIE = 1.0
# llama.cpp's top tokens kept per position hold at least this much of its
# probability on average (the rest is one bucket of the partition KL):
# 0.99 of it but for Q2_K and MXFP4, whose flatter distributions reach
# 0.989 and 0.985 (one position 0.81) within the fixture's 4096 tokens a
# position.
MASS_MIN = 0.98


def load_fixture():
    with np.load(FIXTURE) as f:
        return {k: f[k] for k in f.files}


DATA = load_fixture()
TYPES = [str(t) for t in DATA["types"]]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def run(*args, check=True):
    proc = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=900)
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


@pytest.fixture(scope="module")
def source(smollm2):
    if sha256(smollm2) != str(DATA["source_sha256"]):
        pytest.fail(f"{smollm2} is not the file the quantize fixture was made from (sha256 differs)")
    return smollm2


def log_softmax(x):
    x = np.asarray(x, np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def partition_kl(ref_top, ref_rest, q_lp, top_ids):
    p_top = np.exp(ref_top.astype(np.float64))
    mask = np.ones_like(q_lp, dtype=bool)
    mask[top_ids] = False
    rest = q_lp[mask]
    m = rest.max()
    q_rest = m + np.log(np.exp(rest - m).sum())
    return float(np.sum(p_top * (ref_top - q_lp[top_ids])) + np.exp(ref_rest) * (ref_rest - q_rest))


def pasada_logits(build_dir, model, prompts, tmp_path):
    ids = tmp_path / "ids.txt"
    ids.write_text("".join(" ".join(str(int(t)) for t in p) + "\n" for p in prompts))
    run(build_dir / "pasada_eval", "logits", model, ids, tmp_path)
    out = []
    for i, p in enumerate(prompts):
        f = tmp_path / f"prompt{i}.f32"
        out.append(np.fromfile(f, dtype="<f4").reshape(len(p), -1))
        f.unlink()
    return out


def prompts():
    off = DATA["prompt_offsets"]
    return [DATA["prompt_ids"][off[i]:off[i + 1]] for i in range(len(off) - 1)]


@pytest.mark.parametrize("qtype", TYPES)
def test_quantized_file_agrees_with_llama_cpp(qtype, pasada_bin, build_dir, source, tmp_path):
    out = tmp_path / f"smollm2-{qtype}.gguf"
    run(pasada_bin, "quantize", source, out, "--type", qtype, "-q")
    assert not (tmp_path / f"{out.name}.tmp").exists()
    assert out.stat().st_size == int(DATA[f"{qtype}_bytes"])
    assert sha256(out) == str(DATA[f"{qtype}_sha256"]), \
        f"{qtype}: not the file llama.cpp read when the fixture was made (quantizers changed? rerun " \
        "scripts/make-quantize-fixtures.py)"

    logits = pasada_logits(build_dir, out, prompts(), tmp_path)
    # The round trip: the quantized file loads and its fast path still
    # computes what the file means (pasada verify against its reference
    # path). 4 prompts x 32 tokens: with 32 positions one flipped near-tie
    # moved top-1 by 3%, and a change of summation order alone (same
    # accuracy: mean KL 3.4e-3 either way on the Q4_1 file) swung it from
    # 97% to 88%. Bounds as against llama.cpp below (top-1 >= TOP1_MIN);
    # these files are quantized twice (from the Q4_1 source), and the
    # Q4_K one's last layer reaches a relative error of 0.5-0.75 at one
    # token, so the per-token bound is 1; the per-layer mean keeps the
    # default 0.05.
    v = run(pasada_bin, "verify", "-m", out, "-n", "32", "-q", "--json", "--tol-top1", str(TOP1_MIN),
            "--tol-hidden-max", "1")
    assert json.loads(v.stdout)["pass"], v.stdout
    out.unlink()
    offs = DATA[f"{qtype}_top_offsets"]
    ids, lps, rest = DATA[f"{qtype}_top_ids"].astype(np.int64), DATA[f"{qtype}_top_logprobs"], DATA[f"{qtype}_rest_logprob"]
    amax = DATA[f"{qtype}_argmax"]
    kls, agree, n, ties = [], 0, 0, []
    for lg in logits:
        lq = log_softmax(lg)
        for j in range(len(lq)):
            a, b = offs[n], offs[n + 1]
            kls.append(partition_kl(lps[a:b], rest[n], lq[j], ids[a:b]))
            if np.argmax(lq[j]) == amax[n]:
                agree += 1
            else:
                ties.append(float(lps[a] - lps[a + 1]))  # llama.cpp's top-1 minus top-2
            n += 1
    mass = np.add.reduceat(np.exp(lps.astype(np.float64)), offs[:-1])
    top1, kl = agree / n, float(np.mean(kls))
    print(f"\n  {qtype}: {n} positions, top-1 agreement {top1:.4f}, mean KL {kl:.2e} (max {max(kls):.2e}), "
          f"llama.cpp top-K mass mean {mass.mean():.4f}; llama.cpp's top-2 gaps where they differ "
          f"{[round(g, 3) for g in ties]}", end="")
    assert mass.mean() >= MASS_MIN
    assert kl <= KL_MAX, f"{qtype}: mean KL {kl:.3e} > {KL_MAX}"
    assert top1 >= TOP1_MIN, f"{qtype}: top-1 agreement {top1:.4f} < {TOP1_MIN}"
    assert all(g < NEAR_TIE for g in ties), f"{qtype}: top tokens differ where llama.cpp's gap is {max(ties):.3f}"


def quantize_json(pasada_bin, *args):
    return json.loads(run(pasada_bin, "quantize", *args, "--json", "-q").stdout)


def test_dry_run_plan_is_the_file(pasada_bin, source, tmp_path):
    """--dry-run predicts the exact output size and every tensor's type; the
    real run writes that; every metadata key survives."""
    plan = quantize_json(pasada_bin, source, "--type", "Q4_K_M", "--dry-run")
    assert plan["dry_run"] and plan["type"] == "Q4_K_M"
    out = tmp_path / "q.gguf"
    done = quantize_json(pasada_bin, source, out, "--type", "q4_k_m", "-t", "1")
    assert not done["dry_run"] and done["seconds"] >= 0
    assert out.stat().st_size == plan["output_bytes"] == done["output_bytes"]
    # one thread here, two when the fixture was made: the same bytes
    assert sha256(out) == str(DATA["Q4_K_M_sha256"])
    r_in, r_out = gguf.GGUFReader(str(source)), gguf.GGUFReader(str(out))
    got = {t.name: t.tensor_type.name for t in r_out.tensors}
    assert got == {t["name"]: t["to"] for t in plan["tensors"]}
    # the rules on SmolLM2 (rows of 576 and 1536; 30 layers): see docs/tools.md
    assert got["token_embd.weight"] == "Q8_0"            # tied output matrix, 576 % 256 != 0
    assert got["blk.0.ffn_down.weight"] == "Q6_K"        # _M: first eighth
    assert got["blk.3.ffn_down.weight"] == "Q4_K"
    assert got["blk.5.ffn_down.weight"] == "Q6_K"        # (5 - 30/8) % 3 == 2
    assert got["blk.0.attn_v.weight"] == "Q8_0"          # Q6_K, row 576: fallback
    assert got["blk.3.attn_q.weight"] == "Q5_0"          # Q4_K, row 576: fallback
    assert got["blk.0.attn_norm.weight"] == "F32"
    # metadata: every key kept with its value, file type and quantization version set
    for name, field in r_in.fields.items():
        if name.startswith("GGUF.") or name in ("general.file_type", "general.quantization_version"):
            continue
        assert name in r_out.fields, f"key {name} lost"
        assert field.contents() == r_out.fields[name].contents(), f"key {name} changed"
    assert r_out.fields["general.file_type"].contents() == 15
    assert r_out.fields["general.quantization_version"].contents() == 2


def test_gemma_q4_k_m_recipe_matches_llama_cpp(pasada_bin, gemma3):
    """gemma-3-270m-q4_k_m.gguf was made by llama.cpp's quantize: pasada's plan
    for Q4_K_M gives every tensor the type llama.cpp gave it (rows of 640 fall
    back, the _M layers of 18), and so the same size to the byte."""
    plan = quantize_json(pasada_bin, gemma3, "--type", "Q4_K_M", "--dry-run")
    changed = [t["name"] for t in plan["tensors"] if t["converted"]]
    assert changed == [], f"tensors whose type differs from llama.cpp's Q4_K_M: {changed[:10]}"
    assert plan["output_bytes"] == gemma3.stat().st_size


def test_round_trip_through_f16(pasada_bin, build_dir, source, tmp_path):
    """From a float file: Q4_1 -> F16 keeps the weights (to F16 rounding; the
    KL left is that of F16 matrix products on float activations against Q4_1
    ones on 8-bit activations), F16 -> Q8_0 stays close."""
    f16, q8 = tmp_path / "f16.gguf", tmp_path / "q8.gguf"
    run(pasada_bin, "quantize", source, f16, "--type", "F16", "-q")
    run(pasada_bin, "quantize", f16, q8, "--type", "Q8_0", "-q")
    ps = prompts()
    ref = [log_softmax(x) for x in pasada_logits(build_dir, source, ps, tmp_path)]
    for path, kl_max in ((f16, 1e-2), (q8, 2e-2)):
        got = [log_softmax(x) for x in pasada_logits(build_dir, path, ps, tmp_path)]
        kl = np.concatenate([np.sum(np.exp(r) * (r - g), axis=-1) for r, g in zip(ref, got)])
        top1 = np.mean(np.concatenate([r.argmax(-1) == g.argmax(-1) for r, g in zip(ref, got)]))
        print(f"\n  {path.name}: mean KL from the Q4_1 source {kl.mean():.2e}, top-1 {top1:.3f}", end="")
        assert kl.mean() <= kl_max and top1 >= 0.9
        path.unlink()


def test_failures_leave_no_file(pasada_bin, source, tmp_path):
    missing = tmp_path / "no-such-dir" / "out.gguf"
    p = run(pasada_bin, "quantize", source, missing, "--type", "Q8_0", "-q", check=False)
    assert p.returncode == 1 and p.stderr.startswith("pasada: error:") and len(p.stderr.splitlines()) == 1
    assert not missing.exists() and not missing.parent.exists()
    p = run(pasada_bin, "quantize", source, source, "--type", "Q8_0", "-q", check=False)
    assert p.returncode == 1 and "overwrite the input" in p.stderr
    p = run(pasada_bin, "quantize", tmp_path / "none.gguf", tmp_path / "o.gguf", "--type", "Q8_0", check=False)
    assert p.returncode == 1 and not (tmp_path / "o.gguf").exists()


@pytest.mark.parametrize("args,needle", [
    ([], "no input file"),
    (["in.gguf"], "no output file"),
    (["in.gguf", "out.gguf"], "no output type"),
    (["in.gguf", "out.gguf", "--type", "Q3_K_XL"], "unknown type"),
    (["in.gguf", "out.gguf", "--type", "Q8_0", "-t", "0"], "thread count"),
    (["in.gguf", "out.gguf", "extra", "--type", "Q8_0"], "unexpected argument"),
    (["--bogus"], "unknown option"),
])
def test_usage_errors(pasada_bin, args, needle):
    p = run(pasada_bin, "quantize", *args, check=False)
    assert p.returncode == 2 and needle in p.stderr


def test_help_lists_every_type(pasada_bin):
    out = run(pasada_bin, "quantize", "--help").stdout
    for t in TYPES + ["F16", "BF16", "--dry-run", "--pure", "--json"]:
        assert t in out


@pytest.mark.parametrize("qtype", ["IQ4_NL", "IQ4_XS", "MXFP4"])
def test_table_lookup_presets(pasada_bin, tmp_path, qtype):
    """The tiny llama (rows of 64 and 128) quantized to the table-lookup
    types: IQ4_XS falls back to IQ4_NL (no row is a multiple of 256), the
    output matrix (Q6_K) to Q8_0; the file reads back in the gguf package
    with values equal to pasada's own dequantization of them, and runs."""
    src = FIXTURES / "tiny" / "llama.gguf"
    out = tmp_path / "q.gguf"
    run(pasada_bin, "quantize", src, out, "--type", qtype)
    want = "IQ4_NL" if qtype == "IQ4_XS" else qtype
    reader = gguf.GGUFReader(out)
    types = {t.name: t.tensor_type.name for t in reader.tensors}
    assert types["blk.0.attn_q.weight"] == want and types["blk.1.ffn_down.weight"] == want, types
    assert types["output.weight"] == "Q8_0", types  # Q6_K, rows of 64: its fallback
    t = next(t for t in reader.tensors if t.name == "blk.0.ffn_up.weight")
    ref = gguf.quants.dequantize(np.asarray(t.data).view(np.uint8), t.tensor_type).reshape(-1)
    raw = tmp_path / "w.bin"
    raw.write_bytes(np.asarray(t.data).view(np.uint8).tobytes())
    run(pasada_bin.parent / "quant_tool", "dequant", want, raw, tmp_path / "w.f32")
    assert np.array_equal(np.fromfile(tmp_path / "w.f32", dtype=np.float32).view(np.uint32), ref.view(np.uint32))
    p = run(pasada_bin, "run", "-m", out, "-p", "hello", "-n", "4", "--temp", "0")
    assert p.returncode == 0
