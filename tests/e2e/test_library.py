"""libpasada as other programs use it: `cmake --install` of the release build
into a temporary prefix, then examples/simple.c built against the installed
package three ways (pkg-config with the shared library, pkg-config --static
into a static program, CMake's find_package with examples/CMakeLists.txt),
each run on SmolLM2 and compared with `pasada run --temp 0` on the same
prompt and token count. Also: the shared library exports exactly the
PASADA_API functions of pasada.h and links neither cJSON nor libmicrohttpd."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT

PROMPT = "The capital of France is"
N_TOKENS = 24
CC = os.environ.get("CC", "cc")


def sh(*args, env=None, cwd=None, timeout=300):
    res = subprocess.run([str(a) for a in args], capture_output=True, text=True, env=env, cwd=cwd,
                         timeout=timeout)
    assert res.returncode == 0, f"{' '.join(map(str, args))}\n{res.stdout}\n{res.stderr}"
    return res.stdout


def header_version():
    text = (ROOT / "include" / "pasada.h").read_text()
    parts = [re.search(rf"#define PASADA_VERSION_{p} (\d+)", text).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


@pytest.fixture(scope="module")
def prefix(build_dir, tmp_path_factory):
    """The release build installed into a fresh prefix."""
    p = tmp_path_factory.mktemp("prefix")
    sh("cmake", "--install", build_dir, "--prefix", p)
    return p


@pytest.fixture(scope="module")
def libdir(prefix):
    dirs = [d.parent for d in prefix.glob("lib*/**/libpasada.a")]
    assert len(dirs) == 1, f"libpasada.a installed {len(dirs)} times under {prefix}"
    return dirs[0]


@pytest.fixture(scope="module")
def pc_env(libdir):
    env = dict(os.environ)
    env["PKG_CONFIG_PATH"] = str(libdir / "pkgconfig")
    return env


def pkg_config(env, *args):
    return sh("pkg-config", *args, "pasada", env=env).split()


@pytest.fixture(scope="module")
def expected(pasada_bin, smollm2):
    """What the CLI generates greedily; simple prints the same and a newline."""
    res = subprocess.run([str(pasada_bin), "run", "-m", str(smollm2), "-p", PROMPT, "-n",
                          str(N_TOKENS), "--temp", "0", "--no-stats"],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip(), "the CLI generated nothing"
    return res.stdout + "\n"


def run_simple(binary, smollm2, env=None):
    res = subprocess.run([str(binary), str(smollm2), PROMPT, str(N_TOKENS)], capture_output=True,
                         text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stderr == "", res.stderr
    return res.stdout


def test_installed_files(prefix, libdir):
    version = header_version()
    major, minor, _ = version.split(".")
    assert (prefix / "include" / "pasada.h").is_file()
    assert (libdir / "libpasada.a").is_file()
    assert (libdir / f"libpasada.so.{version}").is_file()
    assert os.readlink(libdir / "libpasada.so") == f"libpasada.so.{major}.{minor}"
    assert (libdir / "pkgconfig" / "pasada.pc").is_file()
    for f in ("pasadaConfig.cmake", "pasadaConfigVersion.cmake", "pasadaTargets.cmake"):
        assert (libdir / "cmake" / "pasada" / f).is_file(), f


def test_pkg_config_version(pc_env):
    assert pkg_config(pc_env, "--modversion") == [header_version()]


def test_shared_library_exports_only_the_api(libdir):
    so = libdir / "libpasada.so"
    exported = set()
    for line in sh("nm", "-D", "--defined-only", so).splitlines():
        fields = line.split()
        if len(fields) == 3:
            exported.add(fields[2])
    header = (ROOT / "include" / "pasada.h").read_text()
    api = set(re.findall(r"^PASADA_API [^(]*?\b(pasada_\w+)\(", header, re.M))
    assert len(api) > 40, "PASADA_API declarations not found in pasada.h"
    assert exported == api, (f"exported but not PASADA_API: {sorted(exported - api)}; "
                             f"PASADA_API but not exported: {sorted(api - exported)}")
    soname = sh("readelf", "-d", so)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", soname)
    assert needed and not [n for n in needed if "cjson" in n or "microhttpd" in n], needed


def test_pkg_config_shared(tmp_path, pc_env, libdir, smollm2, expected):
    exe = tmp_path / "simple"
    sh(CC, "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", ROOT / "examples" / "simple.c",
       *pkg_config(pc_env, "--cflags", "--libs"), "-o", exe)
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    assert str(libdir / "libpasada.so") in sh("ldd", exe, env=env)
    assert run_simple(exe, smollm2, env) == expected


def test_pkg_config_static(tmp_path, pc_env, smollm2, expected):
    exe = tmp_path / "simple"
    sh(CC, "-std=c11", "-Wall", "-Wextra", "-Werror", ROOT / "examples" / "simple.c", "-static",
       *pkg_config(pc_env, "--static", "--cflags", "--libs"), "-o", exe)
    assert "INTERP" not in sh("readelf", "-l", exe), "not a static program"
    assert run_simple(exe, smollm2) == expected


@pytest.mark.parametrize("static", [False, True], ids=["shared", "static"])
def test_find_package(tmp_path, prefix, smollm2, expected, static):
    build = tmp_path / "build"
    sh("cmake", "-S", ROOT / "examples", "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}",
       f"-DPASADA_EXAMPLES_STATIC={'ON' if static else 'OFF'}", f"-DCMAKE_C_COMPILER={shutil.which(CC)}")
    sh("cmake", "--build", build)
    exe = build / "simple"
    linked = "libpasada.so" in sh("ldd", exe)
    assert linked != static
    assert run_simple(exe, smollm2) == expected


def test_simple_reports_bad_input(tmp_path, pc_env, libdir):
    exe = tmp_path / "simple"
    sh(CC, ROOT / "examples" / "simple.c", *pkg_config(pc_env, "--cflags", "--libs"), "-o", exe)
    env = dict(os.environ, LD_LIBRARY_PATH=str(libdir))
    res = subprocess.run([str(exe), "/nonexistent/model.gguf"], capture_output=True, text=True, env=env)
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and "/nonexistent/model.gguf" in res.stderr, res.stderr
    res = subprocess.run([str(exe), "m.gguf", "hi", "0"], capture_output=True, text=True, env=env)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
