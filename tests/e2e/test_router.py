"""`pasada serve` behind routers: the worker metadata SGLang's model gateway
reads (/server_info, /model_info), readiness apart from liveness (/ready:
503 on a full queue and at once on SIGTERM, while the replica still serves
during --drain-delay), the Gateway API Inference Extension's metric names
and types, the KV events a precise prefix-cache router consumes (a pyzmq +
msgpack subscriber rebuilds the replica's block set and finds it equal to
the prefix cache's own list after a mixed workload with evictions; one that
comes late replays the kept batches from sequence 0 and gets the same set),
SGLang's /get_load, and replicas behind the real sglang-router answering
chat (cache_aware, and power_of_two, which polls /get_load)."""
import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import requests

from test_server import Server, chat_msgs, stream_text

# The model-server protocol of the Gateway API Inference Extension
# (docs/proposals/003-model-server-protocol): vLLM's names, which its
# endpoint picker scrapes, with their types; the prefix-cache counters are
# vLLM's (prometheus_client exposes a counter with _total).
PROTOCOL = {
    "vllm:num_requests_waiting": "gauge",
    "vllm:num_requests_running": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
    "vllm:gpu_cache_usage_perc": "gauge",
    "vllm:cache_config_info": "gauge",
    "vllm:prefix_cache_queries_total": "counter",
    "vllm:prefix_cache_hits_total": "counter",
    "sglang:num_queue_reqs": "gauge",
    "sglang:num_running_reqs": "gauge",
    "sglang:token_usage": "gauge",
}
COUNTING = "1, 2, 3, 4, 5, 6,"  # SmolLM2 keeps counting: long, predictable streams


def types_of(text):
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


def samples(text):
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def get_metrics(s):
    r = requests.get(s.url + "/metrics", timeout=10)
    assert r.status_code == 200
    return types_of(r.text), samples(r.text)


