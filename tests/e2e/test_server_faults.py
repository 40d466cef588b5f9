"""`pasada serve` under faults that need a server of their own: a wrong API
key (401), a full queue (429, then normal service), SIGTERM during streams
(every stream ends cleanly with a finish reason and [DONE], exit status 0),
and a subset of the whole suite against the AddressSanitizer + UBSan build
(no sanitizer report, no leak, exit 0)."""
import json
import os
import signal
import socket
import threading
import time

import openai
import pytest
import requests

from test_server import (SANITIZER_MARKS, Server, _open_stream, assert_error, chat_msgs, delta,
                         raw_post, stream_text)

COUNTING = "1, 2, 3, 4, 5, 6,"  # SmolLM2 keeps counting: long, predictable streams


def test_api_key(pasada_bin, smollm2):
    s = Server(pasada_bin, smollm2, "--threads", 1, "--api-key", "sekrit", "--ctx", 256, "--parallel", 2)
    try:
        assert requests.get(s.url + "/health").status_code == 200  # probes need no key
        with pytest.raises(openai.AuthenticationError) as e:
            s.client(api_key="wrong").models.list()
        assert e.value.status_code == 401 and e.value.body["code"] == "invalid_api_key"
        assert_error(requests.get(s.url + "/v1/models"), 401)
        assert_error(requests.get(s.url + "/metrics"), 401)
        assert_error(raw_post(s, "/v1/completions", b'{"prompt": "hi"}',
                              {"Authorization": "Bearer sekrit2"}), 401)
        ok = s.client(api_key="sekrit")
        assert [m.id for m in ok.models.list().data]
        r = ok.completions.create(model="m", prompt="The capital of France is", max_tokens=2,
                                  temperature=0)
        assert r.choices[0].text.strip().startswith("Paris")
    finally:
        assert s.stop() == 0, s.stderr


def test_queue_overflow_then_normal_service(pasada_bin, smollm2):
    s = Server(pasada_bin, smollm2, "--threads", 1, "--parallel", 1, "--max-queue", 2, "--ctx", 256)
    try:
        client = s.client()
        results = []

        def one(i):
            try:
                text, finish, _ = stream_text(client.completions.create(
                    model="m", prompt=f"{i}, " + COUNTING, max_tokens=16, temperature=0,
                    stream=True), chat=False)
                results.append(("ok", finish))
            except openai.RateLimitError as e:
                assert e.status_code == 429 and e.body["code"] == "queue_full"
                results.append(("429", None))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        ok = [r for r in results if r[0] == "ok"]
        rejected = [r for r in results if r[0] == "429"]
        assert len(results) == 8
        assert len(rejected) >= 1 and len(ok) >= 3  # one running, two waiting
        assert all(f == "length" for _, f in ok)
        m = s.wait_idle()
        assert m["pasada_requests_rejected_queue_full_total"] == len(rejected)
        assert m['pasada_requests_total{endpoint="/v1/completions",status="429"}'] == len(rejected)
        # and it serves normally afterwards
        r = client.completions.create(model="m", prompt="The capital of France is", max_tokens=2,
                                      temperature=0)
        assert r.choices[0].text.strip().startswith("Paris")
        # a request's n choices take n places, queued all at once or not at
        # all: 3 never fit a queue of 2, 2 do
        with pytest.raises(openai.RateLimitError) as ei:
            client.completions.create(model="m", prompt="Hi", max_tokens=2, n=3, temperature=0)
        assert ei.value.status_code == 429 and ei.value.body["code"] == "queue_full"
        r = client.completions.create(model="m", prompt="Hi", max_tokens=2, n=2, temperature=0)
        assert len(r.choices) == 2
        assert s.wait_idle()["pasada_requests_rejected_queue_full_total"] == len(rejected) + 1
    finally:
        assert s.stop() == 0, s.stderr


def _stream_until_end(client, i, started, out):
    try:
        got_text = False
        parts, finish = [], None
        for chunk in client.completions.create(model="m", prompt=f"{i}, " + COUNTING,
                                               max_tokens=400, temperature=0, stream=True):
            for c in chunk.choices:
                parts.append(c.text)
                finish = c.finish_reason or finish
                if c.text and not got_text:
                    got_text = True
                    started.release()
        out[i] = ("ok", "".join(parts), finish)
    except Exception as e:  # noqa: BLE001 - reported by the test
        out[i] = ("error", repr(e), None)
        started.release()


