#!/usr/bin/env python3
"""Makes tests/fixtures/quant/: reference bytes of the quantizers that the
`gguf` Python package lacks (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, Q8_1, IQ4_NL,
IQ4_XS, MXFP4), written by
llama.cpp's reference quantizers (quantize_row_*_ref in libggml-base; for IQ4_NL
and IQ4_XS quantize_iq4_nl/_xs without an importance matrix, what
llama-quantize writes), for
tests/e2e/test_quant.py to compare ours with byte for byte.

    make-quant-fixtures.py --ggml /path/to/libggml-base.so [--out DIR]

A libggml-base.so comes with any llama.cpp build, e.g. the one pip makes
while installing llama-cpp-python. The input floats are written too
(input.f32), so the fixtures do not depend on numpy's random streams.
Needs numpy only."""
import argparse
import ctypes
import pathlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
# type name -> (elements, bytes) per block
TYPES = {"q2_K": (256, 84), "q3_K": (256, 110), "q4_K": (256, 144), "q5_K": (256, 176),
         "q6_K": (256, 210), "q8_K": (256, 292), "q8_1": (32, 36),
         "iq4_nl": (32, 18), "iq4_xs": (256, 136), "mxfp4": (32, 17)}
N_BLOCKS = 48
# types whose bytes come from quantize_TYPE(src, dst, rows, row length, NULL)
ROW_QUANTIZERS = {"iq4_nl", "iq4_xs"}


def awkward_input(rng):
    """Super-blocks whose sub-blocks differ wildly in magnitude, plus the
    cases that take the quantizers' side roads (zeros, constants, one-sided
    data, a lone spike, values on the grid, tiny and huge magnitudes)."""
    n = N_BLOCKS * 256
    sub = (10.0 ** rng.uniform(-3, 1, size=(n // 16, 1))).astype(np.float32)
    x = (rng.standard_normal((n // 16, 16)) * sub).reshape(N_BLOCKS, 256).astype(np.float32)
    x[0] = 0.0
    x[1] = 0.75
    x[2] = -rng.uniform(0.1, 1.0, 256)
    x[3] = rng.uniform(0.1, 1.0, 256)
    x[4] = 0.0
    x[4, 77] = -2.5
    x[5] = rng.integers(-8, 8, 256) * 0.25
    x[6] = rng.standard_normal(256) * 1e-6
    x[7] = rng.standard_normal(256) * 1e4
    x[8, :128] = 0.0  # half zeros, half data
    x[9] = np.abs(x[9])  # non-negative: min clamps to 0
    x[10] = rng.standard_t(2, 256)  # heavy tails
    x[11, ::16] = 0.0
    x[12] = np.sin(np.arange(256) * 0.1) * 3
    x[13] = rng.standard_normal(256) * 1e6  # fp16 super-block scales overflow
    x[14] = rng.standard_normal(256) * 1e-9  # and underflow
    x[15, 100:] = 1e-30  # sub-blocks below the zero threshold
    return x.astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ggml", required=True, help="path of libggml-base.so")
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "quant"))
    ap.add_argument("--types", default="", help="comma-separated subset of the types (default: all)")
    args = ap.parse_args()

    lib = ctypes.CDLL(args.ggml)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    x = awkward_input(np.random.default_rng(20240607))
    (out / "input.f32").write_bytes(x.tobytes())
    src = np.ascontiguousarray(x.reshape(-1))
    only = set(args.types.split(",")) if args.types else set(TYPES)
    for name, (block, size) in TYPES.items():
        if name not in only:
            continue
        dst = np.zeros(src.size // block * size, dtype=np.uint8)
        if name in ROW_QUANTIZERS:
            # the path llama.cpp's files are written by (no importance
            # matrix); quantize_row_iq4_nl_ref differs (ntry -1)
            fn = getattr(lib, f"quantize_{name}")
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
            fn.restype = ctypes.c_size_t
            fn(src.ctypes.data, dst.ctypes.data, N_BLOCKS, 256, None)
        else:
            fn = getattr(lib, f"quantize_row_{name}_ref")
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
            fn.restype = None
            fn(src.ctypes.data, dst.ctypes.data, src.size)
        (out / f"{name}.bin").write_bytes(dst.tobytes())
        print(f"{out / (name + '.bin')}: {dst.size} bytes")


if __name__ == "__main__":
    main()
