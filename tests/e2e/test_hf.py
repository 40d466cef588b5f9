"""Hugging Face model folders (-m DIR): config.json, tokenizer.json,
tokenizer_config.json and *.safetensors read as the GGUF files llama.cpp's
converter writes (src/format/hf.c).

Fixtures (scripts/make-hf-fixtures.py): tests/fixtures/hf/<arch>/, the tiny
models of tests/fixtures/tiny/ saved by transformers' save_pretrained (llama,
gemma3, qwen3, gpt-oss, qwen35 in BF16; qwen2 in F16 and sharded) with a tokenizer.json of
the same vocabulary, and <arch>.logits.npz, transformers' logits on those
rounded weights. F32 folders are written here from the F32 GGUF files
(write_f32_folder: the inverse of llama.cpp's conventions; the fixture
script checks it equals save_pretrained's F32 folder), so reading them must
give the GGUF's logits bit for bit (Qwen3.5's to ~1e-7: INEXACT below);
gpt-oss's and Qwen3.5's are also checked against transformers' logits of
tests/fixtures/tiny/<arch>.logits.npz (1e-4).
"""
import json
import shutil
import subprocess

import numpy as np
import pytest

import gguf

from conftest import BUILD, FIXTURES
from hf_folder import HF, fuse_experts, read_safetensors, write_f32_folder
from test_arch_parity import relative_error, run_eval

TINY = FIXTURES / "tiny"
ARCHS = ("llama", "gemma3", "qwen2", "qwen3", "gpt-oss", "qwen35", "gemma4", "gemma4ple", "gemma4moe")
GEMMA4 = ("gemma4", "gemma4ple", "gemma4moe")  # a GGUF of arch gemma4 each
# folders of config + tokenizer files only
F32_ARCHS = ARCHS + ("gemma2", "phi3", "qwen3moe", "mixtral")
# BF16/F16 folders against transformers in F32 on the same rounded weights:
# its model read back from the folder in F32, so that its RoPE and scale
# buffers are computed in F32, not rounded with the weights. Measured on
# the cpu / vulkan (lavapipe) backends: llama 8.4e-7 / 8.7e-7, gemma3
# 3.9e-7 / 4.2e-7, qwen2 (F16) 4.8e-7 / 6.5e-7, qwen3 5.3e-7 / 5.4e-7,
# gpt-oss 8.6e-7 / 1.2e-6, qwen35 3.4e-6 / 6.6e-6, gemma4 1.3e-6 / 1.5e-6,
# gemma4ple 4.2e-6 / 2.4e-6, gemma4moe 3.3e-6 / 2.5e-6.
LOW_TOLERANCE = {arch: 1e-4 for arch in ARCHS}


# Qwen3.5's folder holds A_log, the GGUF -exp(A_log) as numpy rounded it:
# pasada's exp (in double, rounded once) lands on a neighbouring float for
# some heads (1 ulp; `pasada convert` writes those), so its logits agree to
# ~1e-7, not bit for bit.
INEXACT = {"qwen35": "ssm_a"}

# keys the converter leaves to the loader's default: the head n_embd / n_head,
# all of it rotated
DEFAULTED = {"rope.dimension_count", "attention.key_length", "attention.value_length"}


def pasada(*args, check=True):
    proc = subprocess.run([str(BUILD / "pasada"), *map(str, args)], capture_output=True, text=True, timeout=120)
    if check and proc.returncode != 0:
        pytest.fail(f"pasada {' '.join(map(str, args))}: exit {proc.returncode}: {proc.stderr.strip()}")
    return proc


# ---- the folders against the GGUF files ----

@pytest.mark.parametrize("arch", F32_ARCHS)
def test_f32_folder_is_bit_identical_to_gguf(arch, tmp_path):
    """An F32 folder gives the same logits as the GGUF file, bit for bit."""
    folder = write_f32_folder(TINY / f"{arch}.gguf", arch, tmp_path / arch)
    data = np.load(TINY / f"{arch}.logits.npz")
    prompts = [data["ids0"], data["ids2"]]
    args = ("--kv-type", "f32", "--backend", "cpu")
    from_gguf = run_eval("logits", TINY / f"{arch}.gguf", prompts, tmp_path / "g", args)
    from_dir = run_eval("logits", folder, prompts, tmp_path / "d", args)
    for a, b in zip(from_gguf, from_dir):
        if arch in INEXACT:
            assert a.shape == b.shape and relative_error(b, a) < 1e-6, f"max diff {np.max(np.abs(a - b))}"
            continue
        assert a.shape == b.shape and np.array_equal(a, b), f"max diff {np.max(np.abs(a - b))}"


