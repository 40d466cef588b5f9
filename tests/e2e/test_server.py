"""`pasada serve` end to end, with the official `openai` client unmodified:
chat and completions (streaming and not), stop strings across token
boundaries, logprobs, seeds, the OpenAI error shape, tokenize/detokenize,
continuous batching (32 mixed requests 8 at a time, each equal to the same
request run alone; the metrics add up; every KV block free afterwards),
prefix reuse, and faults (client disconnects, malformed and huge bodies,
over-long prompts) after which the server still answers correctly.

Servers are started on a free port (--port 0; the port is read from the
"listening on" line) and are ready once /health answers 200. The Server
helper is shared with test_server_faults.py."""
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
import requests

LISTEN_RE = re.compile(r"listening on http://([^:\s]+):(\d+)")
SANITIZER_MARKS = ("AddressSanitizer", "LeakSanitizer", "runtime error:", "SUMMARY: ")


class Server:
    """A `pasada serve` child process on a free port, its stderr collected."""

    def __init__(self, binary, model, *args, env=None, ready_timeout=60):
        cmd = [str(binary), "serve", "-m", str(model), "--port", "0", *map(str, args)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, errors="replace",
                                     env=env)
        self.lines = []
        self._port = threading.Event()
        self.url = None
        threading.Thread(target=self._read, daemon=True).start()
        if not self._port.wait(30):
            self.kill()
            raise AssertionError("the server printed no 'listening on' line:\n" + self.stderr)
        deadline = time.time() + ready_timeout
        while time.time() < deadline:
            assert self.proc.poll() is None, "the server exited:\n" + self.stderr
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.05)
        self.kill()
        raise AssertionError("the server never became ready:\n" + self.stderr)

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line)
            m = LISTEN_RE.search(line)
            if m and not self.url:
                self.url = f"http://{m.group(1)}:{m.group(2)}"
                self.port = int(m.group(2))
                self._port.set()

    @property
    def stderr(self):
        return "".join(self.lines)

    def client(self, api_key="unused", **kw):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=api_key, max_retries=0,
                             timeout=kw.pop("timeout", 300), **kw)

    def metrics(self):
        """The /metrics exposition as {"name{labels}": value}."""
        r = requests.get(self.url + "/metrics", timeout=10)
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain")
        out = {}
        for line in r.text.splitlines():
            if line and not line.startswith("#"):
                key, value = line.rsplit(" ", 1)
                out[key] = float(value)
        return out

    def wait_idle(self, timeout=30):
        """Waits until no sequence runs and no KV block is held; the last metrics."""
        deadline = time.time() + timeout
        while True:
            m = self.metrics()
            if m["pasada_running_sequences"] == 0 and m["pasada_kv_blocks_used"] == 0 \
                    and m["pasada_queue_depth"] == 0:
                return m
            assert time.time() < deadline, f"the server did not go idle: {m}"
            time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        finally:
            self.kill()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def delta(after, before, key):
    return after.get(key, 0) - before.get(key, 0)


def chat_msgs(text, system=None):
    msgs = [{"role": "system", "content": system}] if system else []
    return msgs + [{"role": "user", "content": text}]


def stream_text(stream, chat=True):
    """Concatenated text, the finish reason and the usage of a stream."""
    parts, finish, usage = [], None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for c in chunk.choices:
            parts.append((c.delta.content or "") if chat else c.text)
            finish = c.finish_reason or finish
    return "".join(parts), finish, usage


def raw_post(server, path, body, headers=None):
    """POST bytes as they are (not necessarily JSON)."""
    h = {"Content-Type": "application/json", **(headers or {})}
    return requests.post(server.url + path, data=body, headers=h, timeout=60)


def assert_error(resp, status, param=None):
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"]
    if param is not None:
        assert err["param"] == param, err
    return err


@pytest.fixture(scope="module")
def server(pasada_bin, smollm2):
    s = Server(pasada_bin, smollm2, "--parallel", 8, "--ctx", 512, "--max-body", 65536,
               "--max-queue", 64, "--prefill-chunk", 64)
    yield s
    assert s.stop() == 0, s.stderr
    assert "shutting down" in s.stderr


