"""The OpenAI Responses API of `pasada serve` (/v1/responses) with the
official `openai` client unmodified: plain and streamed responses (equal to
each other and to the chat API's answer), instructions, previous_response_id
(the second turn's prompt holds the first turn, read back from the prefix
cache), the response store (retrieve, delete, store: false, LRU eviction),
function tools (forced calls, grammar-constrained: SmolLM2 is too small to
choose tools itself) and their outputs sent back, text.format json_schema,
max_output_tokens, and errors in OpenAI's shape."""
import json
import pathlib
import signal

import jsonschema
import openai
import pytest
from conftest import CHAT_TEMPLATES
import requests

from test_server import Server, assert_error, raw_post

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = CHAT_TEMPLATES
QWEN25 = CORPUS / "Qwen-Qwen2.5-7B-Instruct.jinja"
R1 = CORPUS / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"  # opens <think> itself

Q = "What is the capital city of France? Answer in one word."
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 24},
                       "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
}


def need(path):
    if not path.exists():
        pytest.skip(f"{path} is missing (the shared chat-template corpus)")
    return path


@pytest.fixture(scope="module")
def server(pasada_bin, smollm2):
    s = Server(pasada_bin, smollm2, "--parallel", 4, "--ctx", 1024, "--responses-store", 8)
    yield s
    assert s.stop() == 0, s.stderr


@pytest.fixture(scope="module")
def client(server):
    return server.client()


def chat(client, messages, n):
    return client.chat.completions.create(model="m", messages=messages, max_tokens=n, temperature=0)


def test_create_matches_chat(client):
    r = client.responses.create(model="gpt-any", input=Q, max_output_tokens=12, temperature=0)
    assert r.object == "response" and r.id.startswith("resp_") and r.model == "gpt-any"
    assert r.status in ("completed", "incomplete")
    assert [o.type for o in r.output] == ["message"]
    msg = r.output[0]
    assert msg.role == "assistant" and msg.content[0].type == "output_text"
    assert r.output_text == msg.content[0].text and "Paris" in r.output_text
    c = chat(client, [{"role": "user", "content": Q}], 12)
    assert r.output_text == c.choices[0].message.content
    u = r.usage
    assert u.input_tokens == c.usage.prompt_tokens and u.output_tokens == c.usage.completion_tokens
    assert u.total_tokens == u.input_tokens + u.output_tokens
    assert u.output_tokens_details.reasoning_tokens == 0
    # the same conversation as input items
    r2 = client.responses.create(model="m", max_output_tokens=12, temperature=0, input=[
        {"role": "user", "content": [{"type": "input_text", "text": Q}]}])
    assert r2.output_text == r.output_text
    assert r2.usage.input_tokens_details.cached_tokens > 0


def test_instructions(client):
    sys = "You are a geography teacher."
    r = client.responses.create(model="m", input=Q, instructions=sys, max_output_tokens=8,
                                temperature=0)
    c = chat(client, [{"role": "system", "content": sys}, {"role": "user", "content": Q}], 8)
    assert r.output_text == c.choices[0].message.content
    assert r.usage.input_tokens == c.usage.prompt_tokens
    assert r.instructions == sys


