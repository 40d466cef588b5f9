"""`pasada serve --embeddings` through the official `openai` client:
client.embeddings.create with a string, a list of strings, token ids and
lists of them, floats and base64 (the client's default, which it decodes),
usage.prompt_tokens, `dimensions` (a 400 naming the field unless the server
declares a Matryoshka model, then truncated and renormalised), bad inputs as
400s in OpenAI's error shape, the generating endpoints refused on an
embedding server and /v1/embeddings on a generating one, and 8 concurrent
requests (batched together by the scheduler) each equal to the same request
alone. The vectors are checked against `pasada embed` (itself checked
against an independent numpy forward pass in test_embeddings_cli.py) and
against that numpy pass here."""
import base64
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import openai
import pytest
import requests

from conftest import FIXTURES
from test_arch_parity import reference_forward
from test_server import Server, delta

MODEL = FIXTURES / "tiny" / "qwen3.gguf"
TEXTS = ["hello world", "the quick brown fox jumps over the lazy dog", "a b c d e f g h i j k l m n o p",
         "one more sentence, with punctuation!", "x", "embeddings are pooled hidden states",
         "seven", "the last of eight inputs"]


def cli_embed(pasada_bin, text):
    p = subprocess.run([str(pasada_bin), "embed", "-m", str(MODEL), "--pooling", "mean", "-p", text],
                       capture_output=True, text=True, timeout=60, check=True)
    return np.array(json.loads(p.stdout), np.float64)


def token_ids(pasada_bin, text):
    p = subprocess.run([str(pasada_bin), "tokenize", "-m", str(MODEL), "-p", text], capture_output=True,
                       text=True, timeout=60, check=True)
    return [int(t) for t in p.stdout.split()]


@pytest.fixture(scope="module")
def server(pasada_bin):
    s = Server(pasada_bin, MODEL, "--embeddings", "--pooling", "mean", "--parallel", "4")
    yield s
    assert s.stop() == 0, s.stderr


def vec(item):
    return np.array(item.embedding, np.float64)


def test_string_float_and_base64(server, pasada_bin):
    c = server.client()
    want = cli_embed(pasada_bin, TEXTS[0])
    r = c.embeddings.create(model="m", input=TEXTS[0], encoding_format="float")
    assert r.object == "list" and r.model == "m" and len(r.data) == 1
    assert r.data[0].object == "embedding" and r.data[0].index == 0
    got = vec(r.data[0])
    assert got.shape == want.shape and np.max(np.abs(got - want)) < 1e-6
    assert abs(np.linalg.norm(got) - 1) < 1e-5
    assert r.usage.prompt_tokens == len(token_ids(pasada_bin, TEXTS[0])) == r.usage.total_tokens
    # the numpy forward pass of the GGUF, mean-pooled and normalised
    h = reference_forward(MODEL, token_ids(pasada_bin, TEXTS[0]), hidden=True).mean(axis=0)
    assert np.max(np.abs(got - h / np.linalg.norm(h))) < 3e-3
    # base64: the client's default, decoded by the client
    b = c.embeddings.create(model="m", input=TEXTS[0])
    assert np.array_equal(vec(b.data[0]), got.astype(np.float32).astype(np.float64))
    # and on the wire: little-endian float32
    raw = requests.post(server.url + "/v1/embeddings",
                        json={"input": TEXTS[0], "encoding_format": "base64"}, timeout=60).json()
    dec = np.frombuffer(base64.b64decode(raw["data"][0]["embedding"]), "<f4")
    assert np.array_equal(dec, got.astype(np.float32))


def test_lists_and_token_ids(server, pasada_bin):
    c = server.client()
    r = c.embeddings.create(model="m", input=TEXTS[:3], encoding_format="float")
    assert [d.index for d in r.data] == [0, 1, 2]
    ids = [token_ids(pasada_bin, t) for t in TEXTS[:3]]
    assert r.usage.prompt_tokens == sum(map(len, ids))
    for d, t in zip(r.data, TEXTS[:3]):
        assert np.max(np.abs(vec(d) - cli_embed(pasada_bin, t))) < 1e-6
    one = c.embeddings.create(model="m", input=ids[1], encoding_format="float")
    assert np.array_equal(vec(one.data[0]), vec(r.data[1]))
    many = c.embeddings.create(model="m", input=ids, encoding_format="float")
    for a, b in zip(many.data, r.data):
        assert np.array_equal(vec(a), vec(b))


