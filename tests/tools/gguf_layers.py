#!/usr/bin/env python3
"""gguf_layers.py: copies of a GGUF model with another number of layers, for
speculative decoding's draft/target pairs that share a vocabulary by
construction (everything but the layers is copied as it is: tokenizer,
embeddings, output, metadata with {arch}.block_count changed).

  gguf_layers.py IN.gguf OUT.gguf keep N   only the first N layers (a cheaper,
                                           less accurate draft)
  gguf_layers.py IN.gguf OUT.gguf pad N    the layers, then N more copies of
                                           layer 0 whose attention output and
                                           FFN down projections are zero: each
                                           adds exactly 0 to the residual, so
                                           the output equals IN's bit for bit
                                           while every layer's weights are
                                           still read (a costlier target whose
                                           exact draft is IN)

Zero bytes are 0 in every GGUF tensor type (scales 0). Needs the `gguf`
package.
"""
import re
import sys

import numpy as np

import gguf

ZEROED = ("attn_output.weight", "ffn_down.weight")


def rewrite(src: str, dst: str, mode: str, n: int) -> None:
    reader = gguf.GGUFReader(src)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    key = f"{arch}.block_count"
    if key not in reader.fields:
        raise SystemExit(f"{src}: no {key}")
    old = int(reader.fields[key].contents())
    if mode == "keep" and not 1 <= n <= old:
        raise SystemExit(f"{src}: keep 1 to {old} layers, not {n}")
    if mode not in ("keep", "pad") or n < 0:
        raise SystemExit(__doc__)
    new = n if mode == "keep" else old + n
    writer = gguf.GGUFWriter(dst, arch=arch, endianess=reader.endianess)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        val_type = field.types[0]
        sub_type = field.types[-1] if val_type == gguf.GGUFValueType.ARRAY else None
        value = new if field.name == key else field.contents()
        writer.add_key_value(field.name, value, val_type, sub_type=sub_type)
    out = []  # (name, data, type)
    for t in reader.tensors:
        m = re.match(r"blk\.(\d+)\.", t.name)
        if m and int(m.group(1)) >= new:
            continue
        out.append((t.name, t.data, t.tensor_type))
    if mode == "pad":
        layer0 = [t for t in reader.tensors if t.name.startswith("blk.0.")]
        for i in range(old, new):
            for t in layer0:
                name = f"blk.{i}." + t.name[len("blk.0."):]
                data = np.zeros_like(t.data) if t.name.endswith(ZEROED) else t.data
                out.append((name, data, t.tensor_type))
    for name, data, ttype in out:
        writer.add_tensor_info(name, data.shape, data.dtype, data.nbytes, ttype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for _, data, _ in out:
        writer.write_tensor_data(data, tensor_endianess=reader.endianess)
    writer.close()


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    rewrite(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
