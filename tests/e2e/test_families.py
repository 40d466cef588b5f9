"""`pasada run` and `pasada serve` on the tiny Gemma 2, Phi-3, gpt-oss, Gemma 4
(gemma4, gemma4ple with per-layer inputs, gemma4moe with experts), Qwen3-MoE and
Mixtral fixtures (tests/fixtures/tiny, made by scripts/make-tiny-models.py; their
logits are held to transformers' by test_arch_parity.py).

- `pasada run` loads each and generates on the CPU and on the Vulkan test
  device (lavapipe where there is no GPU), whole and split across the two.
- The mixtures of experts (qwen3moe, mixtral) in the server: batched
  requests equal lone ones, and a prompt extending a cached one reuses it.
- `pasada serve` renders a chat with the template the GGUF file carries: the
  phi3 fixture holds Phi-3-mini's Jinja template, and a chat request must be
  the completion of exactly that template's text (same prompt tokens, same
  greedy answer); the gpt-oss fixture, given gpt-oss's harmony template,
  renders a chat through it and answers.
- A defect in what each family adds is refused at load with one line."""
import re
import subprocess

import pytest
import requests

from conftest import CHAT_TEMPLATES, FIXTURES
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


@pytest.mark.parametrize("arch", ["gemma2", "phi3", "gpt-oss", "gemma4", "gemma4ple", "gemma4moe", "qwen3moe",
                                  "mixtral"])
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


HARMONY = CHAT_TEMPLATES / "openai-gpt-oss-120b.jinja"


@pytest.mark.skipif(not HARMONY.is_file(), reason=f"no {HARMONY} (the shared chat-templates folder)")
def test_serve_gpt_oss_harmony(pasada_bin, tmp_path):
    """The gpt-oss fixture carrying gpt-oss's own (harmony) template: a chat
    renders through it (system message, the user's turn, the assistant's
    opening) and is answered from exactly that text's tokens."""
    import gguf
    path = tmp_path / "gpt-oss.gguf"
    _copy_gguf(TINY / "gpt-oss.gguf", path,
               set_kv={"tokenizer.chat_template": (gguf.GGUFValueType.STRING, HARMONY.read_text())})
    srv = Server(pasada_bin, path)
    try:
        msgs = [{"role": "user", "content": "hello there"}]
        r = requests.post(srv.url + "/apply-template", json={"messages": msgs}, timeout=60)
        assert r.status_code == 200, r.text
        text = r.json()["prompt"]
        assert text.startswith("<|start|>system<|message|>") and "<|start|>user<|message|>hello there<|end|>" in text
        assert text.endswith("<|start|>assistant"), text[-80:]
        n_text = len(requests.post(srv.url + "/tokenize", json={"content": text}, timeout=60).json()["tokens"])
        chat = requests.post(srv.url + "/v1/chat/completions", timeout=60,
                             json={"messages": msgs, "max_tokens": 6, "temperature": 0})
        assert chat.status_code == 200, chat.text
        assert chat.json()["usage"]["prompt_tokens"] == n_text, (chat.json(), n_text)
    finally:
        srv.kill()