@pytest.fixture(scope="module")
def client(server):
    return server.client()


# ---- basics ----

def test_health_models_metrics(server, client):
    assert requests.get(server.url + "/health").json() == {"status": "ok"}
    models = client.models.list()
    assert [m.id for m in models.data] == ["SmolLM2-135M-Instruct.Q4_1"]
    m = server.metrics()
    for name in ("pasada_kv_blocks_total", "pasada_kv_blocks_free", "pasada_queue_depth",
                 "pasada_running_sequences", "pasada_prefix_cache_hit_tokens_total",
                 "pasada_time_to_first_token_seconds_count",
                 "pasada_inter_token_latency_seconds_count", "pasada_prompt_tokens_total",
                 "pasada_generation_tokens_total"):
        assert name in m, name
    assert m["pasada_kv_blocks_total"] > 0


def test_chat_nonstream_and_stream(client):
    # llama.cpp answers this one "The capital city of France is Paris." too; on
    # "Which city is the capital of France?" both engines answer (greedily)
    # "Le Grand Château...": a 135M model, chaotic at rounding level.
    kw = dict(model="anything", messages=chat_msgs("What is the capital city of France? Answer in one word."),
              max_tokens=12, temperature=0)
    r = client.chat.completions.create(**kw)
    c = r.choices[0]
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")
    assert c.message.role == "assistant" and c.message.content
    assert "Paris" in c.message.content
    assert c.finish_reason in ("stop", "length")
    u = r.usage
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    assert 0 < u.completion_tokens <= 12
    assert r.model == "anything"  # the name is echoed: one model serves them all

    stream = client.chat.completions.create(**kw, stream=True,
                                            stream_options={"include_usage": True})
    text, finish, usage = stream_text(stream)
    assert text == c.message.content and finish == c.finish_reason
    assert usage.prompt_tokens == u.prompt_tokens
    assert usage.completion_tokens == u.completion_tokens


def test_text_parts_and_roles(client):
    parts = [{"type": "text", "text": "Which city is the capital "}, {"type": "text", "text": "of France?"}]
    a = client.chat.completions.create(model="m", messages=[{"role": "user", "content": parts}],
                                       max_tokens=8, temperature=0)
    b = client.chat.completions.create(model="m", messages=chat_msgs("Which city is the capital of France?"),
                                       max_tokens=8, temperature=0)
    assert a.choices[0].message.content == b.choices[0].message.content
    conv = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "Name a color."}]
    r = client.chat.completions.create(model="m", messages=conv, max_tokens=6, temperature=0)
    assert r.choices[0].message.content


def test_completions_nonstream_and_stream(client):
    kw = dict(model="m", prompt="The capital of France is", max_tokens=10, temperature=0)
    r = client.completions.create(**kw)
    assert r.object == "text_completion"
    text = r.choices[0].text
    assert text.strip().startswith("Paris")
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 10
    streamed, finish, usage = stream_text(
        client.completions.create(**kw, stream=True, stream_options={"include_usage": True}),
        chat=False)
    assert streamed == text and finish == "length" and usage.completion_tokens == 10
    # the prompt as token ids gives the same continuation
    ids = requests.post(client.base_url.join("/tokenize"),
                        json={"content": "The capital of France is"}).json()["tokens"]
    r2 = client.completions.create(model="m", prompt=ids, max_tokens=10, temperature=0)
    assert r2.choices[0].text == text


def test_stream_ends_with_done(server):
    r = requests.post(server.url + "/v1/chat/completions", stream=True, timeout=60,
                      json={"messages": chat_msgs("Hi"), "max_tokens": 4, "stream": True})
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/event-stream"
    events = [ln for ln in r.iter_lines(decode_unicode=True) if ln]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    first = json.loads(events[0][6:])
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"]["role"] == "assistant"


