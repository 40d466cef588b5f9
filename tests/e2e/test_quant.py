"""The reference quantizers and dequantizers of src/quant against the `gguf`
Python package (an independent implementation of the same formats).

(a) random blocks of every type, dequantized by quant_tool and by gguf: bit-exact;
(b) tensors of the two real models, dequantized by quant_tool (through our
    GGUF reader) and by gguf's GGUFReader + dequantize: bit-exact;
(c) random float data quantized by quant_tool and by gguf.quants.quantize,
    for every type the package can quantize: byte-identical; for the types
    it cannot (K-quants, Q8_K, Q8_1, IQ4_NL, IQ4_XS), against committed bytes written by
    llama.cpp's reference quantizers (scripts/make-quant-fixtures.py)."""
import pathlib
import subprocess
from collections import defaultdict

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

QUANT_FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "quant"

# Offsets of the fp16 fields (scales, mins, sums) inside each block type.
F16_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0], T.Q8_1: [0, 2],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ4_NL: [0], T.IQ4_XS: [0], T.MXFP4: [],  # MXFP4's exponent byte: any value
    T.IQ2_XXS: [0], T.IQ2_XS: [0], T.IQ2_S: [0], T.IQ3_XXS: [0], T.IQ3_S: [0], T.IQ1_S: [0],
    T.IQ1_M: [],  # its fp16 d is spread over the scale words' top nibbles: any bits
}
BLOCK_TYPES = list(F16_FIELDS) + [T.Q8_K]
N_BLOCKS = 517  # not a round number


def type_size(qtype):
    # gguf's table still has the old 40-byte Q8_1 (float d and s); ggml's,
    # and ours, hold d and s as fp16: 36 bytes. Q8_1 never appears in files.
    return 36 if qtype == T.Q8_1 else GGML_QUANT_SIZES[qtype][1]