def test_stream_equals_create(client):
    kw = dict(model="m", input="Name three colors.", max_output_tokens=16, temperature=0)
    whole = client.responses.create(**kw)
    events = list(client.responses.create(**kw, stream=True))
    types = [e.type for e in events]
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert types[-4:] == ["response.output_text.done", "response.content_part.done",
                          "response.output_item.done",
                          "response.completed" if whole.status == "completed" else "response.incomplete"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    text = "".join(d.delta for d in deltas)
    assert text == whole.output_text
    item = events[2].item.id
    assert all(d.item_id == item and d.output_index == 0 for d in deltas)
    final = events[-1].response
    assert final.output_text == text and final.output[0].id == item
    assert final.usage.output_tokens == whole.usage.output_tokens
    # the SDK's stream helper accumulates the same (it needs a completed response)
    kw = dict(model="m", input=Q, max_output_tokens=64, temperature=0)
    whole = client.responses.create(**kw)
    assert whole.status == "completed"
    with client.responses.stream(**kw) as s:
        final = s.get_final_response()
    assert final.output_text == whole.output_text and final.status == "completed"


def test_previous_response_id(client):
    r1 = client.responses.create(model="m", input="My name is Ada. Say hello to me.",
                                 max_output_tokens=10, temperature=0)
    r2 = client.responses.create(model="m", previous_response_id=r1.id,
                                 input="What is my name?", max_output_tokens=10, temperature=0)
    assert r2.previous_response_id == r1.id
    # the second prompt holds the first turn: its prompt and its answer
    assert r2.usage.input_tokens > r1.usage.input_tokens + r1.usage.output_tokens - 2
    assert r2.usage.input_tokens_details.cached_tokens >= r1.usage.input_tokens - 16
    conv = [{"role": "user", "content": "My name is Ada. Say hello to me."},
            {"role": "assistant", "content": r1.output_text},
            {"role": "user", "content": "What is my name?"}]
    c = chat(client, conv, 10)
    assert r2.usage.input_tokens == c.usage.prompt_tokens
    assert r2.output_text == c.choices[0].message.content
    # a chain of three
    r3 = client.responses.create(model="m", previous_response_id=r2.id, input="Thanks.",
                                 max_output_tokens=4, temperature=0)
    assert r3.usage.input_tokens > r2.usage.input_tokens + r2.usage.output_tokens - 2


def test_store_retrieve_delete(client):
    r = client.responses.create(model="m", input="Hi", max_output_tokens=4, temperature=0)
    got = client.responses.retrieve(r.id)
    assert got.id == r.id and got.output_text == r.output_text and got.usage == r.usage
    client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.create(model="m", previous_response_id=r.id, input="x", max_output_tokens=2)
    assert e.value.body["code"] == "previous_response_not_found"
    assert e.value.body["param"] == "previous_response_id"
    unstored = client.responses.create(model="m", input="Hi", max_output_tokens=2, store=False)
    assert unstored.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)
    # a streamed response is stored too
    events = list(client.responses.create(model="m", input="Hi", max_output_tokens=3, stream=True))
    rid = events[-1].response.id
    assert client.responses.retrieve(rid).output_text == events[-1].response.output_text


def test_store_evicts_least_recently_used(pasada_bin, smollm2):
    s = Server(pasada_bin, smollm2, "--parallel", 2, "--ctx", 512, "--responses-store", 2)
    try:
        c = s.client()
        ids = [c.responses.create(model="m", input=f"Say {w}.", max_output_tokens=2).id
               for w in ("one", "two")]
        c.responses.retrieve(ids[0])  # now the second is the least recently used
        ids.append(c.responses.create(model="m", input="Say three.", max_output_tokens=2).id)
        with pytest.raises(openai.NotFoundError):
            c.responses.retrieve(ids[1])
        assert c.responses.retrieve(ids[0]).id == ids[0]
        assert c.responses.retrieve(ids[2]).id == ids[2]
        with pytest.raises(openai.NotFoundError):
            c.responses.create(model="m", previous_response_id=ids[1], input="x", max_output_tokens=2)
    finally:
        assert s.stop() == 0, s.stderr


def test_max_output_tokens_incomplete(client):
    r = client.responses.create(model="m", input="Tell me a long story.", max_output_tokens=3)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3 and r.max_output_tokens == 3


def test_text_format_json_schema(client):
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}},
              "required": ["city"], "additionalProperties": False}
    r = client.responses.create(model="m", input=Q, max_output_tokens=40, temperature=0,
                                text={"format": {"type": "json_schema", "name": "answer",
                                                 "schema": schema, "strict": True}})
    jsonschema.validate(json.loads(r.output_text), schema)


def test_reasoning_item(pasada_bin, smollm2):
    """A template that opens <think> itself when asked to think (reasoning.effort
    sets its enable_thinking): the output (SmolLM2 never closes it) is a
    reasoning item, whole and streamed, and its tokens are counted."""
    s = Server(pasada_bin, smollm2, "--parallel", 2, "--ctx", 1024, "--chat-template-file", need(R1))
    try:
        c = s.client()
        kw = dict(model="m", input="Hi", max_output_tokens=10, temperature=0)
        plain = c.responses.create(**kw)  # the template closes <think> unless asked to think
        assert [o.type for o in plain.output] == ["message"], plain.output
        kw["reasoning"] = {"effort": "low"}
        r = c.responses.create(**kw)
        assert [o.type for o in r.output] == ["reasoning"], r.output
        text = r.output[0].content[0].text
        assert text and r.output[0].id.startswith("rs_")
        assert 0 < r.usage.output_tokens_details.reasoning_tokens <= r.usage.output_tokens
        events = list(c.responses.create(**kw, stream=True))
        deltas = [e.delta for e in events if e.type == "response.reasoning_text.delta"]
        assert "".join(deltas) == text
        assert events[-1].response.output[0].content[0].text == text
    finally:
        assert s.stop() == 0, s.stderr


# ---- function tools ----