def wait_for(pred, timeout=30, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v is not None and v is not False:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_worker_metadata_and_protocol_metrics(pasada_bin, smollm2):
    s = Server(pasada_bin, smollm2, "--threads", 1, "--parallel", 1, "--max-queue", 1,
               "--ctx", 512, "--kv-blocks", 48, "--alias", "smol")
    try:
        info = requests.get(s.url + "/server_info", timeout=10).json()
        # what sglang-router's worker discovery reads
        assert info["served_model_name"] == "smol" and info["model_path"] == str(smollm2)
        assert info["tp_size"] == 1 and info["dp_size"] == 1
        assert info["disaggregation_mode"] == "null" and info["kv_events"] is None
        assert info["max_running_requests"] == 1 and info["page_size"] == 16
        assert info["max_total_tokens"] == 48 * 16
        assert requests.get(s.url + "/get_server_info", timeout=10).json() == info
        model = requests.get(s.url + "/model_info", timeout=10).json()
        assert model["is_generation"] is True and model["model_type"] == "llama"
        assert model["model_path"] == str(smollm2) and model["tokenizer_path"] is None

        r = requests.get(s.url + "/ready", timeout=10)
        assert r.status_code == 200 and r.json()["status"] == "ok"
        types, m = get_metrics(s)
        for name, kind in PROTOCOL.items():
            assert types.get(name) == kind, f"{name}: {types.get(name)} (want {kind})"
        assert m['vllm:cache_config_info{block_size="16",num_gpu_blocks="48"}'] == 1
        assert m["vllm:num_requests_waiting"] == m["vllm:num_requests_running"] == 0
        assert m["vllm:kv_cache_usage_perc"] == 0

        # One stream runs, one waits: the queue (max 1) is full, so /ready is
        # 503 while /health stays 200; the gauges say the same under every name.
        client = s.client()
        streams = [client.completions.create(model="m", prompt=f"{i}, " + COUNTING, max_tokens=48,
                                             temperature=0, stream=True) for i in range(2)]
        first = [next(iter(streams[0]))]

        def loaded():
            _, m = get_metrics(s)
            return m if m["vllm:num_requests_waiting"] == 1 else None
        m = wait_for(loaded, what="a waiting request")
        assert m["vllm:num_requests_running"] == 1 == m["pasada_running_sequences"]
        assert m["sglang:num_queue_reqs"] == 1 == m["pasada_queue_depth"]
        used = m["pasada_kv_blocks_used"]
        assert 0 < m["vllm:kv_cache_usage_perc"] == pytest.approx(used / 48)
        assert m["vllm:gpu_cache_usage_perc"] == m["sglang:token_usage"] == m["vllm:kv_cache_usage_perc"]
        r = requests.get(s.url + "/ready", timeout=10)
        assert r.status_code == 503 and r.json()["status"] == "queue_full", r.text
        assert requests.get(s.url + "/health", timeout=10).status_code == 200
        for st in streams:
            list(st)
        assert first
        s.wait_idle()
        assert wait_for(lambda: requests.get(s.url + "/ready", timeout=10).status_code == 200)

        # the prefix-cache counters count tokens as vLLM's do
        before = s.wait_idle()
        msgs = chat_msgs("Describe a lighthouse on a rocky island at night in three sentences.")
        a = client.chat.completions.create(model="m", messages=msgs, max_tokens=4, temperature=0)
        b = client.chat.completions.create(model="m", messages=msgs, max_tokens=4, temperature=0)
        hits = b.usage.prompt_tokens_details.cached_tokens
        assert hits > 0
        queried = a.usage.prompt_tokens + b.usage.prompt_tokens

        def counted():  # a job is counted once its sequence is freed, just after its response
            _, m = get_metrics(s)
            q = m["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"]
            return m if q >= queried else None
        after = wait_for(counted, timeout=10, what="the requests counted")
        assert after["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"] \
            == queried
        assert after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"] \
            == a.usage.prompt_tokens_details.cached_tokens + hits
    finally:
        assert s.stop() == 0, s.stderr


def test_ready_flips_at_once_on_sigterm(pasada_bin, smollm2):
    s = Server(pasada_bin, smollm2, "--threads", 1, "--ctx", 256, "--parallel", 2,
               "--drain-delay", 3)
    try:
        client = s.client()
        assert requests.get(s.url + "/ready", timeout=10).status_code == 200
        t0 = time.time()
        s.proc.send_signal(signal.SIGTERM)
        while True:  # the signal is handled within a few ms
            r = requests.get(s.url + "/ready", timeout=10)
            if r.status_code == 503 or time.time() - t0 > 0.5:
                break
        flipped = time.time() - t0
        assert r.json()["status"] == "draining" and flipped < 0.5, (r.text, flipped)
        # liveness stays up, and work a router still sends meanwhile is served
        assert requests.get(s.url + "/health", timeout=10).status_code == 200
        out = client.completions.create(model="m", prompt="The capital of France is",
                                        max_tokens=2, temperature=0)
        assert out.choices[0].text.strip().startswith("Paris")
        assert s.proc.wait(30) == 0, s.stderr
        assert time.time() - t0 >= 2.5, "the socket closed before the drain delay"
        assert "draining for 3 s" in s.stderr
    finally:
        s.kill()


def test_ready_says_loading_before_the_model(pasada_bin, smollm2):
    """/ready answers 503 "loading" from the moment the socket listens until
    the model and its KV pool are there (a large pool takes a while to commit)."""
    p = subprocess.Popen([str(pasada_bin), "serve", "-m", str(smollm2), "--port", "0", "--threads",
                          "1", "--kv-memory", "512"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        m = re.search(r"listening on (http://\S+)", line)
        assert m, line
        seen = []
        deadline = time.time() + 60
        while time.time() < deadline:
            r = requests.get(m.group(1) + "/ready", timeout=10)
            seen.append((r.status_code, r.json()["status"]))
            if r.status_code == 200:
                break
            time.sleep(0.01)
        assert seen[0] == (503, "loading") and seen[-1] == (200, "ok"), seen
        assert {st for _, st in seen} <= {"loading", "ok"}, seen
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 0


def test_kv_events_bad_endpoint_is_a_clear_error(pasada_bin, smollm2):
    res = subprocess.run([str(pasada_bin), "serve", "-m", str(smollm2), "--port", "0",
                          "--kv-events", "bogus"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "--kv-events: cannot connect to bogus" in res.stderr, res.stderr
    res = subprocess.run([str(pasada_bin), "serve", "-m", str(smollm2), "--kv-events-topic", "t"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "--kv-events-topic needs --kv-events" in res.stderr, res.stderr
    res = subprocess.run([str(pasada_bin), "serve", "-m", str(smollm2), "--kv-events-replay",
                          "tcp://127.0.0.1:1"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "--kv-events-replay needs --kv-events" in res.stderr, res.stderr
    with socket.socket() as taken:  # a replay endpoint in use: the bind's error, named
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = f"tcp://127.0.0.1:{taken.getsockname()[1]}"
        res = subprocess.run([str(pasada_bin), "serve", "-m", str(smollm2), "--port", "0",
                              "--kv-events", f"tcp://127.0.0.1:{_free_port()}",
                              "--kv-events-replay", busy],
                             capture_output=True, text=True, timeout=60)
    assert res.returncode == 1, res.stderr
    assert f"--kv-events: cannot bind the replay endpoint {busy}: Address already in use" \
        in res.stderr, res.stderr


def test_get_load_in_sglang_shape(pasada_bin, smollm2):
    """GET /get_load as sglang-router's load monitor reads it: a list of one
    object per data-parallel rank, whose num_tokens the router sums; here the
    KV positions running sequences hold (cached blocks no one uses are free
    to evict and not counted)."""
    s = Server(pasada_bin, smollm2, "--threads", 1, "--parallel", 1, "--max-queue", 2,
               "--ctx", 512, "--kv-blocks", 48)
    try:
        idle = requests.get(s.url + "/get_load", timeout=10)
        assert idle.status_code == 200 and idle.headers["content-type"] == "application/json"
        assert idle.json() == [{"dp_rank": 0, "num_reqs": 0, "num_waiting_reqs": 0,
                                "num_tokens": 0}]
        client = s.client()
        streams = [client.completions.create(model="m", prompt=f"{i}, " + COUNTING, max_tokens=48,
                                             temperature=0, stream=True) for i in range(2)]
        first = next(iter(streams[0]))

        def busy():
            load = requests.get(s.url + "/get_load", timeout=10).json()
            return load if load[0]["num_waiting_reqs"] == 1 else None
        load = wait_for(busy, what="a waiting request in /get_load")
        assert len(load) == 1 and load[0]["dp_rank"] == 0 and load[0]["num_reqs"] == 2
        # one running sequence: its prompt and output so far, in whole blocks
        assert 16 <= load[0]["num_tokens"] <= 48 * 16 and load[0]["num_tokens"] % 16 == 0
        for st in streams:
            list(st)
        assert first
        s.wait_idle()

        def drained():
            load = requests.get(s.url + "/get_load", timeout=10).json()
            return load if load[0]["num_reqs"] == 0 else None
        load = wait_for(drained, what="an idle /get_load")
        assert load[0]["num_tokens"] == 0 and load[0]["num_waiting_reqs"] == 0
        cached = requests.get(s.url + "/kv_cache/blocks", timeout=10).json()
        assert cached["n_blocks"] > 0  # held by the prefix cache, yet no load
    finally:
        assert s.stop() == 0, s.stderr


# ---- KV events ----

class Subscriber(threading.Thread):
    """A SUB socket bound on a free loopback port, read by this thread for
    its whole life (ZeroMQ passes a subscription on to a publisher that
    connects only while the owning thread calls into the socket)."""

    def __init__(self, on_frames):
        super().__init__(daemon=True)
        self.zmq = pytest.importorskip("zmq")
        pytest.importorskip("msgpack")
        self.on_frames = on_frames
        self.ctx = self.zmq.Context()
        self.sock = self.ctx.socket(self.zmq.SUB)
        self.port = self.sock.bind_to_random_port("tcp://127.0.0.1")
        self.sock.setsockopt(self.zmq.SUBSCRIBE, b"")
        self.stopping = threading.Event()
        self.last = time.time()
        self.error = None

    def run(self):
        try:
            while not self.stopping.is_set():
                if self.sock.poll(50):
                    self.on_frames(self.sock.recv_multipart())
                    self.last = time.time()
        except Exception as e:  # noqa: BLE001 - the test reports it
            self.error = e
        finally:
            self.sock.close(0)
            self.ctx.term()

    def settle(self, quiet=0.5, timeout=30):
        """Waits until nothing has come for `quiet` seconds."""
        deadline = time.time() + timeout
        while time.time() - self.last < quiet and time.time() < deadline:
            time.sleep(0.05)

    def stop(self):
        self.stopping.set()
        self.join(10)


class BlockSet:
    """A replica's full blocks as its KV events describe them (what a KV
    indexer keeps): vLLM's array-encoded batches, applied in order."""

    def __init__(self):
        self.blocks = {}  # hash -> parent (None for a first block)
        self.seqs = []
        self.stored = self.removed = self.cleared = 0
        self.topics = set()

    def apply(self, frames):
        import msgpack
        topic, seq, payload = frames
        self.topics.add(topic.decode())
        assert len(seq) == 8
        self.seqs.append(int.from_bytes(seq, "big"))
        ts, events = msgpack.unpackb(payload)[:2]
        assert abs(ts - time.time()) < 60
        for ev in events:
            tag = ev[0]
            if tag == "BlockStored":
                _, hashes, parent, tokens, block_size, lora_id, medium = ev
                assert block_size == 16 and len(tokens) == 16 * len(hashes)
                assert lora_id is None and medium == "CPU"
                assert all(isinstance(t, int) and t >= 0 for t in tokens)
                # a block enters after its parent (the chain it extends is cached)
                assert parent is None or parent in self.blocks, "parent unknown"
                for h in hashes:
                    assert h not in self.blocks, "stored twice"
                    self.blocks[h] = parent
                    parent = h
                self.stored += len(hashes)
            elif tag == "BlockRemoved":
                _, hashes, medium = ev
                assert medium == "CPU"
                for h in hashes:
                    assert h in self.blocks, "removed a block never stored"
                    del self.blocks[h]
                self.removed += len(hashes)
            elif tag == "AllBlocksCleared":
                self.blocks.clear()
                self.cleared += 1
            else:
                raise AssertionError(f"unknown event {tag}")


def mixed_workload(s):
    """Eight concurrent conversations of two chat turns with a shared system
    prompt, then a long completion each: reuse, growth and, in a small pool,
    evictions."""
    client = s.client()
    system = "You are a patient tutor who explains things with small concrete examples."
    topics = ["fractions", "photosynthesis", "binary numbers", "the water cycle",
              "gravity", "prime numbers", "volcanoes", "tides"]
    errors = []

    def conversation(topic):
        try:
            msgs = chat_msgs(f"Explain {topic} to a ten year old.", system=system)
            for turn in range(2):
                out = client.chat.completions.create(model="m", messages=msgs, max_tokens=24,
                                                     temperature=0)
                msgs += [{"role": "assistant", "content": out.choices[0].message.content},
                         {"role": "user", "content": "Say more, with an example."}]
            client.completions.create(model="m", prompt=f"{topic}: " + COUNTING * 4,
                                      max_tokens=8, temperature=0)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=conversation, args=(t,)) for t in topics]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors, errors
    s.wait_idle()


def test_kv_events_rebuild_the_block_set(pasada_bin, smollm2):
    bs = BlockSet()
    sub = Subscriber(bs.apply)
    sub.start()
    port = sub.port
    # a small pool, so the workload evicts: BlockRemoved as well as BlockStored
    s = Server(pasada_bin, smollm2, "--threads", 1, "--ctx", 512, "--parallel", 2,
               "--kv-blocks", 40, "--kv-events", f"tcp://127.0.0.1:{port}",
               "--kv-events-topic", "kv@replica-0@smol")
    try:
        info = requests.get(s.url + "/server_info", timeout=10).json()
        assert info["kv_events"]["endpoint"] == f"tcp://127.0.0.1:{port}"
        assert info["kv_events"]["topic"] == "kv@replica-0@smol"
        assert info["kv_events"]["replay_endpoint"] is None
        time.sleep(0.5)  # the PUB socket connects and learns the subscription
        mixed_workload(s)
        sub.settle()
        assert sub.error is None, sub.error
        own = requests.get(s.url + "/kv_cache/blocks", timeout=10).json()
        assert own["block_size"] == 16 and own["n_blocks"] == len(own["blocks"])
        cache = {b["hash"]: b["parent"] for b in own["blocks"]}
        assert bs.stored > 0 and bs.removed > 0, (bs.stored, bs.removed, len(cache), s.stderr)
        assert bs.topics == {"kv@replica-0@smol"}
        # no batch lost: sequence numbers follow each other (the first, the
        # start-up AllBlocksCleared, may go before the connection is made)
        assert bs.seqs == list(range(bs.seqs[0], bs.seqs[0] + len(bs.seqs))) and bs.seqs[0] <= 1
        assert bs.blocks == cache, (len(bs.blocks), len(cache))
        assert 0 < len(cache) <= 40
    finally:
        assert s.stop() == 0, s.stderr
        sub.stop()


END_SEQ = b"\xff" * 8


def replay(endpoint, start, delimiter=True, timeout=20):
    """vLLM's replay request from a DEALER: [b"", start] (or [start] alone);
    returns the replies' frames after the empty one, up to the end marker."""
    zmq = pytest.importorskip("zmq")
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    try:
        sock.connect(endpoint)
        sock.send_multipart(([b""] if delimiter else []) + [start.to_bytes(8, "big")])
        out = []
        deadline = time.time() + timeout
        while time.time() < deadline:
            if not sock.poll(int(1000 * (deadline - time.time())) + 1):
                break
            frames = sock.recv_multipart()
            if delimiter:
                assert frames[0] == b"", frames[:1]
                frames = frames[1:]
            assert len(frames) == 2, len(frames)
            if frames[0] == END_SEQ:
                assert frames[1] == b""
                return out
            out.append(frames)
        raise AssertionError("no end marker")
    finally:
        sock.close(0)
        ctx.term()


def test_kv_events_replay_rebuilds_the_block_set(pasada_bin, smollm2):
    """No subscriber while the replica works; one that comes afterwards asks
    the replay endpoint for everything from sequence 0 (vLLM's protocol) and
    rebuilds the same block set as the cache's own list, start-up
    AllBlocksCleared included."""
    pytest.importorskip("msgpack")
    rep_ep = f"tcp://127.0.0.1:{_free_port()}"
    s = Server(pasada_bin, smollm2, "--threads", 1, "--ctx", 512, "--parallel", 2,
               "--kv-blocks", 40, "--kv-events", f"tcp://127.0.0.1:{_free_port()}",
               "--kv-events-topic", "kv@late", "--kv-events-replay", rep_ep)
    try:
        info = requests.get(s.url + "/server_info", timeout=10).json()
        assert info["kv_events"]["replay_endpoint"] == rep_ep
        mixed_workload(s)
        own = requests.get(s.url + "/kv_cache/blocks", timeout=10).json()
        cache = {b["hash"]: b["parent"] for b in own["blocks"]}
        assert 0 < len(cache) <= 40
        # the publisher's thread may still be sending the last step's batch
        for _ in range(50):
            bs = BlockSet()
            batches = replay(rep_ep, 0)
            for seq, payload in batches:
                bs.apply([b"kv@late", seq, payload])
            if bs.blocks == cache:
                break
            time.sleep(0.1)
        assert bs.seqs == list(range(len(batches))), bs.seqs[:5]
        assert bs.cleared == 1 and bs.stored > 0 and bs.removed > 0, (bs.stored, bs.removed)
        assert bs.blocks == cache, (len(bs.blocks), len(cache))

        # from the middle: the batches from there on, the same bytes
        mid = len(batches) // 2
        tail = replay(rep_ep, mid)
        assert tail == batches[mid:]
        # a DEALER that sends the start alone gets the replies without the empty frame
        assert replay(rep_ep, mid, delimiter=False) == tail
        # past the newest: only the end marker
        assert replay(rep_ep, len(batches) + 1000) == []
        # a malformed request is ignored, and the endpoint still answers
        zmq = pytest.importorskip("zmq")
        ctx = zmq.Context()
        bad = ctx.socket(zmq.DEALER)
        bad.connect(rep_ep)
        bad.send_multipart([b"", b"abc"])
        bad.send_multipart([b"x", b"", b"\0" * 8, b"more"])
        assert not bad.poll(300)
        bad.close(0)
        ctx.term()
        assert replay(rep_ep, mid) == tail
    finally:
        assert s.stop() == 0, s.stderr


# ---- replicas behind sglang-router ----

def _free_port():
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


@contextlib.contextmanager
def sglang_router(pasada_bin, model, policy, ctx):
    """Two replicas (1 thread, 2 sequences each) behind a real sglang-router
    with `policy`; yields (router url, replicas) once the router has
    registered both, and stops everything after (each replica must exit 0)."""
    pytest.importorskip("sglang_router")
    replicas = [Server(pasada_bin, model, "--threads", 1, "--ctx", ctx, "--parallel", 2,
                       "--alias", "smol") for _ in range(2)]
    port = _free_port()
    router = subprocess.Popen(
        [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port",
         str(port), "--policy", policy, "--health-check-endpoint", "/ready",
         # the router polls each worker's /get_load at this interval too
         # (30 s by default)
         "--worker-startup-check-interval", "2", "--worker-urls", *[r.url for r in replicas]],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace",
        env=dict(os.environ, NO_COLOR="1"))
    url = f"http://127.0.0.1:{port}"
    try:
        def both_registered():
            try:
                r = requests.get(url + "/workers", timeout=2)
            except requests.RequestException:
                return False
            return r.status_code == 200 and r.text.count("http://127.0.0.1") >= 2
        wait_for(both_registered, timeout=60, what="the router to register both replicas")
        yield url, replicas
    finally:
        router.send_signal(signal.SIGTERM)
        try:
            router.wait(10)
        except subprocess.TimeoutExpired:
            router.kill()
            router.wait()
        for r in replicas:
            assert r.stop() == 0, r.stderr


def test_two_replicas_behind_sglang_router(pasada_bin, smollm2):
    with sglang_router(pasada_bin, smollm2, "cache_aware", 512) as (url, replicas):
        import openai
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
        # each conversation twice: cache-aware routing sends the repeat where
        # its prefix is cached, so the replica reports the reuse in usage
        for i, topic in enumerate(["a red kite", "a lost key", "a quiet harbour"]):
            msgs = chat_msgs(f"Write one sentence about {topic}, please, story {i}.")
            first = client.chat.completions.create(model="smol", messages=msgs, max_tokens=8,
                                                   temperature=0)
            again = client.chat.completions.create(model="smol", messages=msgs, max_tokens=8,
                                                   temperature=0)
            assert first.choices[0].message.content == again.choices[0].message.content
            assert again.usage.prompt_tokens_details.cached_tokens > 0
        text, finish, _ = stream_text(client.chat.completions.create(
            model="smol", messages=chat_msgs("Count: " + COUNTING), max_tokens=6, temperature=0,
            stream=True, stream_options={"include_usage": True}))
        assert text and finish == "length"
        served = [requests.get(r.url + "/metrics", timeout=10).text for r in replicas]
        n = [sum(float(v) for v in re.findall(
            r'^pasada_requests_total\{endpoint="/v1/chat/completions",status="200"\} (\S+)$', t, re.M))
             for t in served]
        assert sum(n) == 7, n
        # the router read the metadata (no warning about missing endpoints)
        infos = sum(len(re.findall(r'endpoint="/server_info",status="200"', t)) for t in served)
        assert infos == 2


def test_power_of_two_behind_sglang_router(pasada_bin, smollm2):
    """sglang-router's power_of_two policy polls each worker's /get_load and
    sends a request to the less loaded of two: chat through it works, both
    replicas are polled, and while one replica runs long completions the
    router never saw (sent to it directly), its /get_load is what steers the
    router's requests to the other."""
    def polled(r):
        text = requests.get(r.url + "/metrics", timeout=10).text
        return sum(float(v) for v in re.findall(
            r'^pasada_requests_total\{endpoint="/get_load",status="200"\} (\S+)$', text, re.M))
    with sglang_router(pasada_bin, smollm2, "power_of_two", 2048) as (url, replicas):
        import openai
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
        for i in range(4):
            out = client.chat.completions.create(
                model="smol", messages=chat_msgs(f"Name a colour, please ({i})."), max_tokens=4,
                temperature=0)
            assert out.choices[0].message.content
        wait_for(lambda: all(polled(r) > 0 for r in replicas), timeout=60,
                 what="the router to poll /get_load on both replicas")

        def chats(r):
            text = requests.get(r.url + "/metrics", timeout=10).text
            return sum(float(v) for v in re.findall(
                r'^pasada_requests_total\{endpoint="/v1/chat/completions",status="200"\} (\S+)$',
                text, re.M))
        busy, idle = replicas
        # two staggered loops of long completions sent to one replica
        # directly (the router never sees them): it is loaded whenever the
        # router polls
        stop = threading.Event()

        def keep_busy(delay):
            time.sleep(delay)
            while not stop.is_set():
                busy.client().completions.create(model="smol", prompt=COUNTING, max_tokens=1200,
                                                 temperature=0)
        loaders = [threading.Thread(target=keep_busy, args=(d,), daemon=True) for d in (0, 2)]
        for t in loaders:
            t.start()
        wait_for(lambda: requests.get(busy.url + "/get_load", timeout=10).json()[0]["num_reqs"]
                 == 2, what="the busy replica's load")
        seen = polled(busy)
        wait_for(lambda: polled(busy) > seen, timeout=150,
                 what="the router to poll the busy replica's load")
        before = [chats(busy), chats(idle)]
        for i in range(3):
            client.chat.completions.create(model="smol", messages=chat_msgs(f"Hi ({i})."),
                                           max_tokens=2, temperature=0)
        assert [chats(busy) - before[0], chats(idle) - before[1]] == [0, 3]
        stop.set()
        for t in loaders:
            t.join(120)