@pytest.mark.parametrize("arch", ("gpt-oss", "qwen35") + GEMMA4)
def test_folder_matches_transformers(arch, tmp_path):
    """The F32 gpt-oss and Qwen3.5 folders against transformers' logits of
    the same seeded models (tests/fixtures/tiny/<arch>.logits.npz, made by
    scripts/make-tiny-models.py; scripts/make-hf-fixtures.py checks the
    folder's tensors are save_pretrained's), every sequence length."""
    _check_transformers_logits(write_f32_folder(TINY / f"{arch}.gguf", arch, tmp_path / arch), arch, tmp_path)


def _check_transformers_logits(folder, arch, tmp_path, label=""):
    """folder's logits (F32 cache, cpu) within 1e-4 of transformers' in
    tests/fixtures/tiny/<arch>.logits.npz, every sequence."""
    data = np.load(TINY / f"{arch}.logits.npz")
    n = len([k for k in data if k.startswith("ids")])
    got = run_eval("logits", folder, [data[f"ids{i}"] for i in range(n)], tmp_path / "d",
                   ("--kv-type", "f32", "--backend", "cpu"))
    for i in range(n):
        err = relative_error(got[i], data[f"logits{i}"])
        print(f"\n  {arch}{label} seq{i}: rel err {err:.2e}", end="")
        assert err <= 1e-4


MOE = ("qwen3moe", "mixtral", "qwen35moe")


@pytest.mark.parametrize("layout", ["fused", "fused-xw"])
@pytest.mark.parametrize("arch", MOE)
def test_fused_experts_folder(arch, layout, tmp_path):
    """The MoE folders with transformers' fused 3-D experts (fuse_experts:
    save_pretrained(save_original_format=False)'s layout, checked by
    scripts/make-hf-fixtures.py; "fused-xw": its x @ W transpose, as some
    published checkpoints store them) against transformers' logits of the
    seeded model (tests/fixtures/tiny/<arch>.logits.npz, 1e-4), every
    sequence; `pasada convert` of it writes the per-expert folder's GGUF
    file byte for byte. The per-expert folder: written from the GGUF
    (qwen3moe, mixtral), save_pretrained's committed one (qwen35moe); the
    tiny qwen35moe's hidden size is twice its expert width, so its
    gate_up_proj is square and down_proj tells the orientation."""
    per_expert = HF / arch if arch == "qwen35moe" else write_f32_folder(TINY / f"{arch}.gguf", arch, tmp_path / arch)
    fused = fuse_experts(per_expert, tmp_path / layout / arch, transposed=layout == "fused-xw")
    names = read_safetensors(fused / "model.safetensors")
    assert not any(".experts.0." in n for n in names) and "model.layers.0.mlp.experts.gate_up_proj" in names
    _check_transformers_logits(fused, arch, tmp_path, " " + layout)
    pasada("convert", per_expert, tmp_path / "per-expert.gguf")
    pasada("convert", fused, tmp_path / "fused.gguf")
    assert (tmp_path / "per-expert.gguf").read_bytes() == (tmp_path / "fused.gguf").read_bytes()