def test_tokenize_detokenize(server):
    text = "Hello world, ça va? 日本語"
    toks = requests.post(server.url + "/tokenize", json={"content": text}).json()["tokens"]
    assert toks and all(isinstance(t, int) for t in toks)
    back = requests.post(server.url + "/detokenize", json={"tokens": toks}).json()["content"]
    assert back == text
    pieces = requests.post(server.url + "/tokenize",
                           json={"content": "Hello world", "with_pieces": True}).json()["tokens"]
    assert "".join(p["piece"] for p in pieces) == "Hello world"
    assert_error(raw_post(server, "/detokenize", json.dumps({"tokens": [-1]})), 400, "tokens")
    assert_error(raw_post(server, "/tokenize", json.dumps({"content": 5})), 400, "content")


def test_detokenize_invalid_utf8(server, smollm2):
    """Byte tokens that make no character: E0 then 80 (80 cannot follow E0,
    nor start a character) give two U+FFFD, at once: the held-back 80 must
    not stall /detokenize or the delivery of generated tokens."""
    import gguf  # the vocabulary's byte tokens, by GPT-2's byte-to-unicode map
    field = gguf.GGUFReader(str(smollm2)).fields["tokenizer.ggml.tokens"]
    vocab = {bytes(field.parts[i]).decode("utf-8"): n for n, i in enumerate(field.data)}
    e0, x80, a = vocab["\u00e0"], vocab["\u0122"], vocab["a"]
    r = requests.post(server.url + "/detokenize", json={"tokens": [e0, x80, a]}, timeout=10)
    assert r.status_code == 200 and r.json()["content"] == "\ufffd\ufffda", r.text
    r = requests.post(server.url + "/detokenize", json={"tokens": [e0, a]}, timeout=10)
    assert r.status_code == 200 and r.json()["content"] == "\ufffda", r.text


# ---- stop strings, logprobs, seeds ----

def test_stop_across_token_boundaries(client):
    prompt = "Count: one, two, three, four, five,"
    base = client.completions.create(model="m", prompt=prompt, max_tokens=16, temperature=0,
                                     logprobs=0)
    text = base.choices[0].text
    tokens = base.choices[0].logprobs.tokens
    assert "".join(tokens) == text
    # a stop string made of the end of one token and the start of the next,
    # first found in the text at that boundary
    stop = None
    for i in range(len(tokens) - 1):
        cand = tokens[i][-2:] + tokens[i + 1][:2]
        start = len("".join(tokens[:i + 1])) - len(tokens[i][-2:])
        if len(cand) >= 3 and text.index(cand) == start:
            stop = cand
            break
    assert stop, tokens
    expect = text[:text.index(stop)]
    for stream in (False, True):
        kw = dict(model="m", prompt=prompt, max_tokens=16, temperature=0, stop=[stop, "@@@never"])
        if stream:
            chunks = list(client.completions.create(**kw, stream=True))
            pieces = [c.choices[0].text for c in chunks if c.choices]
            got = "".join(pieces)
            finish = chunks[-1].choices[0].finish_reason
            assert not any(stop in p for p in pieces)
        else:
            r = client.completions.create(**kw)
            got, finish = r.choices[0].text, r.choices[0].finish_reason
        assert got == expect, (stream, stop, text)
        assert finish == "stop"
    # a stop string as a plain string, never produced: the output is complete
    r = client.completions.create(model="m", prompt=prompt, max_tokens=16, temperature=0,
                                  stop="zzzz")
    assert r.choices[0].text == text and r.choices[0].finish_reason == "length"


