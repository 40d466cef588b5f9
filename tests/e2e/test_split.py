"""Models split across GGUF files (llama.cpp's gguf-split layout; the parts
are made here by tests/tools/gguf_split.py with the `gguf` package).

- The tiny fixture models split in 3 (2 for gemma3; phi3 too, its fused
  tensors read as row views in whichever part holds them) give bit-identical logits
  to the whole file, batched and token by token, whichever part is named;
  also with a first part that holds only metadata (gguf-split
  --no-tensor-in-metadata) and with the gguf package's own shards.
- SmolLM2 split in 3 generates the same greedy text as the whole file.
- Each malformed split (gguf_split.CASES: a missing part, a part that is not
  GGUF, parts that disagree on split.count / split.tensors.count / split.no /
  the architecture, a tensor in two parts, a tensor total other than
  split.tensors.count) and a part renamed so that its siblings cannot be
  found: every part left, named to `pasada info` and `pasada run`, exits 1
  with one line on stderr, "pasada: " + the named file + what is wrong, no
  sanitizer report (release and ASan builds).
- `pasada quantize` of a split model writes one whole file without split keys.
"""
import pathlib
import shutil
import sys

import numpy as np
import pytest

from conftest import FIXTURES, SANITIZER_MARKS, SMOLLM2, assert_one_line_error, run_cli

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tools"))
import gguf_split  # noqa: E402

from test_arch_parity import load_fixture, run_eval  # noqa: E402

VALID = FIXTURES / "tiny-llama-valid.gguf"
@pytest.mark.parametrize("arch,n_parts", [("llama", 3), ("qwen2", 3), ("qwen3", 3), ("gemma3", 2), ("phi3", 3)])
def test_split_logits_identical(arch, n_parts, tmp_path):
    whole = FIXTURES / "tiny" / f"{arch}.gguf"
    parts = gguf_split.split(whole, tmp_path / arch, n_parts)
    assert all(p.stat().st_size > 0 for p in parts)
    prompts = [ids for ids, _ in load_fixture(arch)]
    for mode in ("logits", "logits-steps"):
        ref = run_eval(mode, whole, prompts, tmp_path / f"whole-{mode}")
        for named in (parts[0], parts[1]):
            got = run_eval(mode, named, prompts, tmp_path / f"{named.stem}-{mode}")
            assert len(got) == len(ref) == len(prompts) > 0
            for g, r in zip(got, ref):
                assert np.array_equal(g, r), f"{arch} {mode}: {named.name} differs from the whole file"


def test_first_part_metadata_only(tmp_path):
    """gguf-split --no-tensor-in-metadata: the first part has no tensors."""
    whole = FIXTURES / "tiny" / "qwen3.gguf"
    parts = gguf_split.split(whole, tmp_path / "meta", 3, metadata_only_first=True)
    assert not gguf_split.GGUFReader(str(parts[0])).tensors
    prompts = [ids for ids, _ in load_fixture("qwen3")]
    ref = run_eval("logits", whole, prompts, tmp_path / "whole")
    for named in parts:
        got = run_eval("logits", named, prompts, tmp_path / named.stem)
        assert len(got) == len(ref) == len(prompts) > 0
        assert all(np.array_equal(g, r) for g, r in zip(got, ref)), named.name