@pytest.mark.parametrize("device", ["cpu", "vulkan"])
def test_gpt_oss_prefix_reuse(pasada_bin, device, request):
    """gpt-oss through the server's prefix cache (its windowed layers
    included: the prompts run past the window of 8): a prompt that extends
    an earlier one reuses its positions and gives, greedily, the text a
    fresh server gives it."""
    args = ["--device", request.getfixturevalue("vulkan_device")] if device == "vulkan" else []
    first = "the cat sat on the mat and then the dog"
    longer = first + " ran far away from the old red barn"

    def complete(srv, prompt):
        r = requests.post(srv.url + "/v1/completions", timeout=60,
                          json={"prompt": prompt, "max_tokens": 8, "temperature": 0})
        assert r.status_code == 200, r.text
        return r.json()

    srv = Server(pasada_bin, TINY / "gpt-oss.gguf", *args)
    try:
        a = complete(srv, first)
        b = complete(srv, longer)
    finally:
        srv.kill()
    fresh = Server(pasada_bin, TINY / "gpt-oss.gguf", *args)
    try:
        c = complete(fresh, longer)
    finally:
        fresh.kill()
    cached = b["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
    assert a["usage"]["prompt_tokens"] > 8 and cached >= a["usage"]["prompt_tokens"] - 1, (a["usage"], b["usage"])
    assert c["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0) == 0, c["usage"]
    assert b["choices"][0]["text"] == c["choices"][0]["text"]


@pytest.mark.parametrize("arch", ["qwen3moe", "mixtral"])
def test_moe_server_batching_and_prefix_reuse(pasada_bin, arch):
    """The mixtures of experts in the server: three requests at once (one
    batch, tokens routed to different experts) give each the greedy text a
    lone request gives, and a prompt that extends an earlier one reuses its
    cached positions and gives the text a fresh server gives it."""
    import concurrent.futures as cf
    prompts = ["the cat sat on the mat", "one two three four five six seven", "a b c d e f g h i j"]
    longer = prompts[0] + " and then the dog ran far away from the barn"

    def complete(srv, prompt):
        r = requests.post(srv.url + "/v1/completions", timeout=60,
                          json={"prompt": prompt, "max_tokens": 8, "temperature": 0})
        assert r.status_code == 200, r.text
        return r.json()

    fresh = Server(pasada_bin, TINY / f"{arch}.gguf", "--parallel", "4")
    try:
        alone = [complete(fresh, p)["choices"][0]["text"] for p in prompts]
    finally:
        fresh.kill()
    fresh = Server(pasada_bin, TINY / f"{arch}.gguf", "--parallel", "4")
    try:
        scratch = complete(fresh, longer)
    finally:
        fresh.kill()
    srv = Server(pasada_bin, TINY / f"{arch}.gguf", "--parallel", "4")
    try:
        with cf.ThreadPoolExecutor(3) as ex:
            together = [f.result()["choices"][0]["text"] for f in [ex.submit(complete, srv, p) for p in prompts]]
        assert together == alone
        ext = complete(srv, longer)
    finally:
        srv.kill()
    cached = ext["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)
    assert cached > 0, ext["usage"]
    assert ext["choices"][0]["text"] == scratch["choices"][0]["text"]


# ---- defective variants of the fixtures: one line naming the defect ----

def _copy_gguf(src, dst, set_kv=None, drop_tensors=(), tensor_fn=None, drop_kvs=()):
    """src rewritten to dst with gguf's reader and writer: key values changed
    or added by set_kv ({key: (GGUFValueType, value)}), tensors left out, or
    replaced by tensor_fn(name, array) (None keeps the array)."""
    import gguf
    import numpy as np
    r = gguf.GGUFReader(str(src))
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(str(dst), arch)
    set_kv = dict(set_kv or {})
    for key, f in r.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture" or key in drop_kvs:
            continue
        if key in set_kv:
            t, v = set_kv.pop(key)
            w.add_key_value(key, v, t)
        elif f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, f.contents(), f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(key, f.contents(), f.types[0])
    for key, (t, v) in set_kv.items():
        w.add_key_value(key, v, t)
    for t in r.tensors:
        if t.name in drop_tensors:
            continue
        a = np.asarray(t.data, dtype=np.float32).reshape([int(s) for s in reversed(t.shape)])
        if tensor_fn is not None:
            b = tensor_fn(t.name, a)
            a = a if b is None else b
        w.add_tensor(t.name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _defects():
    import gguf
    F32, U32, STR = gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.UINT32, gguf.GGUFValueType.STRING
    neg = lambda name, a: -a if name == "rope_factors_long.weight" else None  # noqa: E731
    short_qkv = lambda name, a: a[:-1] if name == "blk.1.attn_qkv.weight" else None  # noqa: E731
    odd_up = lambda name, a: a[:-2] if name == "blk.0.ffn_up.weight" else None  # noqa: E731
    return {
        "phi3 qkv rows": ("phi3", dict(tensor_fn=short_qkv), "attn_qkv"),
        "phi3 gate-up rows": ("phi3", dict(tensor_fn=odd_up), "ffn_up"),
        "phi3 long factors without short": ("phi3", dict(drop_tensors=("rope_factors_short.weight",)),
                                            "rope_factors_short"),
        "phi3 negative factor": ("phi3", dict(tensor_fn=neg), "rope factor"),
        "phi3 attn factor 0": ("phi3", dict(set_kv={"phi3.rope.scaling.attn_factor": (F32, 0.0)}),
                               "attn_factor"),
        "phi3 heads not n_embd": ("phi3", dict(set_kv={"phi3.attention.key_length": (U32, 8),
                                                       "phi3.attention.value_length": (U32, 8)}),
                                  "n_embd"),
        "gemma2 negative soft-cap": ("gemma2", dict(set_kv={"gemma2.attn_logit_softcapping": (F32, -1.0)}),
                                     "soft-capping"),
        "gemma2 window 0": ("gemma2", dict(set_kv={"gemma2.attention.sliding_window": (U32, 0)}),
                            "sliding_window"),
        "gpt-oss sinks short": ("gpt-oss", dict(tensor_fn=lambda n, a: a[:-1] if n == "blk.0.attn_sinks.weight"
                                                else None), "attn_sinks"),
        "gpt-oss sinks missing": ("gpt-oss", dict(drop_tensors=("blk.1.attn_sinks.weight",)), "attn_sinks"),
        "gpt-oss router bias missing": ("gpt-oss", dict(drop_tensors=("blk.2.ffn_gate_inp.bias",)),
                                        "ffn_gate_inp.bias"),
        "gpt-oss expert bias shape": ("gpt-oss", dict(tensor_fn=lambda n, a: a[:, :-1] if n == "blk.1.ffn_down_exps.bias"
                                                      else None), "ffn_down_exps.bias"),
        "gpt-oss output bias missing": ("gpt-oss", dict(drop_tensors=("blk.0.attn_output.bias",)),
                                        "attn_output.bias"),
        "gpt-oss window missing": ("gpt-oss", dict(drop_kvs=("gpt-oss.attention.sliding_window",)),
                                   "sliding_window"),
        "gpt-oss yarn beta 0": ("gpt-oss", dict(set_kv={"gpt-oss.rope.scaling.yarn_beta_fast": (F32, 0.0)}),
                                "yarn"),
        "gpt-oss rope scaling unknown": ("gpt-oss", dict(set_kv={"gpt-oss.rope.scaling.type": (STR, "longrope")}),
                                         "rope scaling type"),
        "gpt-oss expert width missing": ("gpt-oss", dict(drop_kvs=("gpt-oss.expert_feed_forward_length",)),
                                         "expert_feed_forward_length"),
    }


@pytest.mark.parametrize("case", list(_defects()))
def test_defective_file_is_one_line(pasada_bin, case, tmp_path):
    """A file with one defect in what gemma2, phi3 and gpt-oss add is refused at load
    with one line that names it (never a crash)."""
    arch, kw, hint = _defects()[case]
    path = tmp_path / f"{arch}.gguf"
    _copy_gguf(TINY / f"{arch}.gguf", path, **kw)
    res = subprocess.run([str(pasada_bin), "info", str(path)], capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=60)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1 and lines[0].startswith("pasada: "), res.stderr
    assert hint in lines[0], lines[0]


def test_copied_fixture_still_loads(pasada_bin, tmp_path):
    """The copier alone changes nothing pasada rejects (so the defects above
    are what the loader refuses)."""
    for arch in ("gemma2", "phi3"):
        path = tmp_path / f"{arch}.gguf"
        _copy_gguf(TINY / f"{arch}.gguf", path)
        res = subprocess.run([str(pasada_bin), "run", "-m", str(path), "-p", "hi", "-n", "2"], capture_output=True,
                             stdin=subprocess.DEVNULL, timeout=60)
        assert res.returncode == 0, res.stderr