def test_qwen35_multimodal_folder_reads_its_text_model(tmp_path):
    """A Qwen3_5ForConditionalGeneration folder (save_pretrained's layout:
    the text model's keys under text_config, its tensors under
    model.language_model., the vision tower under model.visual., lm_head at
    the top; multi-token prediction under mtp.) runs its text model: the
    logits of the plain Qwen3_5ForCausalLM folder, bit for bit, with its
    multi-token-prediction layer loaded (tests/e2e/test_mtp.py tests it);
    mtp. tensors without their layer are a one-line error."""
    from hf_folder import write_safetensors
    plain = write_f32_folder(TINY / "qwen35.gguf", "qwen35", tmp_path / "plain")
    mm = write_f32_folder(TINY / "qwen35.gguf", "qwen35", tmp_path / "mm")
    text = json.loads((plain / "config.json").read_text())
    cfg = {"architectures": ["Qwen3_5ForConditionalGeneration"], "model_type": "qwen3_5", "text_config": text,
           "vision_config": {"depth": 1, "hidden_size": 32}, "image_token_id": 248056,
           "tie_word_embeddings": text["tie_word_embeddings"]}
    (mm / "config.json").write_text(json.dumps(cfg))
    t = {n.replace("model.", "model.language_model.", 1) if n.startswith("model.") else n: v
         for n, v in read_safetensors(mm / "model.safetensors").items()}
    t["model.visual.patch_embed.proj.weight"] = np.ones((32, 3, 2, 2, 2), np.float32)[..., 0]
    t.update(read_safetensors(TINY / "qwen35.mtp.safetensors"))
    write_safetensors(mm / "model.safetensors", t)
    data = np.load(TINY / "qwen35.logits.npz")
    args = ("--kv-type", "f32", "--backend", "cpu")
    a = run_eval("logits", plain, [data["ids1"]], tmp_path / "a", args)[0]
    b = run_eval("logits", mm, [data["ids1"]], tmp_path / "b", args)[0]
    assert np.array_equal(a, b)
    info = pasada("info", "-m", mm, check=False)
    assert "multi-token:     1 prediction layer" in info.stdout + info.stderr
    lone = mm.parent / "lone"
    shutil.copytree(mm, lone)
    write_safetensors(lone / "model.safetensors",
                      {k: v for k, v in t.items() if not k.startswith("mtp.layers.")})
    res = pasada("info", "-m", lone, check=False)
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "mtp.layers.0" in res.stderr, res.stderr
    del cfg["text_config"]
    (mm / "config.json").write_text(json.dumps(cfg))
    res = pasada("info", "-m", mm, check=False)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1 and "text_config" in lines[0], res.stderr


def test_gpt_oss_mxfp4_folder(tmp_path):
    """The gpt-oss folder with its experts in MXFP4 (the released
    checkpoints' layout): read as llama.cpp's MXFP4 ffn_*_exps, whose values
    (the gguf package's dequantizer) are those the blocks stand for, and
    logits close to those of an F32 folder of the same values (the MXFP4
    products round the activations to 8 bits)."""
    from hf_folder import to_mxfp4, write_safetensors
    folder = write_f32_folder(TINY / "gpt-oss.gguf", "gpt-oss", tmp_path / "mx")
    deq = write_f32_folder(TINY / "gpt-oss.gguf", "gpt-oss", tmp_path / "deq")
    t, d = read_safetensors(folder / "model.safetensors"), read_safetensors(deq / "model.safetensors")
    want = {}
    for name in [n for n in t if n.endswith(("experts.gate_up_proj", "experts.down_proj"))]:
        blocks, scales, values = to_mxfp4(np.ascontiguousarray(t.pop(name).transpose(0, 2, 1)))
        t[name + "_blocks"], t[name + "_scales"] = blocks, scales
        d[name] = values.transpose(0, 2, 1)
        layer, kind = name.split(".")[2], "down" if name.endswith("down_proj") else "gate_up"
        if kind == "down":
            want[f"blk.{layer}.ffn_down_exps.weight"] = values
        else:
            want[f"blk.{layer}.ffn_gate_exps.weight"] = values[:, 0::2]
            want[f"blk.{layer}.ffn_up_exps.weight"] = values[:, 1::2]
    write_safetensors(folder / "model.safetensors", t)
    write_safetensors(deq / "model.safetensors", d)
    pasada("convert", folder, tmp_path / "mx.gguf")
    got = {x.name: x for x in gguf.GGUFReader(str(tmp_path / "mx.gguf")).tensors}
    for name, values in want.items():
        assert got[name].tensor_type == gguf.GGMLQuantizationType.MXFP4, name
        v = gguf.quants.dequantize(got[name].data, got[name].tensor_type).reshape(values.shape)
        assert np.array_equal(v, values), name
    data = np.load(TINY / "gpt-oss.logits.npz")
    args = ("--kv-type", "f32", "--backend", "cpu")
    a = run_eval("logits", folder, [data["ids1"]], tmp_path / "a", args)[0]
    b = run_eval("logits", deq, [data["ids1"]], tmp_path / "b", args)[0]
    c = run_eval("logits", tmp_path / "mx.gguf", [data["ids1"]], tmp_path / "c", args)[0]
    # the ref backend multiplies the MXFP4 values in F32, activations unrounded
    r = run_eval("logits", folder, [data["ids1"]], tmp_path / "r", ("--kv-type", "f32", "--backend", "ref"))[0]
    err, ref_err = relative_error(a, b), relative_error(r, b)
    print(f"\n  MXFP4 folder vs an F32 folder of its values: cpu rel err {err:.2e}, ref {ref_err:.2e}")
    assert np.array_equal(a, c) and ref_err < 1e-5 and err < 5e-2