def test_chat_logprobs(client):
    r = client.chat.completions.create(model="m", messages=chat_msgs("Say hello."), max_tokens=6,
                                       temperature=0, logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) >= 1
    text = r.choices[0].message.content
    assert "".join(t.token for t in content).startswith(text[:1])
    for t in content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 3
        tops = [x.logprob for x in t.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        assert sum(2.718281828 ** x for x in tops) <= 1.0001
        # greedy: the chosen token is the most likely one
        assert t.top_logprobs[0].token == t.token
        assert abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5
        assert bytes(t.bytes).decode("utf-8", "replace") == t.token
    # streamed logprobs are the same entries
    entries = []
    for chunk in client.chat.completions.create(model="m", messages=chat_msgs("Say hello."),
                                                max_tokens=6, temperature=0, logprobs=True,
                                                top_logprobs=3, stream=True):
        if chunk.choices and chunk.choices[0].logprobs:
            entries += chunk.choices[0].logprobs.content
    assert [(e.token, round(e.logprob, 4)) for e in entries] == \
        [(e.token, round(e.logprob, 4)) for e in content]


def test_completion_logprobs(client):
    r = client.completions.create(model="m", prompt="The sky is", max_tokens=5, temperature=0,
                                  logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 5
    assert lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0
    for tok, l, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert l <= 0 and 1 <= len(top) <= 2
        assert max(top.values()) == pytest.approx(l, abs=1e-5)


def test_seed_reproducible(client):
    kw = dict(model="m", prompt="Once upon a time", max_tokens=12, temperature=1.0)
    a = client.completions.create(**kw, seed=1234).choices[0].text
    b = client.completions.create(**kw, seed=1234).choices[0].text
    c = [client.completions.create(**kw, seed=s).choices[0].text for s in (1, 2, 3)]
    assert a == b
    assert len(set(c + [a])) > 1  # other seeds draw other tokens


# ---- errors in the OpenAI shape ----

@pytest.mark.parametrize("body,param", [
    ({"messages": "hi"}, "messages"),
    ({"messages": None}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "user"}]}, "messages[0].content"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content[0]"),
    ({"temperature": "hot"}, "temperature"),
    ({"temperature": 3}, "temperature"),
    ({"top_p": -0.5}, "top_p"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": 2.5}, "max_tokens"),
    ({"max_completion_tokens": "10"}, "max_completion_tokens"),
    ({"n": 0}, "n"),
    ({"n": 65}, "n"),
    ({"stream": "yes"}, "stream"),
    ({"stop": 7}, "stop"),
    ({"stop": ["a"] * 17}, "stop"),
    ({"seed": 1.5}, "seed"),
    ({"presence_penalty": 5}, "presence_penalty"),
    ({"logprobs": True, "top_logprobs": 50}, "top_logprobs"),
    ({"top_logprobs": 2}, "top_logprobs"),
    ({"model": 3}, "model"),
    ({"stream_options": "x"}, "stream_options"),
])
def test_chat_validation(server, body, param):
    full = {"messages": chat_msgs("hi"), "max_tokens": 2, **body}
    assert_error(raw_post(server, "/v1/chat/completions", json.dumps(full)), 400, param)


@pytest.mark.parametrize("body,param", [
    ({"prompt": 5}, "prompt"),
    ({"prompt": ["a", ""]}, "prompt"),
    ({"prompt": ["a", 5]}, "prompt"),
    ({"prompt": ["a"] * 10, "n": 7}, "n"),
    ({"prompt": [1, 2, 99999999]}, "prompt"),
    ({"prompt": [1, "x"]}, "prompt"),
    ({"prompt": ""}, "prompt"),
    ({"prompt": "x", "logprobs": 21}, "logprobs"),
    ({"prompt": "x", "echo": True}, "echo"),
    ({"prompt": "x", "best_of": 3}, "best_of"),
])
def test_completion_validation(server, body, param):
    assert_error(raw_post(server, "/v1/completions", json.dumps(body)), 400, param)


def test_client_errors_are_typed(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="m", messages=chat_msgs("hi"), n=100)
    assert e.value.status_code == 400 and e.value.body["param"] == "n"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="m", messages=chat_msgs("hi"), temperature=9)
    with pytest.raises(openai.BadRequestError) as e:  # a generating server: serve --embeddings
        client.embeddings.create(model="m", input="x")
    assert e.value.body["code"] == "model_not_embedding"


def test_malformed_requests(server):
    for body in (b"{bad json", b"", b"[1, 2]", b"null", b"\xff\xfe", b'{"messages": [' * 2000):
        assert_error(raw_post(server, "/v1/chat/completions", body), 400)
    assert requests.get(server.url + "/v1/chat/completions").status_code == 405
    assert_error(requests.get(server.url + "/nope"), 404)


