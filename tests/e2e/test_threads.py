"""The thread-safety contract of pasada.h: two models in one process (and a
second context on one of them), decoded from three threads at once, give the
bits each gives decoded alone (tests/tools/two_models.c); and the same run
under ThreadSanitizer reports no data race."""
import os
import pathlib
import subprocess

from conftest import BUILD, _dir, _need

TSAN_BUILD = _dir("PASADA_TSAN_BUILD_DIR", pathlib.Path(__file__).resolve().parents[2] / "build-tsan")


def run_two_models(build, smollm2, gemma3, n_tokens, rounds, env=None):
    exe = _need(build / "two_models")
    return subprocess.run([str(exe), smollm2, gemma3, str(n_tokens), str(rounds)], capture_output=True,
                          text=True, timeout=900, env=env)


def test_two_models_concurrent_same_bits(smollm2, gemma3):
    p = run_two_models(BUILD, smollm2, gemma3, 16, 3)
    assert p.returncode == 0, p.stderr
    assert "same bits alone and concurrent" in p.stdout


def test_two_models_under_thread_sanitizer(smollm2, gemma3):
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1")
    p = run_two_models(TSAN_BUILD, smollm2, gemma3, 4, 1, env)
    assert "ThreadSanitizer" not in p.stderr, p.stderr[-4000:]
    assert p.returncode == 0, p.stderr[-4000:]
    assert "same bits alone and concurrent" in p.stdout