@pytest.mark.parametrize("backend", ["cpu", "vulkan"])
@pytest.mark.parametrize("arch", ARCHS)
def test_low_precision_folder_matches_transformers(arch, backend, tmp_path, request):
    """The committed BF16 / F16 (sharded) folders against transformers on
    the same rounded weights, on the CPU and on the GPU tests' device."""
    if backend == "vulkan":  # lavapipe where there is no GPU (conftest.py)
        backend = request.getfixturevalue("vulkan_device")
    data = np.load(HF / f"{arch}.logits.npz")
    try:
        got = run_eval("logits", HF / arch, [data["ids"]], tmp_path, ("--kv-type", "f32", "--backend", backend))[0]
    except pytest.fail.Exception as e:  # a backend without the recurrent layers' ops says so
        if "does not run linear-attention" in str(e):
            pytest.skip(f"{backend} does not run Qwen3.5's linear-attention layers")
        raise
    err = relative_error(got, data["logits"])
    print(f"\n  {arch} {backend}: rel err {err:.2e}")
    assert err <= LOW_TOLERANCE[arch]
    assert np.array_equal(got.argmax(1), data["logits"].argmax(1))


def test_sharded_folder_is_sharded():
    index = json.loads((HF / "qwen2" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) >= 2


@pytest.mark.parametrize("arch", F32_ARCHS)
def test_tokenizer_json_gives_the_gguf_ids(arch, tmp_path):
    folder = HF / arch if arch in ARCHS else write_f32_folder(TINY / f"{arch}.gguf", arch, tmp_path / arch)
    texts = ["Hello world, the cat sat on the mat.", "  spaces\tand\nnewlines 123 4567 ",
             "<|bos|>special<|eos|> text", "ünïcödé 日本語 🙂", "the theme of them is the thing"]
    for text in texts:
        a = pasada("tokenize", "-m", TINY / f"{arch}.gguf", "-p", text).stdout
        b = pasada("tokenize", "-m", folder, "-p", text).stdout
        assert a == b, f"{text!r}: GGUF {a.strip()} folder {b.strip()}"


# ---- convert ----

@pytest.mark.parametrize("arch", F32_ARCHS)
def test_convert_writes_the_gguf_file(arch, tmp_path):
    """`pasada convert` of an F32 folder: the gguf package reads the same
    tensors (names, shapes, values) and hyper-parameters as the committed
    GGUF's, and pasada's logits from it equal the folder's."""
    folder = write_f32_folder(TINY / f"{arch}.gguf", arch, tmp_path / arch)
    out = tmp_path / "out.gguf"
    pasada("convert", folder, out)
    mine, ref = gguf.GGUFReader(str(out)), gguf.GGUFReader(str(TINY / f"{arch}.gguf"))
    assert sorted(t.name for t in mine.tensors) == sorted(t.name for t in ref.tensors)
    want = {t.name: t for t in ref.tensors}
    for t in mine.tensors:
        assert t.tensor_type == want[t.name].tensor_type
        x, y = np.array(t.data), np.array(want[t.name].data)
        if t.name.endswith(INEXACT.get(arch, "-")):
            assert np.allclose(x, y, rtol=2.5e-7, atol=0), t.name
            continue
        assert np.array_equal(x, y), t.name
    garch = {"mixtral": "llama", "gemma4ple": "gemma4", "gemma4moe": "gemma4"}.get(arch, arch)
    for key in [k for k in ref.fields if k.startswith(garch + ".")]:  # every hyper-parameter
        if key not in mine.fields and key.split(".", 1)[1] in DEFAULTED:
            continue  # the loader's default (the logits above and below are equal)
        a, b = mine.fields[key], ref.fields[key]
        assert [bytes(a.parts[i]) for i in a.data] == [bytes(b.parts[i]) for i in b.data], key
    g = garch
    for key in ("general.architecture", f"{g}.block_count", f"{g}.embedding_length",
                f"{g}.attention.head_count", f"{g}.attention.head_count_kv", f"{g}.feed_forward_length",
                f"{g}.rope.freq_base", f"{g}.attention.layer_norm_rms_epsilon", "tokenizer.ggml.model",
                "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"):
        a, b = mine.fields[key], ref.fields[key]
        assert [bytes(a.parts[i]) for i in a.data] == [bytes(b.parts[i]) for i in b.data], key
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type"):
        a, b = mine.fields[key], ref.fields[key]
        assert [bytes(a.parts[i]) for i in a.data] == [bytes(b.parts[i]) for i in b.data], key
    data = np.load(TINY / f"{arch}.logits.npz")
    args = ("--kv-type", "f32", "--backend", "cpu")
    a = run_eval("logits", out, [data["ids1"]], tmp_path / "a", args)[0]
    b = run_eval("logits", folder, [data["ids1"]], tmp_path / "b", args)[0]
    assert np.array_equal(a, b)


def test_convert_keeps_bf16_and_the_chat_template(tmp_path):
    out = tmp_path / "llama-bf16.gguf"
    pasada("convert", HF / "llama", out)
    r = gguf.GGUFReader(str(out))
    types = {t.name: t.tensor_type for t in r.tensors}
    assert types["blk.0.attn_q.weight"] == gguf.GGMLQuantizationType.BF16
    assert types["blk.0.attn_norm.weight"] == gguf.GGMLQuantizationType.F32
    f = r.fields["tokenizer.chat_template"]
    assert "add_generation_prompt" in bytes(f.parts[f.data[0]]).decode()


def test_commands_take_a_folder(tmp_path):
    info = pasada("info", "-m", HF / "qwen2").stdout
    assert "qwen2" in info
    run = pasada("run", "-m", HF / "llama", "-p", "the cat", "-n", "4", "--temp", "0")
    assert run.returncode == 0
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}))
    tpl = pasada("template", "-m", HF / "llama", "-f", conv).stdout
    assert "<|bos|>user\nhi<|eos|>" in tpl
    assert "PASS" in pasada("verify", "-m", HF / "gemma3").stdout
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat and the dog ate the hat. " * 8)
    ppl = pasada("perplexity", "-m", HF / "qwen3", "-f", text, "-c", "32", "-q", "--json").stdout
    assert json.loads(ppl)["ppl"] > 1


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_quantize_at_load_equals_quantize_of_the_converted_file(arch, tmp_path):
    """--quantize Q8_0 on a folder gives the logits of `pasada quantize
    --type Q8_0 --pure` on its converted GGUF, bit for bit (the same
    reference quantizer, after llama's Q/K permutation), and differs from
    the unquantized folder."""
    folder = write_f32_folder(TINY / f"{arch}.gguf", arch, tmp_path / arch)
    pasada("convert", folder, tmp_path / "f32.gguf")
    pasada("quantize", tmp_path / "f32.gguf", tmp_path / "q8.gguf", "--type", "Q8_0", "--pure")
    ids = [np.load(TINY / f"{arch}.logits.npz")["ids1"]]
    args = ("--kv-type", "f32", "--backend", "cpu")
    from_file = run_eval("logits", tmp_path / "q8.gguf", ids, tmp_path / "a", args)[0]
    at_load = run_eval("logits", folder, ids, tmp_path / "b", (*args, "--quantize", "Q8_0"))[0]
    plain = run_eval("logits", folder, ids, tmp_path / "c", args)[0]
    assert np.array_equal(from_file, at_load)
    assert not np.array_equal(plain, at_load)