def test_concurrent_requests_equal_alone(server):
    c = server.client()
    alone = [vec(c.embeddings.create(model="m", input=t, encoding_format="float").data[0]) for t in TEXTS]
    with ThreadPoolExecutor(8) as ex:
        together = list(ex.map(lambda t: vec(c.embeddings.create(model="m", input=t,
                                                                  encoding_format="float").data[0]), TEXTS))
    for a, b in zip(alone, together):
        assert np.array_equal(a, b)
    # one request of 8 inputs, queued at once: the scheduler prefills them 4
    # at a time (--parallel 4), each input within one step's chunk, so 2
    # steps where one per input would take 8
    server.wait_idle()
    before = server.metrics()
    r = c.embeddings.create(model="m", input=TEXTS, encoding_format="float")
    after = server.wait_idle()
    assert delta(after, before, "pasada_scheduler_steps_total") == 2
    for a, d in zip(alone, r.data):
        assert np.array_equal(a, vec(d))


def bad(server, body, param):
    r = requests.post(server.url + "/v1/embeddings", json=body, timeout=60)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(err) >= {"message", "type", "param", "code"} and err["type"] == "invalid_request_error"
    assert err["param"] == param, err
    return err


def test_bad_inputs(server):
    c = server.client()
    with pytest.raises(openai.BadRequestError):
        c.embeddings.create(model="m", input="")
    bad(server, {"input": ""}, "input")
    bad(server, {"input": []}, "input")
    bad(server, {"input": ["ok", ""]}, "input[1]")
    bad(server, {"input": [1, 2, 10 ** 6]}, "input")
    bad(server, {"input": [[1, 2], [-1]]}, "input[1]")
    bad(server, {"input": [1.5]}, "input")
    bad(server, {"input": {"a": 1}}, "input")
    bad(server, {}, "input")
    bad(server, {"input": "x", "encoding_format": "hex"}, "encoding_format")
    bad(server, {"input": "x", "model": 3}, "model")
    e = bad(server, {"input": "x", "dimensions": 16}, "dimensions")
    assert "Matryoshka" in e["message"]
    bad(server, {"input": "x", "dimensions": 0}, "dimensions")
    bad(server, {"input": "x", "dimensions": 10 ** 6}, "dimensions")
    with pytest.raises(openai.BadRequestError) as ei:
        c.embeddings.create(model="m", input="x", dimensions=16)
    assert "dimensions" in str(ei.value)
    # the width itself is fine
    n = len(c.embeddings.create(model="m", input="x", encoding_format="float").data[0].embedding)
    assert len(c.embeddings.create(model="m", input="x", dimensions=n).data[0].embedding) == n
    # generation on an embedding server
    with pytest.raises(openai.BadRequestError) as ei:
        c.completions.create(model="m", prompt="hi", max_tokens=2)
    assert "embeddings" in str(ei.value)
    # still serving
    assert len(c.embeddings.create(model="m", input="x").data) == 1


def test_matryoshka_truncates_and_renormalises(pasada_bin):
    s = Server(pasada_bin, MODEL, "--embeddings", "--pooling", "last", "--matryoshka")
    try:
        c = s.client()
        full = vec(c.embeddings.create(model="m", input=TEXTS[1], encoding_format="float").data[0])
        cut = vec(c.embeddings.create(model="m", input=TEXTS[1], dimensions=16,
                                      encoding_format="float").data[0])
        assert cut.shape == (16,)
        assert np.max(np.abs(cut - full[:16] / np.linalg.norm(full[:16]))) < 1e-6
    finally:
        assert s.stop() == 0, s.stderr


def test_embeddings_on_a_generating_server(pasada_bin):
    s = Server(pasada_bin, MODEL)
    try:
        with pytest.raises(openai.BadRequestError) as ei:
            s.client().embeddings.create(model="m", input="x")
        assert "--embeddings" in str(ei.value)
    finally:
        assert s.stop() == 0, s.stderr
