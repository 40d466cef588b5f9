"""Shared fixtures of the end-to-end tests: where the binaries and models are.

PASADA_BUILD_DIR (default build/) holds the release binaries; PASADA_ASAN_BUILD_DIR
(default build-asan/) the AddressSanitizer + UBSan build when it exists;
PASADA_MODELS_DIR (default ~/.cache/pasada/models) the fetched models.
The test command (scripts/test) builds both and fetches the models first, so a
missing binary or model is a failure, not a skip."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"


def _dir(env, default):
    return pathlib.Path(os.environ.get(env, default)).expanduser().resolve()


BUILD = _dir("PASADA_BUILD_DIR", ROOT / "build")
ASAN_BUILD = _dir("PASADA_ASAN_BUILD_DIR", ROOT / "build-asan")
MODELS = _dir("PASADA_MODELS_DIR", "~/.cache/pasada/models")

SMOLLM2 = MODELS / "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA3 = MODELS / "gemma-3-270m-q4_k_m.gguf"


def _need(path):
    if not path.exists():
        pytest.fail(f"{path} is missing: run scripts/test (it builds and fetches what tests need)")
    return path


@pytest.fixture(scope="session")
def pasada_bin():
    return _need(BUILD / "pasada")


@pytest.fixture(scope="session")
def build_dir():
    return _need(BUILD)


@pytest.fixture(scope="session")
def asan_build_dir():
    return _need(ASAN_BUILD)


@pytest.fixture(scope="session")
def smollm2():
    return _need(SMOLLM2)


@pytest.fixture(scope="session")
def gemma3():
    return _need(GEMMA3)