def run_tool(build_dir, *args):
    tool = build_dir / "quant_tool"
    if not tool.exists():
        pytest.fail(f"{tool} is missing: build the tree first")
    res = subprocess.run([str(tool), *map(str, args)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def finite_f16_bits(rng, count):
    """Random fp16 bit patterns, any finite value (zero, subnormal, normal)."""
    bits = rng.integers(0, 1 << 16, size=count, dtype=np.uint16)
    bad = (bits & 0x7C00) == 0x7C00
    while bad.any():
        bits[bad] = rng.integers(0, 1 << 16, size=int(bad.sum()), dtype=np.uint16)
        bad = (bits & 0x7C00) == 0x7C00
    return bits


def random_blocks(rng, qtype, n_blocks):
    raw = rng.integers(0, 256, size=(n_blocks, type_size(qtype)), dtype=np.uint8)
    for off in F16_FIELDS.get(qtype, []):
        raw[:, off:off + 2] = finite_f16_bits(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    if qtype == T.Q8_K:  # float32 d, finite and of any magnitude
        d = (rng.standard_normal(n_blocks) * 10.0 ** rng.uniform(-8, 3, n_blocks)).astype(np.float32)
        raw[:, 0:4] = d.view(np.uint8).reshape(n_blocks, 4)
    return raw


def reference_dequantize(raw, qtype):
    """gguf's dequantizer; the package has none for the activation types
    Q8_1 and Q8_K, whose meaning is plainly d * q."""
    if qtype == T.Q8_1:
        d = raw[:, 0:2].copy().view(np.float16).astype(np.float32)
        return (raw[:, 4:].view(np.int8).astype(np.float32) * d).reshape(-1)
    if qtype == T.Q8_K:
        d = raw[:, 0:4].copy().view(np.float32)
        return (raw[:, 4:260].view(np.int8).astype(np.float32) * d).reshape(-1)
    with np.errstate(over="ignore", invalid="ignore"):  # MXFP4 2^127 x 12, IQ1_M inf x 0: both
        return dequantize(raw, qtype).reshape(-1)


def assert_same_floats(ours, ref, what):
    ref = np.asarray(ref, dtype=np.float32).reshape(-1)
    assert ours.shape == ref.shape, what
    same = (ours.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(ours) & np.isnan(ref))
    if not same.all():
        i = int(np.argmin(same))
        pytest.fail(f"{what}: {int((~same).sum())} of {same.size} values differ; "
                    f"first at {i}: ours {ours[i]!r} reference {ref[i]!r}")


@pytest.mark.parametrize("qtype", BLOCK_TYPES, ids=lambda t: t.name)
def test_dequantize_random_blocks(build_dir, tmp_path, qtype):
    rng = np.random.default_rng(1000 + int(qtype))
    raw = random_blocks(rng, qtype, N_BLOCKS)
    (tmp_path / "in.bin").write_bytes(raw.tobytes())
    run_tool(build_dir, "dequant", qtype.name, tmp_path / "in.bin", tmp_path / "out.f32")
    ours = np.fromfile(tmp_path / "out.f32", dtype=np.float32)
    assert_same_floats(ours, reference_dequantize(raw, qtype), qtype.name)


@pytest.mark.parametrize("qtype", [T.F16, T.BF16, T.F32], ids=lambda t: t.name)
def test_dequantize_random_floats(build_dir, tmp_path, qtype):
    """Every bit pattern, NaN, infinities and subnormals included."""
    rng = np.random.default_rng(7 + int(qtype))
    width = 4 if qtype == T.F32 else 2
    raw = rng.integers(0, 256, size=(4099, width), dtype=np.uint8)
    if width == 2:  # and every 16-bit pattern once
        raw = np.concatenate([raw, np.arange(1 << 16, dtype=np.uint16).view(np.uint8).reshape(-1, 2)])
    (tmp_path / "in.bin").write_bytes(raw.tobytes())
    run_tool(build_dir, "dequant", qtype.name, tmp_path / "in.bin", tmp_path / "out.f32")
    ours = np.fromfile(tmp_path / "out.f32", dtype=np.float32)
    assert_same_floats(ours, dequantize(raw.reshape(-1), qtype), qtype.name)


def awkward_floats(rng, n_blocks, block):
    """Blocks of random data whose magnitudes span many decades, plus the
    cases that trip quantizers: zeros, constants, one spike, ties on the
    quantization grid, fp16 subnormal scales, huge values."""
    scale = (10.0 ** rng.uniform(-7, 4, size=(n_blocks, 1))).astype(np.float32)
    x = (rng.standard_normal((n_blocks, block)) * scale).astype(np.float32)
    x[0] = 0.0
    x[1] = 3.25
    x[2] = -1e-3
    x[3] = 0.0
    x[3, 5] = 1.0
    x[4] = rng.integers(-8, 8, block).astype(np.float32) * 0.5  # on a grid: ties
    x[5] = rng.integers(-16, 16, block).astype(np.float32) / 16
    x[6] = rng.uniform(1e-9, 1e-7, block).astype(np.float32)  # fp16 subnormal scales
    x[7] = rng.uniform(-6e4, 6e4, block).astype(np.float32)
    x[8] = rng.uniform(0.5, 1.0, block).astype(np.float32)  # all positive
    x[9] = -rng.uniform(0.5, 1.0, block).astype(np.float32)  # all negative
    x[10] = rng.integers(0, 2, block).astype(np.float32)  # two values
    return x


def reference_quantize(x, qtype):
    out = quantize(x, qtype)
    return np.ascontiguousarray(out).view(np.uint8).reshape(-1)


# Every type gguf.quants.quantize implements among ours.
GGUF_QUANTIZERS = [T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.MXFP4]


@pytest.mark.parametrize("qtype", GGUF_QUANTIZERS, ids=lambda t: t.name)
def test_quantize_matches_gguf(build_dir, tmp_path, qtype):
    rng = np.random.default_rng(2000 + int(qtype))
    block = 32
    x = awkward_floats(rng, 1031, block)
    if qtype in (T.F16, T.BF16):  # rounding edges of the 16-bit formats
        x = np.concatenate([x.reshape(-1), special_floats()]).reshape(-1, 1)
    with np.errstate(over="ignore"):  # fp16 overflow to inf is the expected result
        ref = reference_quantize(x, qtype)
    (tmp_path / "in.f32").write_bytes(x.tobytes())
    run_tool(build_dir, "quant", qtype.name, tmp_path / "in.f32", tmp_path / "out.bin")
    ours = np.fromfile(tmp_path / "out.bin", dtype=np.uint8)
    assert ours.shape == ref.shape
    if not np.array_equal(ours, ref):
        size = type_size(qtype)
        bad = np.nonzero((ours != ref).reshape(-1, size).any(axis=1))[0]
        pytest.fail(f"{qtype.name}: {bad.size} blocks differ, first block {bad[0]}: "
                    f"ours {ours.reshape(-1, size)[bad[0]].tolist()} "
                    f"ref {ref.reshape(-1, size)[bad[0]].tolist()}")


def special_floats():
    """Values at the rounding edges of fp16 and bf16, both signs."""
    bits = [0x00000000, 0x00000001, 0x007FFFFF, 0x00800000, 0x33000000, 0x33000001,
            0x337FFFFF, 0x33800000, 0x38800000, 0x387FC000, 0x387FE000, 0x387FF000,
            0x38000000, 0x477FE000, 0x477FEFFF, 0x477FF000, 0x477FF001, 0x7F7FFFFF,
            0x7F800000, 0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0x3F801000,
            0x3F803000, 0x7F7F8000, 0x7F7F7FFF]
    u = np.array(bits, dtype=np.uint32)
    u = np.concatenate([u, u | 0x80000000])
    f = u.view(np.float32)
    rng = np.random.default_rng(5)
    # and random finite bit patterns of every exponent
    r = rng.integers(0, 1 << 32, size=20000, dtype=np.uint64).astype(np.uint32)
    r = r[(r & 0x7F800000) != 0x7F800000].view(np.float32)
    return np.concatenate([f, r]).astype(np.float32)


# Types whose reference bytes come from llama.cpp (see the module docstring).
LLAMA_CPP_QUANTIZERS = [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.Q8_K, T.Q8_1, T.IQ4_NL, T.IQ4_XS,
                        T.MXFP4]


@pytest.mark.parametrize("qtype", LLAMA_CPP_QUANTIZERS, ids=lambda t: t.name)
def test_quantize_matches_llama_cpp(build_dir, tmp_path, qtype):
    fixtures = QUANT_FIXTURES
    ref_path = fixtures / f"{qtype.name.lower().replace('_k', '_K')}.bin"
    if not ref_path.exists():
        pytest.fail(f"{ref_path} is missing: see scripts/make-quant-fixtures.py")
    run_tool(build_dir, "quant", qtype.name, fixtures / "input.f32", tmp_path / "out.bin")
    ours = np.fromfile(tmp_path / "out.bin", dtype=np.uint8)
    ref = np.fromfile(ref_path, dtype=np.uint8)
    assert ours.shape == ref.shape
    size = type_size(qtype)
    bad = np.nonzero((ours != ref).reshape(-1, size).any(axis=1))[0]
    assert bad.size == 0, f"{qtype.name}: {bad.size} blocks differ, first {bad[0]}"


def pick_tensors(path, per_type=3, max_elements=32 << 20):
    """Up to `per_type` tensors of each type in the file: the smallest, the
    largest that fits `max_elements`, and one in between."""
    by_type = defaultdict(list)
    reader = GGUFReader(path)
    for t in reader.tensors:
        by_type[t.tensor_type].append(t)
    picked = []
    for tensors in by_type.values():
        tensors.sort(key=lambda t: int(t.n_elements))
        fit = [t for t in tensors if int(t.n_elements) <= max_elements] or tensors[:1]
        chosen = {id(t): t for t in (fit[0], fit[len(fit) // 2], fit[-1])}
        picked.extend(list(chosen.values())[:per_type])
    return picked


@pytest.mark.parametrize("model", ["smollm2", "gemma3"])
def test_dequantize_model_tensors(build_dir, tmp_path, request, model):
    path = request.getfixturevalue(model)
    seen = set()
    for t in pick_tensors(path):
        out = tmp_path / "out.f32"
        run_tool(build_dir, "dequant-tensor", path, t.name, out)
        ours = np.fromfile(out, dtype=np.float32)
        ref = dequantize(t.data, t.tensor_type)
        assert_same_floats(ours, ref, f"{path.name}: {t.name} ({t.tensor_type.name})")
        seen.add(t.tensor_type.name)
    expected = {"smollm2": {"Q4_1", "Q8_0", "F32"},
                "gemma3": {"Q5_0", "Q4_K", "Q6_K", "Q8_0", "F32"}}[model]
    assert expected <= seen, f"types not covered: {expected - seen}"