def test_function_call_forced_and_answered(pasada_bin, smollm2):
    s = Server(pasada_bin, smollm2, "--parallel", 2, "--ctx", 2048, "--chat-template-file", need(QWEN25))
    try:
        c = s.client()
        r = c.responses.create(model="m", input="Weather in Oslo?", tools=[WEATHER],
                               tool_choice="required", max_output_tokens=96, temperature=0,
                               parallel_tool_calls=False)
        calls = [o for o in r.output if o.type == "function_call"]
        assert len(calls) == 1, r.output
        fc = calls[0]
        assert fc.name == "get_weather" and fc.call_id and fc.id.startswith("fc_")
        jsonschema.validate(json.loads(fc.arguments), WEATHER["parameters"])
        assert r.tools[0].name == "get_weather"
        # streamed: the arguments as a delta, then done, the same call
        events = list(c.responses.create(model="m", input="Weather in Oslo?", tools=[WEATHER],
                                         tool_choice="required", max_output_tokens=96,
                                         temperature=0, parallel_tool_calls=False, stream=True))
        done = [e for e in events if e.type == "response.function_call_arguments.done"]
        deltas = [e for e in events if e.type == "response.function_call_arguments.delta"]
        assert len(done) == 1 and "".join(d.delta for d in deltas) == done[0].arguments
        assert json.loads(done[0].arguments) == json.loads(fc.arguments)
        # the call's output continues the stored conversation
        r2 = c.responses.create(model="m", previous_response_id=r.id, tools=[WEATHER],
                                max_output_tokens=8, temperature=0, input=[
                                    {"type": "function_call_output", "call_id": fc.call_id,
                                     "output": "18 degrees and sunny"}])
        assert r2.status in ("completed", "incomplete")
        assert r2.usage.input_tokens > r.usage.input_tokens + r.usage.output_tokens
        # the same history sent whole renders the same prompt
        r3 = c.responses.create(model="m", tools=[WEATHER], max_output_tokens=8, temperature=0,
                                input=[{"role": "user", "content": "Weather in Oslo?"},
                                       {"type": "function_call", "call_id": fc.call_id,
                                        "name": fc.name, "arguments": fc.arguments},
                                       {"type": "function_call_output", "call_id": fc.call_id,
                                        "output": "18 degrees and sunny"}])
        assert r3.usage.input_tokens == r2.usage.input_tokens
        assert r3.output_text == r2.output_text
    finally:
        assert s.stop() == 0, s.stderr


# ---- errors ----

def test_stream_failed_event(pasada_bin, smollm2):
    """A stream whose request fails after its start (waiting for the only
    slot when the server shuts down) ends with `error` and
    `response.failed`; the running one ends with response.incomplete."""
    s = Server(pasada_bin, smollm2, "--parallel", 1, "--ctx", 1024)
    try:
        c = s.client()
        kw = dict(model="m", input="Count from 1 to 1000, one number per line.",
                  max_output_tokens=600, temperature=0, stream=True)
        a = iter(c.responses.create(**kw))
        while next(a).type != "response.output_text.delta":
            pass  # a is generating: it holds the slot
        b = iter(c.responses.create(**kw))
        assert next(b).type == "response.created"  # b has started, waiting for the slot
        s.proc.send_signal(signal.SIGTERM)
        rest = list(b)
        assert [e.type for e in rest][-2:] == ["error", "response.failed"], rest
        assert rest[-2].code == "shutting_down" and "shutting down" in rest[-2].message
        failed = rest[-1].response
        assert failed.status == "failed" and failed.error.message == rest[-2].message
        end = list(a)[-1]
        assert end.type == "response.incomplete" and end.response.status == "incomplete"
    finally:
        assert s.stop() == 0, s.stderr


def test_accepted_fields_echoed(client):
    """Fields that change nothing here are accepted and shown as the response
    object shows them: include values naming items that cannot occur (the
    built-in tools are refused), top_logprobs 0, truncation disabled, any
    service tier (served as "default"), the cache key and identifiers."""
    out = client.responses.create(
        model="m", input="Say hi.", max_output_tokens=4, temperature=0,
        include=["file_search_call.results", "web_search_call.action.sources"], top_logprobs=0,
        truncation="disabled", service_tier="flex", prompt_cache_key="k1",
        safety_identifier="u-7", max_tool_calls=3)
    assert out.status in ("completed", "incomplete") and out.output_text
    assert out.truncation == "disabled" and out.top_logprobs == 0
    assert out.service_tier == "default" and out.background is False
    assert out.prompt_cache_key == "k1" and out.safety_identifier == "u-7"
    assert out.max_tool_calls == 3
    stream = client.responses.create(model="m", input="Say hi.", max_output_tokens=2,
                                     temperature=0, stream=True,
                                     stream_options={"include_obfuscation": False})
    assert list(stream)[-1].type in ("response.completed", "response.incomplete")