def test_gguf_py_shards(tmp_path):
    """Parts written by the gguf package's own sharding (GGUFWriter with
    split_max_tensors, the layout llama.cpp's convert script writes) load
    too, with the same logits as the whole file."""
    whole = FIXTURES / "tiny" / "llama.gguf"
    reader = gguf_split.GGUFReader(str(whole))
    w = gguf_split.GGUFWriter(str(tmp_path / "shard.gguf"), "llama", split_max_tensors=11)
    for key, val, vtype, sub in gguf_split.model_kvs(reader):
        if key != "general.architecture":
            w.add_key_value(key, val, vtype, sub)
    for t in reader.tensors:
        w.add_tensor(t.name, np.asarray(t.data), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    n = -(-len(reader.tensors) // 11)
    parts = [tmp_path / f"shard-{i:05d}-of-{n:05d}.gguf" for i in range(1, n + 1)]
    assert n >= 2 and all(p.exists() for p in parts), sorted(tmp_path.iterdir())
    prompts = [ids for ids, _ in load_fixture("llama")]
    ref = run_eval("logits", whole, prompts, tmp_path / "whole")
    got = run_eval("logits", parts[-1], prompts, tmp_path / "parts")
    assert len(got) == len(ref) == len(prompts) > 0
    assert all(np.array_equal(g, r) for g, r in zip(got, ref))


def test_split_smollm2_greedy(tmp_path):
    if not SMOLLM2.exists():
        pytest.fail(f"{SMOLLM2} is missing: scripts/fetch-models")
    parts = gguf_split.split(SMOLLM2, tmp_path / "smollm2", 3)
    args = ["-p", "The three primary colors are", "-n", "24", "--temp", "0"]
    whole = run_cli("release", ["run", "-m", SMOLLM2, *args])
    assert whole.returncode == 0, whole.stderr
    assert len(whole.stdout.strip()) > 10
    for named in (parts[0], parts[2]):
        got = run_cli("release", ["run", "-m", named, *args])
        assert got.returncode == 0, got.stderr
        assert got.stdout == whole.stdout, f"{named.name}: {got.stdout!r} != {whole.stdout!r}"
    info = run_cli("release", ["info", parts[1]])
    assert info.returncode == 0 and "split:           3 parts" in info.stdout, info.stdout + info.stderr


@pytest.fixture(scope="module")
def malformed(tmp_path_factory):
    out = tmp_path_factory.mktemp("split-malformed")
    cases = {stem: ([str(p) for p in paths], hints)
             for stem, (paths, hints) in gguf_split.write_malformed(VALID, out).items()}
    # part 1 of a valid split under a name without the -0000N-of-0000M suffix
    good = gguf_split.split(VALID, out / "good", 2)
    renamed = out / "renamed.gguf"
    shutil.copy(good[0], renamed)
    cases["split-renamed"] = ([str(renamed)], ["does not end in -00001-of-00002.gguf"])
    cases["split-valid"] = ([str(p) for p in good], [])
    return cases


CASE_NAMES = [*gguf_split.CASES, "split-renamed"]


@pytest.mark.parametrize("kind", ["release", "asan"])
def test_valid_split_accepted(malformed, kind):
    for part in malformed["split-valid"][0]:
        res = run_cli(kind, ["run", "-m", part, "-p", "hi", "-n", "1"])
        assert res.returncode == 0, f"{part} ({kind}): {res.stderr[-3000:]}"
        assert not any(m in res.stderr for m in SANITIZER_MARKS), res.stderr[-3000:]


@pytest.mark.parametrize("kind", ["release", "asan"])
@pytest.mark.parametrize("case", CASE_NAMES)
def test_malformed_split_rejected(malformed, case, kind):
    paths, hints = malformed[case]
    assert paths
    for path in paths:
        name = pathlib.Path(path).name
        for args in (["info", path], ["run", "-m", path, "-p", "hi", "-n", "1"]):
            res = run_cli(kind, args)
            assert_one_line_error(res, f"pasada {args[0]} {name} ({kind})", hints=hints, names=[name])


def test_quantize_split_input(tmp_path):
    parts = gguf_split.split(FIXTURES / "tiny" / "llama.gguf", tmp_path / "llama", 2)
    out = tmp_path / "q8.gguf"
    res = run_cli("release", ["quantize", parts[1], out, "--type", "Q8_0"], timeout=300)
    assert res.returncode == 0, res.stderr
    reader = gguf_split.GGUFReader(str(out))
    assert not [k for k in reader.fields if k.startswith("split.")]
    whole = gguf_split.GGUFReader(str(FIXTURES / "tiny" / "llama.gguf"))
    assert sorted(t.name for t in reader.tensors) == sorted(t.name for t in whole.tensors)
    res = run_cli("release", ["run", "-m", out, "-p", "hi", "-n", "2"])
    assert res.returncode == 0, res.stderr