def test_shutdown_during_streams(pasada_bin, smollm2):
    s = Server(pasada_bin, smollm2, "--threads", 1, "--parallel", 4, "--ctx", 512)
    client = s.client()
    started = threading.Semaphore(0)
    out = {}
    threads = [threading.Thread(target=_stream_until_end, args=(client, i, started, out))
               for i in range(3)]
    for t in threads:
        t.start()
    for _ in threads:
        assert started.acquire(timeout=120)
    t0 = time.time()
    rc = s.stop(signal.SIGTERM, timeout=30)
    for t in threads:
        t.join(30)
    assert rc == 0, s.stderr
    assert time.time() - t0 < 30
    for i in range(3):
        status, text, finish = out[i]
        assert status == "ok", text  # the stream ended with [DONE], not a broken connection
        assert finish == "length" and text
    assert "shutting down" in s.stderr and "stopped" in s.stderr
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=2)


def test_sigint_idle_exits_zero(pasada_bin, smollm2):
    s = Server(pasada_bin, smollm2, "--threads", 1, "--ctx", 256, "--parallel", 1)
    assert s.stop(signal.SIGINT) == 0, s.stderr
    assert "SIGINT" in s.stderr


def test_asan_subset(asan_build_dir, smollm2):
    env = {**os.environ, "ASAN_OPTIONS": "detect_leaks=1", "UBSAN_OPTIONS": "print_stacktrace=1"}
    s = Server(asan_build_dir / "pasada", smollm2, "--parallel", 4, "--ctx", 256,
               "--max-body", 65536, env=env, ready_timeout=120)
    try:
        c = s.client()
        r = c.chat.completions.create(model="m", messages=chat_msgs("Hi"), max_tokens=3,
                                      temperature=0, logprobs=True, top_logprobs=2)
        assert r.choices[0].message.content and r.choices[0].logprobs.content
        text, finish, usage = stream_text(c.chat.completions.create(
            model="m", messages=chat_msgs("Hi"), max_tokens=3, temperature=0, stream=True,
            stream_options={"include_usage": True}))
        assert text == r.choices[0].message.content and usage.completion_tokens >= 1
        r = c.completions.create(model="m", prompt=COUNTING, max_tokens=6, temperature=0,
                                 logprobs=2, stop=[" 8"])
        assert r.choices[0].finish_reason == "stop" and " 8" not in r.choices[0].text
        for body in (b"{bad", b"[]", b'{"messages": 5}', b'{"messages": [{"role": 1}]}',
                     b'{"messages": [{"role": "user", "content": "x"}], "temperature": "x"}'):
            assert_error(raw_post(s, "/v1/chat/completions", body), 400)
        assert_error(raw_post(s, "/v1/completions", b'{"prompt": "' + b"y" * 70000 + b'"}'), 413)
        assert_error(raw_post(s, "/v1/completions", b'{"prompt": "' + b"hi " * 400 + b'"}'), 400,
                     "prompt")
        toks = requests.post(s.url + "/tokenize", json={"content": "héllo"}).json()["tokens"]
        assert requests.post(s.url + "/detokenize",
                             json={"tokens": toks}).json()["content"] == "héllo"
        before = s.wait_idle(60)
        sock = _open_stream(s, {"prompt": COUNTING, "max_tokens": 200, "temperature": 0,
                                "stream": True})
        sock.close()
        after = s.wait_idle(60)
        assert delta(after, before, 'pasada_requests_finished_total{reason="cancelled"}') == 1
        done = []
        threads = [threading.Thread(target=lambda i=i: done.append(c.completions.create(
            model="m", prompt=f"{i} " + COUNTING, max_tokens=4, temperature=0)))
            for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert len(done) == 4
        # and a shutdown in the middle of a stream
        started, out = threading.Semaphore(0), {}
        t = threading.Thread(target=_stream_until_end, args=(c, 0, started, out))
        t.start()
        assert started.acquire(timeout=120)
    finally:
        rc = s.stop(timeout=60)
    t.join(60)
    assert out[0][0] == "ok" and out[0][2] == "length", out
    assert rc == 0, s.stderr
    assert not any(mark in s.stderr for mark in SANITIZER_MARKS), s.stderr


def test_admission_waits_for_kv_blocks(pasada_bin, smollm2):
    # 16 blocks of 16 positions: two of these requests (~100 prompt + 24
    # generated tokens, 8 blocks each) fit at once; the others wait their turn
    s = Server(pasada_bin, smollm2, "--threads", 1, "--parallel", 4, "--ctx", 256, "--kv-blocks", 16)
    try:
        client = s.client()
        prompts = [f"Request {i}. " + "The river flows past the old mill and the quiet town. " * 8
                   for i in range(4)]

        def run(p):
            r = client.completions.create(model="m", prompt=p, max_tokens=24, temperature=0)
            return r.choices[0].text, r.usage.completion_tokens

        alone = run(prompts[0])
        threads, out = [], {}
        for i, p in enumerate(prompts):
            threads.append(threading.Thread(target=lambda i=i, p=p: out.__setitem__(i, run(p))))
            threads[-1].start()
        for t in threads:
            t.join(600)
        assert len(out) == 4
        assert out[0] == alone
        m = s.wait_idle()
        assert m["pasada_kv_blocks_total"] == 16 and m["pasada_kv_blocks_used"] == 0
        assert m['pasada_requests_finished_total{reason="error"}'] == 0
        assert m['pasada_requests_finished_total{reason="length"}'] + \
            m['pasada_requests_finished_total{reason="stop"}'] == 5
    finally:
        assert s.stop() == 0, s.stderr


def test_kv_options(pasada_bin, smollm2):
    """--kv-type and --kv-block-size: bad values are one-line usage errors; an
    F32 cache in 32-position blocks and a Q8 one serve and report their sizes."""
    import subprocess
    for bad in (["--kv-type", "q4"], ["--kv-block-size", "20"], ["--kv-block-size", "8"]):
        res = subprocess.run([str(pasada_bin), "serve", "-m", str(smollm2), *bad], capture_output=True, text=True,
                             timeout=60)
        assert res.returncode == 2, res.stderr
        assert len(res.stderr.strip().splitlines()) == 1 and bad[0] in res.stderr, res.stderr
    s = Server(pasada_bin, smollm2, "--threads", 1, "--parallel", 2, "--ctx", 256, "--kv-type", "f32",
               "--kv-block-size", 32, "--kv-blocks", 16)
    try:
        r = s.client().completions.create(model="m", prompt="The capital of France is", max_tokens=2,
                                          temperature=0)
        assert r.choices[0].text.strip().startswith("Paris")
        m = s.wait_idle()
        assert m["pasada_kv_block_size"] == 32 and m["pasada_kv_blocks_total"] == 16
        # SmolLM2: 30 layers, 3 KV heads of 64 for K and for V, 4 bytes a value
        assert m["pasada_kv_bytes"] == 16 * 32 * 30 * (3 * 64 * 2) * 4
    finally:
        assert s.stop() == 0, s.stderr
    s = Server(pasada_bin, smollm2, "--threads", 1, "--parallel", 2, "--ctx", 256, "--kv-type", "q8",
               "--kv-blocks", 16)
    try:
        r = s.client().completions.create(model="m", prompt="The capital of France is", max_tokens=2,
                                          temperature=0)
        assert r.choices[0].text.strip().startswith("Paris")
        m = s.wait_idle()
        # 16-position blocks; per position, layer and KV head one byte a value
        # plus a float scale, for K and for V
        assert m["pasada_kv_bytes"] == 16 * 16 * 30 * 3 * 2 * (64 + 4)
    finally:
        assert s.stop() == 0, s.stderr
    assert "MiB, q8)" in s.stderr, s.stderr  # the ready line names the cache's type


def test_chat_roles_the_template_rejects(pasada_bin, gemma3):
    """Gemma's template takes only alternating user / assistant turns: any
    other order is the client's error (400 on `messages`, naming the turn),
    and the server goes on serving, never a 500 (a case
    tests/fuzz/fuzz_openai.c found)."""
    s = Server(pasada_bin, gemma3, "--threads", 1, "--ctx", 256, "--parallel", 1)
    try:
        for msgs, turn in [
                ([{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}], 0),
                ([{"role": "system", "content": "s"}, {"role": "user", "content": "a"},
                  {"role": "user", "content": "b"}], 2)]:
            err = assert_error(raw_post(s, "/v1/chat/completions",
                                        json.dumps({"messages": msgs}).encode()), 400, "messages")
            assert err["type"] == "invalid_request_error"
            assert "alternate" in err["message"] and f"message {turn} is" in err["message"], err
        r = s.client().chat.completions.create(
            model="m", messages=[{"role": "system", "content": "Be brief."},
                                 {"role": "user", "content": "Say hi."}],
            max_tokens=4, temperature=0)
        assert r.choices[0].finish_reason in ("stop", "length") and r.usage.completion_tokens >= 1
    finally:
        assert s.stop() == 0, s.stderr
