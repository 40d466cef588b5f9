"""Runs the libFuzzer target of the GGUF reader (tests/fuzz/fuzz_gguf.c) for
about 20 seconds, seeded with the malformed corpus and the valid tiny model,
and fails on any crash, sanitizer report, leak or timeout it finds.
The fuzz build lives in PASADA_FUZZ_BUILD_DIR (default build-fuzz/, made by
scripts/build fuzz); a missing binary is a failure, not a skip."""
import os
import pathlib
import shutil
import subprocess

import pytest

from conftest import FIXTURES, ROOT

FUZZ_BUILD = pathlib.Path(os.environ.get("PASADA_FUZZ_BUILD_DIR", ROOT / "build-fuzz")).expanduser()
SECONDS = int(os.environ.get("PASADA_FUZZ_SECONDS", "20"))


def test_fuzz_gguf(tmp_path):
    fuzzer = FUZZ_BUILD / "fuzz_gguf"
    if not fuzzer.exists():
        pytest.fail(f"{fuzzer} is missing: run scripts/build fuzz (clang, -DPASADA_FUZZ=ON)")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for seed in [*sorted((FIXTURES / "malformed").glob("*.gguf")), FIXTURES / "tiny-llama-valid.gguf"]:
        shutil.copy(seed, corpus / seed.name)
    assert len(list(corpus.iterdir())) >= 41
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    res = subprocess.run(
        [str(fuzzer), f"-max_total_time={SECONDS}", "-max_len=16384", "-timeout=10",
         "-rss_limit_mb=2048", "-print_final_stats=1", f"-artifact_prefix={artifacts}/",
         str(corpus)],
        capture_output=True, text=True, errors="replace", timeout=SECONDS + 120, cwd=tmp_path,
        env=dict(os.environ, ASAN_OPTIONS="detect_leaks=1"))
    crashes = sorted(p.name for p in artifacts.iterdir())
    assert res.returncode == 0 and not crashes, (
        f"fuzz_gguf exit {res.returncode}, artifacts {crashes} (reproduce: {fuzzer} FILE)\n"
        f"{res.stderr[-4000:]}")
    assert "Done" in res.stderr and "stat::number_of_executed_units" in res.stderr, res.stderr[-2000:]