def test_logprobs(client):
    """include message.output_text.logprobs with top_logprobs: the output_text
    part lists each generated token (its text, bytes, logprob and the top
    alternatives, most likely first) as chat's logprobs.content does for the
    same greedy request; streamed, the text deltas carry the same tokens
    (without bytes, as the API's delta events show them)."""
    kw = dict(model="m", input=Q, max_output_tokens=8, temperature=0,
              include=["message.output_text.logprobs"], top_logprobs=3)
    r = client.responses.create(**kw)
    assert r.top_logprobs == 3
    part = r.output[0].content[0]
    lps = part.logprobs
    assert lps and "".join(t.token for t in lps).strip() == part.text.strip()
    for t in lps:
        assert bytes(t.bytes) == t.token.encode() and t.logprob <= 0
        assert len(t.top_logprobs) == 3
        tops = [x.logprob for x in t.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        assert t.top_logprobs[0].token == t.token  # greedy: the drawn token is the likeliest
        assert abs(t.top_logprobs[0].logprob - t.logprob) < 1e-6
    c = client.chat.completions.create(model="m", messages=[{"role": "user", "content": Q}],
                                       max_tokens=8, temperature=0, logprobs=True, top_logprobs=3)
    ref = c.choices[0].logprobs.content
    assert [t.token for t in lps] == [t.token for t in ref]
    assert all(abs(a.logprob - b.logprob) < 1e-4 for a, b in zip(lps, ref))
    # top_logprobs alone asks for them too; the default lists none
    only_top = client.responses.create(model="m", input=Q, max_output_tokens=3, temperature=0,
                                       top_logprobs=1)
    assert [len(t.top_logprobs) for t in only_top.output[0].content[0].logprobs] == [1, 1, 1]
    plain = client.responses.create(model="m", input=Q, max_output_tokens=3, temperature=0)
    assert plain.output[0].content[0].logprobs == [] and plain.top_logprobs == 0
    # streamed
    events = list(client.responses.create(**kw, stream=True))
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    streamed = [t for d in deltas for t in d.logprobs]
    assert [t.token for t in streamed] == [t.token for t in lps]
    assert all(abs(a.logprob - b.logprob) < 1e-6 and len(a.top_logprobs) == 3
               for a, b in zip(streamed, lps))
    done = next(e for e in events if e.type == "response.output_text.done")
    assert [t.token for t in done.logprobs] == [t.token for t in lps]
    final = events[-1].response.output[0].content[0]
    assert [t.token for t in final.logprobs] == [t.token for t in lps]


def test_errors(server, client):
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="m", input="hi", tools=[{"type": "web_search"}])
    assert e.value.body["param"] == "tools[0]" and "web_search" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="m", input=[{"role": "user", "content": [
            {"type": "input_image", "image_url": "http://x/y.png"}]}])
    assert "input_image" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="m", input=[{"type": "item_reference", "id": "x"}])
    assert "item_reference" in e.value.body["message"]
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="m", input="hi", temperature=3)
    assert e.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError) as e:
        client.responses.create(model="m", input="hi", background=True)
    assert e.value.body["param"] == "background"
    # fields that would change the output and are not offered: refused, named
    for field, value in [("include", ["reasoning.encrypted_content"]),
                         ("include", ["no.such.item"]), ("include", "x"),
                         ("top_logprobs", -1), ("top_logprobs", 21), ("truncation", "auto"),
                         ("service_tier", "cheap"), ("max_tool_calls", 0),
                         ("prompt_cache_key", 7), ("stream_options", {"x": 1})]:
        r = raw_post(server, "/v1/responses", json.dumps({"model": "m", "input": "hi", field: value}))
        assert_error(r, 400)
        assert r.json()["error"]["param"] == field, (field, value, r.json())
    assert_error(raw_post(server, "/v1/responses", json.dumps({"model": "m"})), 400, "input")
    assert_error(raw_post(server, "/v1/responses", b"[1]"), 400)
    assert_error(requests.get(server.url + "/v1/responses/resp_nope", timeout=10), 404)
    r = requests.get(server.url + "/v1/responses", timeout=10)
    assert_error(r, 405)
    assert r.headers["Allow"] == "POST"
    r = requests.put(server.url + "/v1/responses/resp_x", timeout=10)
    assert_error(r, 405)
    assert r.headers["Allow"] == "GET, DELETE"
