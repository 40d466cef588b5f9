#!/usr/bin/env python3
"""gguf_split.py: splits a GGUF model into parts the way llama.cpp's
gguf-split lays them out, with the `gguf` package (GGUFReader/GGUFWriter),
for pasada's split-model tests (tests/e2e/test_split.py).

Layout (llama.cpp's gguf-split and llama-model-loader): part i of n is
PREFIX-%05d-of-%05d.gguf (i counted from 1); every part carries split.no
(uint16, from 0), split.count (uint16) and split.tensors.count (int32, the
model's tensor total); the first part carries all the model's metadata, the
others only the split keys; each part holds a contiguous run of the tensors.

Usage:
    gguf_split.py split MODEL.gguf PREFIX N      writes N parts
    gguf_split.py malformed DIR                  writes the malformed split
                                                 cases into DIR (one set of
                                                 parts per defect, see CASES)
"""
import pathlib
import sys

import numpy as np
from gguf import GGUFReader, GGUFValueType, GGUFWriter


def part_name(prefix, i, n):
    return f"{prefix}-{i + 1:05d}-of-{n:05d}.gguf"


def model_kvs(reader):
    """The model's metadata as (key, value, type, element type) tuples."""
    out = []
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key.startswith("split."):
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == GGUFValueType.ARRAY else None
        if sub == GGUFValueType.ARRAY:
            raise ValueError(f"{key}: nested arrays are not copied")
        out.append((key, field.contents(), vtype, sub))
    return out


def write_part(path, arch, kvs, tensors, no, count, n_total, extra=()):
    """One part: the split keys, then kvs (first part only), then the tensors
    (GGUFReader tensors, copied byte for byte). extra: (key, value, type)
    entries that replace or add keys (the malformed cases)."""
    w = GGUFWriter(str(path), arch)
    w.kv_data[0].clear()  # parts after the first carry no general.architecture
    keys = [("split.no", no, GGUFValueType.UINT16, None),
            ("split.count", count, GGUFValueType.UINT16, None),
            ("split.tensors.count", n_total, GGUFValueType.INT32, None)]
    entries = {key: (val, vtype, sub) for key, val, vtype, sub in [*keys, *kvs]}
    for key, val, vtype in extra:
        entries[key] = (val, vtype, None)
    for key, (val, vtype, sub) in entries.items():
        w.add_key_value(key, val, vtype, sub)
    for t in tensors:
        w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def chunks(items, n):
    """items in n contiguous runs, as even as can be (none empty when
    len(items) >= n)."""
    k, r = divmod(len(items), n)
    out, at = [], 0
    for i in range(n):
        size = k + (1 if i < r else 0)
        out.append(items[at:at + size])
        at += size
    return out


def split(model, prefix, n, edit=None, metadata_only_first=False):
    """Writes model as n parts; edit(i, kvs, tensors, extra) may change part
    i's metadata, tensors and extra keys (lists, changed in place).
    metadata_only_first: the first part holds no tensors (gguf-split's
    --no-tensor-in-metadata). Returns the parts' paths."""
    reader = GGUFReader(str(model))
    arch = str(reader.fields["general.architecture"].contents())
    kvs = model_kvs(reader)
    if metadata_only_first:
        runs = [[], *chunks(list(reader.tensors), n - 1)]
    else:
        runs = chunks(list(reader.tensors), n)
    paths = []
    for i in range(n):
        part_kvs, tensors, extra = (list(kvs) if i == 0 else []), list(runs[i]), []
        if edit:
            edit(i, part_kvs, tensors, extra)
        path = pathlib.Path(part_name(prefix, i, n))
        write_part(path, arch, part_kvs, tensors, i, n, len(reader.tensors), extra)
        paths.append(path)
    return paths


# The malformed cases: stem -> (parts, edit or None, parts to delete after
# writing, parts to overwrite with bytes that are not GGUF). Every part left
# must be rejected when named, with one line containing the case's hint.
def _edit_count(i, kvs, tensors, extra):
    if i == 1:
        extra.append(("split.count", 3, GGUFValueType.UINT16))


def _edit_tensors_count(i, kvs, tensors, extra):
    if i == 1:
        extra.append(("split.tensors.count", 999, GGUFValueType.INT32))


def _edit_total(i, kvs, tensors, extra):
    for key in ("split.tensors.count",):
        extra.append((key, 999, GGUFValueType.INT32))


def _edit_no(i, kvs, tensors, extra):
    if i == 1:
        extra.append(("split.no", 0, GGUFValueType.UINT16))


def _edit_arch(i, kvs, tensors, extra):
    if i == 1:
        extra.append(("general.architecture", "qwen2", GGUFValueType.STRING))


CASES = {
    # part 2 of 3 is gone
    "split-missing-part": (3, None, [1], [], ["missing"]),
    # part 2 of 2 is not a GGUF file
    "split-part-not-gguf": (2, None, [], [1], ["not a gguf"]),
    # part 2 says the model has 3 parts
    "split-count-differs": (2, _edit_count, [], [], ["not a part of the same split model", "split.count"]),
    # part 2 says the model has 999 tensors
    "split-tensors-count-differs": (2, _edit_tensors_count, [], [], ["split.tensors.count"]),
    # every part says 999 tensors, the parts hold fewer
    "split-tensors-count-wrong": (2, _edit_total, [], [], ["split.tensors.count"]),
    # part 2 also holds part 1's first tensor
    "split-tensor-in-two-parts": (2, None, [], [], ["in two parts"]),
    # part 2 says it is part 1
    "split-no-differs": (2, _edit_no, [], [], ["split.no"]),
    # part 2 is of a different architecture
    "split-other-model": (2, _edit_arch, [], [], ["model"]),
}


def write_malformed(base, out_dir):
    """Writes every case of CASES into out_dir from the model `base`;
    returns {case stem: (paths of the parts left, hints)}."""
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result = {}
    for stem, (n, edit, delete, not_gguf, hints) in CASES.items():
        prefix = out_dir / stem
        if stem == "split-tensor-in-two-parts":
            reader = GGUFReader(str(base))
            first = reader.tensors[0]

            def edit(i, kvs, tensors, extra, first=first, total=len(reader.tensors) + 1):
                extra.append(("split.tensors.count", total, GGUFValueType.INT32))
                if i == 1:
                    tensors.append(first)
        paths = split(base, prefix, n, edit)
        for i in delete:
            paths[i].unlink()
        for i in not_gguf:
            paths[i].write_bytes(b"This is a text file, not a GGUF part.\n")
        result[stem] = ([p for i, p in enumerate(paths) if i not in delete], hints)
    return result


def main(argv):
    if len(argv) == 5 and argv[1] == "split":
        for p in split(argv[2], argv[3], int(argv[4])):
            print(p)
        return 0
    if len(argv) == 3 and argv[1] == "malformed":
        base = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tiny-llama-valid.gguf"
        for stem, (paths, _) in write_malformed(base, argv[2]).items():
            print(stem, *(p.name for p in paths))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