def test_quantize_option_checks_its_type():
    res = pasada("run", "-m", HF / "llama", "--quantize", "Q9_9", "-p", "x", check=False)
    assert res.returncode == 2 and "Q8_0" in res.stderr
    run = pasada("run", "-m", HF / "llama", "--quantize", "q8_0", "-p", "the cat", "-n", "4", "--temp", "0")
    assert run.returncode == 0


@pytest.fixture(scope="module")
def llama_q8(tmp_path_factory):
    """An F32 llama folder and its converted GGUF quantized to Q8_0 (--pure):
    what --quantize Q8_0 on the folder must equal."""
    d = tmp_path_factory.mktemp("q8")
    folder = write_f32_folder(TINY / "llama.gguf", "llama", d / "llama")
    pasada("convert", folder, d / "f32.gguf")
    pasada("quantize", d / "f32.gguf", d / "q8.gguf", "--type", "Q8_0", "--pure")
    text = d / "text.txt"
    text.write_text("the cat sat on the mat and the dog ate the hat. " * 8)
    return folder, d / "q8.gguf", text


def test_quantize_option_on_perplexity_and_kld(llama_q8):
    """perplexity --quantize gives the quantized file's value; kld
    --quantize quantizes QUANT only, so a folder against itself quantized
    is the folder against the quantized file."""
    folder, q8, text = llama_q8
    ppl = lambda *a: json.loads(pasada("perplexity", "-f", text, "-c", "32", "-q", "--json", *a).stdout)["ppl"]
    assert ppl("-m", folder, "--quantize", "Q8_0") == ppl("-m", q8) != ppl("-m", folder)
    kld = lambda *a: json.loads(pasada("kld", "--base", folder, "-f", text, "-c", "32", "-q", "--json", *a).stdout)
    a, b = kld("-m", folder, "--quantize", "Q8_0"), kld("-m", q8)
    keys = ("kl_mean", "kl_max", "top1_agreement", "ppl_ratio")
    assert [a[k] for k in keys] == [b[k] for k in keys] and a["kl_mean"] > 0
    assert kld("-m", folder)["kl_mean"] == 0
    for cmd in (("perplexity",), ("kld", "--base", folder)):
        res = pasada(*cmd, "-m", folder, "-f", text, "--quantize", "Q9_9", check=False)
        assert res.returncode == 2 and "Q8_0" in res.stderr, res.stderr


