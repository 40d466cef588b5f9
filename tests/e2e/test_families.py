"""`pasada run` and `pasada serve` on the tiny Gemma 2 and Phi-3 fixtures
(tests/fixtures/tiny, made by scripts/make-tiny-models.py; their logits are
held to transformers' by test_arch_parity.py).

- `pasada run` loads each and generates on the CPU and on the Vulkan test
  device (lavapipe where there is no GPU), whole and split across the two.
- `pasada serve` renders a chat with the template the GGUF file carries: the
  phi3 fixture holds Phi-3-mini's Jinja template, and a chat request must be
  the completion of exactly that template's text (same prompt tokens, same
  greedy answer)."""
import re
import subprocess

import pytest
import requests

from conftest import FIXTURES
from test_server import Server

TINY = FIXTURES / "tiny"
STATS_RE = re.compile(r"prompt (\d+) tokens.*generated (\d+) tokens")


def run(pasada_bin, arch, *args):
    res = subprocess.run([str(pasada_bin), "run", "-m", str(TINY / f"{arch}.gguf"), "-p", "the cat sat on",
                          "-n", "8", "--temp", "0", *args], capture_output=True, stdin=subprocess.DEVNULL,
                         timeout=120)
    err = res.stderr.decode("utf-8", "replace")
    assert res.returncode == 0, err
    m = STATS_RE.search(err)
    assert m, err
    return res.stdout, int(m.group(1)), int(m.group(2))


@pytest.mark.parametrize("arch", ["gemma2", "phi3"])
@pytest.mark.parametrize("device", ["cpu", "vulkan", "split"])
def test_run(pasada_bin, arch, device, request):
    """Greedy generation runs to its 8 tokens (the tiny vocabulary's end token
    is never the argmax of these prompts) on every device."""
    args = []
    if device != "cpu":
        dev = request.getfixturevalue("vulkan_device")
        args = ["--device", dev] + (["--gpu-layers", "2"] if device == "split" else [])
    _, n_prompt, n_gen = run(pasada_bin, arch, *args)
    assert n_prompt > 0 and n_gen == 8


def test_serve_renders_the_gguf_chat_template(pasada_bin):
    """A chat request on phi3 is the completion of Phi-3's template text."""
    srv = Server(pasada_bin, TINY / "phi3.gguf")
    try:
        msgs = [{"role": "user", "content": "hello there"}]
        chat = requests.post(srv.url + "/v1/chat/completions", timeout=60,
                             json={"messages": msgs, "max_tokens": 6, "temperature": 0}).json()
        text = "<|bos|><|user|>\nhello there<|end|>\n<|assistant|>\n"
        comp = requests.post(srv.url + "/v1/completions", timeout=60,
                             json={"prompt": text, "max_tokens": 6, "temperature": 0}).json()
        assert chat["usage"]["prompt_tokens"] == comp["usage"]["prompt_tokens"], (chat, comp)
        assert chat["choices"][0]["message"]["content"].strip() == comp["choices"][0]["text"].strip()
    finally:
        srv.kill()