def test_over_long_prompt(server, client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="m", prompt="hello " * 600, max_tokens=4)
    msg = e.value.body["message"]
    assert e.value.body["code"] == "context_length_exceeded"
    n_prompt = int(re.search(r"has (\d+) tokens", msg).group(1))
    assert n_prompt > 512 and "512" in msg


def test_huge_bodies(server, client):
    # over the limit: 413 after the body was read; far over it: 413 or a closed connection
    big = json.dumps({"prompt": "x" * 100_000, "max_tokens": 1}).encode()
    err = assert_error(raw_post(server, "/v1/completions", big), 413)
    assert "65536" in err["message"]
    try:
        r = raw_post(server, "/v1/completions", b"x" * (8 << 20))
        assert r.status_code == 413
    except requests.ConnectionError:
        pass
    r = client.completions.create(model="m", prompt="The capital of France is", max_tokens=3,
                                  temperature=0)
    assert r.choices[0].text.strip().startswith("Paris")


# ---- disconnects ----

def _open_stream(server, body):
    """Sends a streaming request on a raw socket; returns it after the first event."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(data) + data)
    got = b""
    while got.count(b"data: ") < 2:
        chunk = s.recv(4096)
        assert chunk, got
        got += chunk
    return s


def test_disconnect_mid_stream_frees_blocks(server):
    before = server.wait_idle()
    # counting goes on and on: the stream is still running when we hang up
    s = _open_stream(server, {"prompt": "1, 2, 3, 4, 5, 6,", "max_tokens": 400,
                              "temperature": 0, "stream": True})
    time.sleep(0.1)
    assert server.metrics()["pasada_running_sequences"] == 1
    s.close()
    after = server.wait_idle(timeout=5)
    assert delta(after, before, 'pasada_requests_finished_total{reason="cancelled"}') == 1
    assert delta(after, before, "pasada_generation_tokens_total") < 400


def test_disconnect_while_waiting_nonstream(server):
    before = server.wait_idle()
    s = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    data = json.dumps({"prompt": "1, 2, 3, 4, 5, 6,", "max_tokens": 400,
                       "temperature": 0}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
              % len(data) + data)
    deadline = time.time() + 60
    while server.metrics()["pasada_running_sequences"] != 1:
        assert time.time() < deadline
        time.sleep(0.05)
    s.close()
    deadline = time.time() + 10
    while delta(server.metrics(), before, 'pasada_requests_finished_total{reason="cancelled"}') != 1:
        assert time.time() < deadline, "the job was not cancelled"
        time.sleep(0.05)
    after = server.wait_idle(timeout=5)
    assert delta(after, before, 'pasada_requests_total{endpoint="/v1/completions",status="499"}') == 1


# ---- continuous batching: batched output equals output alone ----

WORDS = ("the quick brown fox jumps over the lazy dog while a small bird sings about rivers "
         "mountains and the long road home under a silver moon").split()


def mixed_requests(n=32):
    reqs = []
    for i in range(n):
        words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(3 + (i * 11) % 48))
        r = {"max_tokens": [2, 4, 6, 9][i % 4], "temperature": 0}
        if i % 2:  # seeded sampling
            r.update(temperature=0.9, top_p=0.95, seed=1000 + i)
        if i % 3 == 0:
            r.update(kind="chat", messages=chat_msgs(f"Continue: {words}"))
        else:
            r.update(kind="completion", prompt=f"Text {i}: {words}")
        r["stream"] = i % 5 == 0
        reqs.append(r)
    return reqs


def run_request(client, r):
    kw = {k: v for k, v in r.items() if k not in ("kind", "stream")}
    kw["model"] = "m"
    if r["stream"]:
        kw["stream_options"] = {"include_usage": True}
        if r["kind"] == "chat":
            text, finish, usage = stream_text(client.chat.completions.create(**kw, stream=True))
        else:
            text, finish, usage = stream_text(client.completions.create(**kw, stream=True), False)
        return text, finish, usage.prompt_tokens, usage.completion_tokens
    if r["kind"] == "chat":
        out = client.chat.completions.create(**kw)
        text = out.choices[0].message.content
    else:
        out = client.completions.create(**kw)
        text = out.choices[0].text
    return text, out.choices[0].finish_reason, out.usage.prompt_tokens, out.usage.completion_tokens


def test_batched_equals_alone_and_metrics_add_up(server, client):
    reqs = mixed_requests(32)
    alone = [run_request(client, r) for r in reqs]
    before = server.wait_idle()
    with ThreadPoolExecutor(8) as pool:
        batched = list(pool.map(lambda r: run_request(client, r), reqs))
    after = server.wait_idle()
    for i, (a, b) in enumerate(zip(alone, batched)):
        assert a == b, (i, reqs[i], a, b)
    # the counters add up
    assert delta(after, before, 'pasada_requests_total{endpoint="/v1/chat/completions",status="200"}') \
        + delta(after, before, 'pasada_requests_total{endpoint="/v1/completions",status="200"}') == 32
    assert delta(after, before, "pasada_prompt_tokens_total") == sum(b[2] for b in batched)
    assert delta(after, before, "pasada_generation_tokens_total") == sum(b[3] for b in batched)
    assert delta(after, before, "pasada_time_to_first_token_seconds_count") == 32
    assert delta(after, before, 'pasada_requests_finished_total{reason="stop"}') + \
        delta(after, before, 'pasada_requests_finished_total{reason="length"}') == 32
    itl = delta(after, before, "pasada_inter_token_latency_seconds_count")
    assert itl == sum(b[3] for b in batched) - 32
    # batching happened: fewer steps than tokens
    assert delta(after, before, "pasada_scheduler_step_tokens_total") > \
        delta(after, before, "pasada_scheduler_steps_total")
    # every KV block is free again (cached prefixes count as free to reuse)
    assert after["pasada_kv_blocks_used"] == 0
    assert after["pasada_kv_blocks_free"] + after["pasada_kv_blocks_cached"] == \
        after["pasada_kv_blocks_total"]


# ---- chunked prefill: a long prompt does not freeze the other streams ----

def test_long_prompt_prefill_interleaves(server, client):
    server.wait_idle()
    stamps, first = [], threading.Event()

    def stream_a():
        for chunk in client.completions.create(model="m", prompt="1, 2, 3, 4, 5, 6,",
                                               max_tokens=40, temperature=0, stream=True):
            if chunk.choices and chunk.choices[0].text:
                stamps.append(time.perf_counter())
                if len(stamps) == 2:
                    first.set()

    t = threading.Thread(target=stream_a)
    t.start()
    assert first.wait(120)
    long_prompt = "The wind moved slowly over the hills and the valley below. " * 26
    t0 = time.perf_counter()
    r = client.completions.create(model="m", prompt=long_prompt, max_tokens=1, temperature=0)
    t1 = time.perf_counter()
    t.join(300)
    assert r.usage.prompt_tokens > 4 * 64  # at least 5 chunks of 64
    during = [s for s in stamps if t0 < s < t1]
    assert len(during) >= 3, (len(during), len(stamps))


# ---- prefix reuse ----

def test_prefix_reuse(server, client):
    system = (f"Session {time.time_ns()}. You are a meticulous assistant for a library. " +
              "Always answer politely, cite the shelf number, and keep answers short. " * 12)

    def ask(q):
        t0 = time.perf_counter()
        ttft, usage = None, None
        for chunk in client.chat.completions.create(
                model="m", messages=chat_msgs(q, system), max_tokens=4, temperature=0,
                stream=True, stream_options={"include_usage": True}):
            if ttft is None and chunk.choices and chunk.choices[0].delta.content:
                ttft = time.perf_counter() - t0
            if chunk.usage:
                usage = chunk.usage
        return ttft or (time.perf_counter() - t0), usage

    before = server.wait_idle()
    t1, u1 = ask("Where are the maps?")
    mid = server.wait_idle()
    t2, u2 = ask("Where are the novels?")
    after = server.wait_idle()
    assert u1.prompt_tokens > 200
    # earlier requests share at most the chat template's opening and
    # "Session" (the time makes the rest new)
    first = u1.prompt_tokens_details.cached_tokens
    assert first < 16, first
    cached = u2.prompt_tokens_details.cached_tokens
    assert cached >= u1.prompt_tokens - 32 and cached < u2.prompt_tokens
    assert delta(mid, before, "pasada_prefix_cache_hit_tokens_total") == first
    assert delta(after, mid, "pasada_prefix_cache_hit_tokens_total") == cached
    assert t2 < t1, (t1, t2)


def count_tokens(server, text):
    """The number of tokens the server's /tokenize gives text."""
    return len(requests.post(server.url + "/tokenize", json={"content": text}).json()["tokens"])