def test_quantize_option_on_verify(llama_q8, tmp_path):
    """verify --quantize runs the quantized weights on both backends: the
    fast path's logits are those of the quantized file."""
    folder, q8, _ = llama_q8
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    pasada("verify", "-m", folder, "--quantize", "Q8_0", "--save", a, "-q")
    pasada("verify", "-m", q8, "--save", b, "-q")
    la, lb = (gguf.GGUFReader(f).get_tensor(0).data for f in (a, b))
    assert np.array_equal(la, lb)
    res = pasada("verify", "-m", folder, "--quantize", "Q9_9", check=False)
    assert res.returncode == 2 and "Q8_0" in res.stderr


def test_quantize_option_on_serve(llama_q8, pasada_bin):
    """serve --quantize answers as the quantized file does (greedy text)."""
    from test_server import Server
    folder, q8, _ = llama_q8
    want = pasada("run", "-m", q8, "-p", "the cat", "-n", "6", "--temp", "0", "--no-stats").stdout
    s = Server(pasada_bin, folder, "--quantize", "Q8_0", "--parallel", "1", "--ctx", "64")
    try:
        r = s.client().completions.create(model="m", prompt="the cat", max_tokens=6, temperature=0)
    finally:
        assert s.stop() == 0, s.stderr
    assert want and r.choices[0].text == want
    res = pasada("serve", "-m", folder, "--quantize", "Q9_9", check=False)
    assert res.returncode == 2 and "Q8_0" in res.stderr


