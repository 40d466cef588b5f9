#!/usr/bin/env python3
"""Writes src/quant/iq_grids.c: the grid tables of the I-quant types (IQ2_XXS,
IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S/IQ1_M) and the IQ2 sign table, format
constants taken from the `gguf` Python package (gguf/quants.py), so that
pasada's dequantization reads the same values the package does.

    make-iq-grids.py [--out src/quant/iq_grids.c]

Each grid row (8 or 4 values) is one little-endian integer: byte i is value
i (IQ1's -1, 0, 1 as the bytes 0xFF, 0x00, 0x01). Needs numpy and gguf."""
import argparse
import pathlib

import numpy as np
from gguf import quants

ROOT = pathlib.Path(__file__).resolve().parents[1]
# C name, gguf class, bytes per row
GRIDS = [
    ("pa_iq2xxs_grid", quants.IQ2_XXS, 8),
    ("pa_iq2xs_grid", quants.IQ2_XS, 8),
    ("pa_iq2s_grid", quants.IQ2_S, 8),
    ("pa_iq3xxs_grid", quants.IQ3_XXS, 4),
    ("pa_iq3s_grid", quants.IQ3_S, 4),
    ("pa_iq1s_grid", quants.IQ1_S, 8),
]


def rows(cls, width):
    cls.init_grid()
    g = np.asarray(cls.grid, dtype=np.float32).reshape(-1, width)
    assert np.all(g == np.round(g)), cls.__name__
    b = g.astype(np.int64).astype(np.int8).view(np.uint8).astype(np.uint64)
    return [int(sum(int(v) << (8 * i) for i, v in enumerate(r))) for r in b]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "src" / "quant" / "iq_grids.c"))
    args = ap.parse_args()
    out = ["/* iq_grids.c: the I-quant grid tables and the IQ2 sign table, generated",
           " * by scripts/make-iq-grids.py from the gguf package's tables (format",
           " * constants). Row r of a grid is one little-endian integer whose byte i",
           " * is value i of the row (signed bytes for IQ1). Do not edit. */",
           '#include "quant/iq_grids.h"', ""]
    for name, cls, width in GRIDS:
        r = rows(cls, width)
        ctype, digits = ("uint64_t", 16) if width == 8 else ("uint32_t", 8)
        out.append(f"const {ctype} {name}[{len(r)}] = {{")
        per = 4 if width == 8 else 6
        for i in range(0, len(r), per):
            out.append("    " + " ".join(f"0x{v:0{digits}x}," for v in r[i:i + per]))
        out.append("};")
        out.append("")
    ks = list(quants.IQ2_XXS.ksigns)
    out.append(f"const uint8_t pa_ksigns_iq2xs[{len(ks)}] = {{")
    for i in range(0, len(ks), 16):
        out.append("    " + " ".join(f"{v}," for v in ks[i:i + 16]))
    out.append("};")
    pathlib.Path(args.out).write_text("\n".join(out) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