def test_prefix_reuse_to_the_token(server, client):
    """A prompt sent again reuses all of it but its last token, though it ends
    inside a KV block, and gives the same greedy text as the first time
    (computed from scratch); one with more after it reuses the first."""
    prompt = (f"Note {time.time_ns()}: the archive opens at nine, the reading room at ten, "
              "and the map room only on Thursdays, by appointment.")

    while count_tokens(server, prompt) % 16 == 0:  # end inside a KV block of 16 positions
        prompt += " Yes."

    def complete(p):
        before = server.wait_idle()
        r = client.completions.create(model="m", prompt=p, max_tokens=12, temperature=0)
        after = server.wait_idle()
        return r, delta(after, before, "pasada_prefix_cache_hit_tokens_total")

    r1, _ = complete(prompt)
    r2, hits2 = complete(prompt)
    assert r2.usage.prompt_tokens_details.cached_tokens == r1.usage.prompt_tokens - 1
    assert hits2 == r1.usage.prompt_tokens - 1
    assert r2.choices[0].text == r1.choices[0].text
    r3, hits3 = complete(prompt + " The catalogue")
    assert r1.usage.prompt_tokens - 1 <= r3.usage.prompt_tokens_details.cached_tokens
    assert r3.usage.prompt_tokens_details.cached_tokens < r3.usage.prompt_tokens
    assert hits3 == r3.usage.prompt_tokens_details.cached_tokens