def test_gemma3_config_of_older_transformers(tmp_path):
    """transformers 4's Gemma 3 config.json (rope_theta and
    rope_local_base_freq keys, sliding_window_pattern instead of layer_types)
    reads as the same model as transformers 5's."""
    folder = tmp_path / "gemma3"
    shutil.copytree(HF / "gemma3", folder)
    cfg = json.loads((folder / "config.json").read_text())
    rope = cfg.pop("rope_parameters")
    cfg.pop("layer_types")
    cfg.update(rope_theta=rope["full_attention"]["rope_theta"], sliding_window_pattern=6,
               rope_local_base_freq=rope["sliding_attention"]["rope_theta"], rope_scaling=None)
    (folder / "config.json").write_text(json.dumps(cfg))
    ids = [np.load(HF / "gemma3.logits.npz")["ids"]]
    args = ("--kv-type", "f32", "--backend", "cpu")
    a = run_eval("logits", HF / "gemma3", ids, tmp_path / "a", args)[0]
    b = run_eval("logits", folder, ids, tmp_path / "b", args)[0]
    assert np.array_equal(a, b)
    cfg["sliding_window_pattern"] = 2  # every second layer global: a different model
    (folder / "config.json").write_text(json.dumps(cfg))
    c = run_eval("logits", folder, ids, tmp_path / "c", args)[0]
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("spelling", ["rope_parameters", "rope_scaling"])
@pytest.mark.parametrize("variant", ["llama3", "linear", "yarn"])
def test_rope_scaling_matches_transformers(variant, spelling, tmp_path):
    """The tiny llama with Llama 3.1's RoPE scaling (llama3), linear
    scaling or YaRN, in transformers 5's rope_parameters or older configs'
    rope_scaling + rope_theta: logits within 1e-4 of transformers', and not
    those of the unscaled model."""
    rp = json.loads((HF / "rope.json").read_text())[variant]
    data = np.load(HF / "rope.npz")
    folder = write_f32_folder(TINY / "llama.gguf", "llama", tmp_path / "llama")
    cfg = json.loads((folder / "config.json").read_text())
    if spelling == "rope_parameters":
        cfg["rope_parameters"] = rp
    else:
        del cfg["rope_parameters"]
        cfg["rope_theta"] = rp["rope_theta"]
        cfg["rope_scaling"] = {k: v for k, v in rp.items() if k != "rope_theta"}
    (folder / "config.json").write_text(json.dumps(cfg))
    args = ("--kv-type", "f32", "--backend", "cpu")
    got = run_eval("logits", folder, [data["ids"]], tmp_path / "a", args)[0]
    want = data[f"{variant}_logits"]
    err = relative_error(got, want)
    plain = run_eval("logits", write_f32_folder(TINY / "llama.gguf", "llama", tmp_path / "plain"), [data["ids"]],
                     tmp_path / "b", args)[0]
    print(f"\n  {variant} ({spelling}): rel err {err:.2e}, unscaled {relative_error(plain, want):.2e}")
    assert err <= 1e-4 and relative_error(plain, want) > 1e-3


