"""`pasada serve` for browsers and networks: CORS (--cors-origin: the
allowed origins get Access-Control-Allow-Origin, preflights are answered
without a key, other origins and servers without the option get no CORS
headers), the Allow header of a 405, IPv6 with IPv4 on the same port
(--host ::), GET /v1/models/{id}, and the API key as x-api-key as well as
a Bearer token."""
import re
import socket

import anthropic
import openai
import pytest
import requests

from test_server import Server, assert_error

ORIGIN_A, ORIGIN_B = "http://app.example", "https://tool.example:8443"


@pytest.fixture(scope="module")
def cors(pasada_bin, smollm2):
    s = Server(pasada_bin, smollm2, "--parallel", 2, "--ctx", 256, "--api-key", "k1",
               "--cors-origin", f"{ORIGIN_A}, {ORIGIN_B}", "--cors-origin", "http://third.example")
    yield s
    assert s.stop() == 0, s.stderr


def test_cors_preflight(cors):
    for path, method in (("/v1/chat/completions", "POST"), ("/v1/messages", "POST"),
                         ("/v1/responses/resp_1", "DELETE")):
        r = requests.options(cors.url + path, timeout=10, headers={
            "Origin": ORIGIN_B, "Access-Control-Request-Method": method,
            "Access-Control-Request-Headers": "x-stainless-os, content-type"})
        assert r.status_code == 204, r.text  # no key needed for a preflight
        h = r.headers
        assert h["Access-Control-Allow-Origin"] == ORIGIN_B and "Origin" in h["Vary"]
        assert method in h["Access-Control-Allow-Methods"].split(", ")
        allowed = {x.strip() for x in h["Access-Control-Allow-Headers"].split(",")}
        assert {"authorization", "content-type", "x-api-key", "anthropic-version",
                "x-stainless-os"} <= allowed
        assert int(h["Access-Control-Max-Age"]) > 0
        assert method in h["Allow"]
    r = requests.options(cors.url + "/v1/chat/completions", timeout=10,
                         headers={"Origin": "http://evil.example",
                                  "Access-Control-Request-Method": "POST"})
    assert r.status_code == 204 and "Access-Control-Allow-Origin" not in r.headers
    assert requests.options(cors.url + "/nowhere", timeout=10).status_code == 404


def test_cors_on_responses(cors):
    auth = {"Authorization": "Bearer k1"}
    for origin in (ORIGIN_A, "http://third.example"):
        r = requests.get(cors.url + "/v1/models", headers={**auth, "Origin": origin}, timeout=10)
        assert r.status_code == 200 and r.headers["Access-Control-Allow-Origin"] == origin
    # errors carry it too (the page must be able to read them), and streams
    r = requests.get(cors.url + "/v1/models", headers={"Origin": ORIGIN_A}, timeout=10)
    assert r.status_code == 401 and r.headers["Access-Control-Allow-Origin"] == ORIGIN_A
    r = requests.post(cors.url + "/v1/completions", headers={**auth, "Origin": ORIGIN_A},
                      json={"prompt": "Hi", "max_tokens": 2, "stream": True}, stream=True, timeout=30)
    assert r.status_code == 200 and r.headers["Access-Control-Allow-Origin"] == ORIGIN_A
    r.close()
    r = requests.get(cors.url + "/v1/models", headers={**auth, "Origin": "http://evil.example"},
                     timeout=10)
    assert r.status_code == 200 and "Access-Control-Allow-Origin" not in r.headers


def test_cors_any_origin(pasada_bin, smollm2):
    s = Server(pasada_bin, smollm2, "--parallel", 1, "--ctx", 256, "--cors-origin", "*")
    try:
        r = requests.get(s.url + "/v1/models", headers={"Origin": "http://any.example"}, timeout=10)
        assert r.headers["Access-Control-Allow-Origin"] == "*" and "Vary" not in r.headers
    finally:
        assert s.stop() == 0, s.stderr


def test_plain_server(pasada_bin, smollm2):
    """Without --cors-origin: no CORS headers at all; the 405's Allow header;
    GET /v1/models/{id}."""
    s = Server(pasada_bin, smollm2, "--parallel", 1, "--ctx", 256)
    try:
        r = requests.get(s.url + "/v1/models", headers={"Origin": ORIGIN_A}, timeout=10)
        assert r.status_code == 200 and not any(k.lower().startswith("access-control")
                                                for k in r.headers)
        r = requests.options(s.url + "/v1/models", headers={
            "Origin": ORIGIN_A, "Access-Control-Request-Method": "GET"}, timeout=10)
        assert r.status_code == 204 and r.headers["Allow"] == "GET, OPTIONS"
        assert not any(k.lower().startswith("access-control") for k in r.headers)
        # 405 names what is allowed
        r = requests.get(s.url + "/v1/chat/completions", timeout=10)
        assert_error(r, 405)
        assert r.headers["Allow"] == "POST"
        # /v1/models/{id}
        c = s.client()
        name = c.models.list().data[0].id
        m = c.models.retrieve(name)
        assert m.id == name and m.object == "model"
        assert requests.get(s.url + "/v1/models/" + name).json() == \
            requests.get(s.url + "/v1/models").json()["data"][0]
        with pytest.raises(openai.NotFoundError) as e:
            c.models.retrieve("gpt-4o")
        assert e.value.body["code"] == "model_not_found"
    finally:
        assert s.stop() == 0, s.stderr


def test_api_key_headers(cors):
    ok = anthropic.Anthropic(base_url=cors.url, api_key="k1", max_retries=0)  # sends x-api-key
    m = ok.messages.create(model="m", max_tokens=2, messages=[{"role": "user", "content": "Hi"}])
    assert m.content
    bad = anthropic.Anthropic(base_url=cors.url, api_key="k2", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as e:
        bad.messages.create(model="m", max_tokens=2, messages=[{"role": "user", "content": "Hi"}])
    assert e.value.body["error"]["type"] == "authentication_error"
    assert requests.get(cors.url + "/v1/models", headers={"x-api-key": "k1"}).status_code == 200
    assert cors.client(api_key="k1").models.list().data
    with pytest.raises(openai.AuthenticationError):
        cors.client(api_key="k2").models.list()


class Server6(Server):
    """A server on --host ::, whose listening line brackets the address."""

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line)
            m = re.search(r"listening on (http://\[::\]:(\d+))", line)
            if m and not self.url:
                self.listen_url = m.group(1)
                self.port = int(m.group(2))
                self.url = f"http://127.0.0.1:{self.port}"
                self._port.set()


def have_ipv6():
    try:
        with socket.socket(socket.AF_INET6) as sk:
            sk.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not have_ipv6(), reason="no IPv6 loopback here")
def test_ipv6_dual_stack(pasada_bin, smollm2):
    s = Server6(pasada_bin, smollm2, "--parallel", 1, "--ctx", 256, "--host", "::")
    try:
        assert s.listen_url == f"http://[::]:{s.port}"
        for url in (f"http://127.0.0.1:{s.port}", f"http://[::1]:{s.port}"):
            assert requests.get(url + "/health", timeout=10).json() == {"status": "ok"}
        r = requests.post(f"http://[::1]:{s.port}/v1/completions", timeout=30,
                          json={"prompt": "The capital of France is", "max_tokens": 2,
                                "temperature": 0})
        assert "Paris" in r.json()["choices"][0]["text"]
    finally:
        assert s.stop() == 0, s.stderr