def test_prefix_reuse_next_turn(server, client):
    """A conversation's next turn reuses the whole previous prompt though the
    first answer ended inside a KV block it did not fill: the ended
    sequence's partial last block stays cached."""
    # the template's own tokens around one user message
    probe = f"Probe {time.time_ns()}"
    r0 = client.chat.completions.create(model="m", messages=chat_msgs(probe), max_tokens=1,
                                        temperature=0)
    frame = r0.usage.prompt_tokens - count_tokens(server, probe)
    question = f"Turn {time.time_ns()}: which rooms of the archive open before noon?"
    # the prompt ends 2..10 positions into a block of 16, so that 4 answer
    # tokens cannot fill it
    while not 2 <= (frame + count_tokens(server, question)) % 16 <= 10:
        question += " Thanks."
    first = [{"role": "user", "content": question}]
    r1 = client.chat.completions.create(model="m", messages=first, max_tokens=4, temperature=0)
    assert 2 <= r1.usage.prompt_tokens % 16 <= 10, r1.usage.prompt_tokens
    before = server.wait_idle()
    second = first + [{"role": "assistant", "content": r1.choices[0].message.content},
                      {"role": "user", "content": "And which on Sundays?"}]
    r2 = client.chat.completions.create(model="m", messages=second, max_tokens=4, temperature=0)
    after = server.wait_idle()
    cached = r2.usage.prompt_tokens_details.cached_tokens
    # all of the first prompt (but its last token, should the answer's
    # first token merge with it when the conversation is tokenized whole);
    # without the tail, at most the prompt's whole blocks: 2 or more fewer
    assert r1.usage.prompt_tokens - 1 <= cached < r2.usage.prompt_tokens, (r1.usage.prompt_tokens, cached)
    assert delta(after, before, "pasada_prefix_cache_hit_tokens_total") == cached