def test_convert_writes_llama3_rope_freqs(tmp_path):
    """`pasada convert` of a llama3-scaled folder writes what llama.cpp's
    converter does: no scaling keys, rope_freqs.weight whose entries divide
    each frequency: transformers' default inv_freq over its scaled one."""
    rp = json.loads((HF / "rope.json").read_text())["llama3"]
    folder = write_f32_folder(TINY / "llama.gguf", "llama", tmp_path / "llama")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["rope_parameters"] = rp
    (folder / "config.json").write_text(json.dumps(cfg))
    pasada("convert", folder, tmp_path / "out.gguf")
    r = gguf.GGUFReader(str(tmp_path / "out.gguf"))
    t = {t.name: t for t in r.tensors}["rope_freqs.weight"]
    assert t.tensor_type == gguf.GGMLQuantizationType.F32
    head_dim = 16
    base = 1.0 / (rp["rope_theta"] ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    want = base / np.load(HF / "rope.npz")["llama3_inv_freq"]
    got = np.array(t.data, np.float64)
    assert got.shape == want.shape and np.max(np.abs(got / want - 1)) < 1e-6, (got, want)
    assert not any(k.startswith("llama.rope.scaling") for k in r.fields)


def test_convert_writes_yarn_keys(tmp_path):
    """YaRN as llama.cpp's converter writes it: rope.scaling.type, factor,
    original_context_length (beta_fast where it is not 32); the scalings
    pasada does not run (attention_factor, mscale) refused in one line."""
    rp = json.loads((HF / "rope.json").read_text())["yarn"]
    folder = write_f32_folder(TINY / "llama.gguf", "llama", tmp_path / "llama")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["rope_parameters"] = rp
    (folder / "config.json").write_text(json.dumps(cfg))
    pasada("convert", folder, tmp_path / "out.gguf")
    r = gguf.GGUFReader(str(tmp_path / "out.gguf"))
    f = r.fields["llama.rope.scaling.type"]
    assert bytes(f.parts[f.data[0]]).decode() == "yarn"
    for key, want in (("factor", 4.0), ("original_context_length", 32), ("yarn_beta_fast", 16.0)):
        f = r.fields[f"llama.rope.scaling.{key}"]
        assert f.parts[f.data[0]][0] == want, key
    assert "llama.rope.scaling.yarn_beta_slow" not in r.fields
    cfg["rope_parameters"]["mscale"] = 1.0
    (folder / "config.json").write_text(json.dumps(cfg))
    res = pasada("info", "-m", folder, check=False)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1 and "'mscale' is not supported" in lines[0], res.stderr


@pytest.mark.parametrize("case", ["norm-topk-false", "expert-missing", "long-factor-short", "fused-moe-layout"])
def test_unsupported_or_broken_family_folder_is_one_line(case, tmp_path):
    """Folders of the MoE and Phi-3 families with one thing pasada cannot
    take: refused in one line naming it."""
    from hf_folder import write_safetensors
    arch = {"norm-topk-false": "qwen3moe", "expert-missing": "mixtral", "long-factor-short": "phi3",
            "fused-moe-layout": "qwen3moe"}[case]
    folder = write_f32_folder(TINY / f"{arch}.gguf", arch, tmp_path / arch)
    cfg = json.loads((folder / "config.json").read_text())
    st = folder / "model.safetensors"
    if case == "norm-topk-false":
        cfg["norm_topk_prob"], hint = False, "norm_topk_prob"
    elif case == "long-factor-short":
        cfg["rope_parameters"]["long_factor"].pop()
        hint = "long_factor"
    else:
        t = read_safetensors(st)
        if case == "expert-missing":
            del t["model.layers.1.block_sparse_moe.experts.3.w2.weight"]
            hint = "expert 3 of layer 1 is missing"
        else:  # transformers' fused 3-D experts beside the per-expert ones
            t["model.layers.0.mlp.experts.gate_up_proj"] = np.zeros((7, 80, 64), np.float32)
            hint = "gate_up_proj' fuses layer 0's experts"
        write_safetensors(st, t)
    (folder / "config.json").write_text(json.dumps(cfg))
    res = pasada("info", "-m", folder, check=False)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1 and hint in lines[0], res.stderr


@pytest.mark.parametrize("dtype", ["F16", "BF16"])
def test_half_folder_loads_without_a_copy(dtype, tmp_path):
    """An F16 / BF16 folder's matrices are read from the mapped safetensors
    file as stored (not copied into the in-memory GGUF image first): the
    process's peak memory (VmHWM, `pasada bench --json`) stays under 1.5x
    the weights, where a copy before the CPU's repacking would reach 2x.
    A llama of hidden 1024 and 8 layers (~180 MB of weights)."""
    E, F, L, H, KV, D = 1024, 2816, 8, 16, 4, 64
    folder = tmp_path / "half"
    folder.mkdir()
    for f in (HF / "llama").iterdir():
        if not f.name.startswith("model"):
            shutil.copy(f, folder / f.name)
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(hidden_size=E, intermediate_size=F, num_hidden_layers=L, num_attention_heads=H,
               num_key_value_heads=KV, head_dim=D, dtype="float16" if dtype == "F16" else "bfloat16")
    (folder / "config.json").write_text(json.dumps(cfg))
    V = cfg["vocab_size"]
    rng = np.random.default_rng(7)
    shapes = {"model.embed_tokens.weight": (V, E), "model.norm.weight": (E,), "lm_head.weight": (V, E)}
    for i in range(L):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (E,), p + "post_attention_layernorm.weight": (E,),
                       p + "self_attn.q_proj.weight": (H * D, E), p + "self_attn.k_proj.weight": (KV * D, E),
                       p + "self_attn.v_proj.weight": (KV * D, E), p + "self_attn.o_proj.weight": (E, H * D),
                       p + "mlp.gate_proj.weight": (F, E), p + "mlp.up_proj.weight": (F, E),
                       p + "mlp.down_proj.weight": (E, F)})
    header, blobs, offset = {}, [], 0
    for name in sorted(shapes):
        a = (rng.standard_normal(shapes[name], dtype=np.float32) * 0.02
             + (1.0 if name.endswith("norm.weight") else 0.0)).astype(np.float32)
        raw = a.astype(np.float16).tobytes() if dtype == "F16" else (a.view(np.uint32) >> 16).astype(np.uint16).tobytes()
        header[name] = {"dtype": dtype, "shape": list(shapes[name]), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(folder / "model.safetensors", "wb") as out:
        out.write(len(h).to_bytes(8, "little") + h)
        for b in blobs:
            out.write(b)
    weights = offset
    res = pasada("bench", "-m", folder, "-p", "8", "-n", "2", "-r", "1", "-t", "2", "--no-ceilings", "--json")
    m = json.loads(res.stdout)["memory"]
    print(f"\n  {dtype}: weights {weights / 2**20:.0f} MiB, peak {m['hwm_bytes'] / 2**20:.0f} MiB", end="")
    assert m["hwm_bytes"] < 1.5 * weights, (m["hwm_bytes"], weights)
