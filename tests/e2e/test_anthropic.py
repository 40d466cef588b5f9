"""The Anthropic Messages API of `pasada serve` (/v1/messages and
/v1/messages/count_tokens) with the official `anthropic` client unmodified:
plain and streamed messages (equal to each other and to the chat API's
answer: one conversion, one template), system prompts, stop sequences,
prefix-cache usage, count_tokens, tool_use / tool_result history rendered
like the equivalent OpenAI conversation, forced tool calls (tool_choice any /
tool, grammar-constrained: SmolLM2 is too small to choose tools itself) whole
and streamed, thinking blocks, and errors in Anthropic's shape."""
import json
import pathlib
import signal

import anthropic
import jsonschema
import pytest
from conftest import CHAT_TEMPLATES
import requests

from test_server import Server

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = CHAT_TEMPLATES
QWEN25 = CORPUS / "Qwen-Qwen2.5-7B-Instruct.jinja"  # Hermes <tool_call> syntax
R1 = CORPUS / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"  # opens <think> itself

Q = "What is the capital city of France? Answer in one word."
WEATHER = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "maxLength": 24},
                       "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
}
ADD = {
    "name": "add",
    "description": "Adds two integers.",
    "input_schema": {"type": "object",
                     "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                     "required": ["a", "b"], "additionalProperties": False},
}


# the client no longer sends sampling fields itself: greedy goes in the body
T0 = {"extra_body": {"temperature": 0}}


def need(path):
    if not path.exists():
        pytest.skip(f"{path} is missing (the shared chat-template corpus)")
    return path


def user(text):
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def server(pasada_bin, smollm2):
    s = Server(pasada_bin, smollm2, "--parallel", 4, "--ctx", 1024)
    yield s
    assert s.stop() == 0, s.stderr


def anthropic_client(server, api_key="unused"):
    return anthropic.Anthropic(base_url=server.url, api_key=api_key, max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def client(server):
    return anthropic_client(server)


@pytest.fixture(scope="module")
def hermes(pasada_bin, smollm2):
    """SmolLM2 rendered with Qwen 2.5's template: a tool-call syntax the server parses."""
    s = Server(pasada_bin, smollm2, "--parallel", 4, "--ctx", 2048, "--chat-template-file",
               need(QWEN25))
    yield s
    assert s.stop() == 0, s.stderr


def error_of(exc_info, status):
    e = exc_info.value
    assert e.status_code == status
    assert e.body["type"] == "error", e.body
    assert set(e.body["error"]) == {"type", "message"} and e.body["error"]["message"]
    return e.body["error"]


# ---- text ----

def test_create_matches_chat(server, client):
    oa = server.client().chat.completions.create(model="m", messages=user(Q), max_tokens=12,
                                                 temperature=0)
    m = client.messages.create(model="claude-any", max_tokens=12, **T0, messages=user(Q))
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_")
    assert m.model == "claude-any"
    assert [b.type for b in m.content] == ["text"] and "Paris" in m.content[0].text
    assert m.stop_reason in ("end_turn", "max_tokens") and m.stop_sequence is None
    u = m.usage
    assert 0 < u.output_tokens <= 12 and u.cache_creation_input_tokens == 0
    assert m.content[0].text == oa.choices[0].message.content
    # Anthropic counts cache reads apart from input_tokens
    assert u.input_tokens + u.cache_read_input_tokens == oa.usage.prompt_tokens
    assert u.cache_read_input_tokens > 0  # the chat request's prompt was cached


def test_system_prompt(server, client):
    sys = "You are a geography teacher."
    a = client.messages.create(model="m", max_tokens=8, **T0, system=sys, messages=user(Q))
    b = client.messages.create(model="m", max_tokens=8, **T0, messages=user(Q),
                               system=[{"type": "text", "text": "You are a geography "},
                                       {"type": "text", "text": "teacher."}])
    assert a.content[0].text == b.content[0].text
    oa = server.client().chat.completions.create(
        model="m", max_tokens=8, temperature=0,
        messages=[{"role": "system", "content": sys}] + user(Q))
    assert a.content[0].text == oa.choices[0].message.content
    assert a.usage.input_tokens + a.usage.cache_read_input_tokens == oa.usage.prompt_tokens
    n = client.messages.count_tokens(model="m", system=sys, messages=user(Q)).input_tokens
    assert n == oa.usage.prompt_tokens
    assert n != client.messages.count_tokens(model="m", messages=user(Q)).input_tokens


def test_stream_equals_create(client):
    kw = dict(model="m", max_tokens=16, **T0, messages=user("Name three colors."))
    whole = client.messages.create(**kw)
    with client.messages.stream(**kw) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == whole.content[0].text == final.content[0].text
    assert final.stop_reason == whole.stop_reason and final.id.startswith("msg_")
    assert final.usage.output_tokens == whole.usage.output_tokens
    assert final.usage.input_tokens + final.usage.cache_read_input_tokens == \
        whole.usage.input_tokens + whole.usage.cache_read_input_tokens

    events = list(client.messages.create(**kw, stream=True))
    types = [e.type for e in events]
    assert types[0] == "message_start" and types[-2:] == ["message_delta", "message_stop"]
    assert types[1] == "content_block_start" and types[-3] == "content_block_stop"
    assert set(types[2:-3]) == {"content_block_delta"}
    assert events[0].message.content == [] and events[0].message.stop_reason is None
    assert "".join(e.delta.text for e in events[2:-3]) == whole.content[0].text
    assert events[-2].delta.stop_reason == whole.stop_reason


def test_stream_raw_events(server):
    """The wire: every event has its `event:` line, a ping follows message_start."""
    r = requests.post(server.url + "/v1/messages", stream=True, timeout=60,
                      json={"model": "m", "max_tokens": 3, "stream": True, "messages": user("Hi")})
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/event-stream"
    blocks = [b for b in r.text.split("\n\n") if b.strip()]
    names = []
    for b in blocks:
        ev, data = b.split("\n")
        assert ev.startswith("event: ") and data.startswith("data: ")
        assert json.loads(data[6:])["type"] == ev[7:]
        names.append(ev[7:])
    assert names[:2] == ["message_start", "ping"] and names[-1] == "message_stop"


def test_stop_sequences(client):
    kw = dict(model="m", max_tokens=24, **T0, messages=user("Count from 1 to 10."))
    free = client.messages.create(**kw).content[0].text
    words = free.split()
    assert len(words) > 3, free
    stop = words[2]
    m = client.messages.create(**kw, stop_sequences=["\u00a7never\u00a7", stop])
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == stop
    # (the output parser trims the text's ends)
    assert m.content[0].text == free[:free.index(stop)].strip()
    with client.messages.stream(**kw, stop_sequences=[stop]) as s:
        f = s.get_final_message()
    assert f.stop_reason == "stop_sequence" and f.stop_sequence == stop


def test_max_tokens_and_sampling(client):
    m = client.messages.create(model="m", max_tokens=3, messages=user("Tell me a story."),
                               metadata={"user_id": "u1"},
                               extra_body={"temperature": 0.7, "top_p": 0.9, "top_k": 40})
    assert m.stop_reason == "max_tokens" and m.usage.output_tokens == 3


# ---- tools ----

TOOL_HISTORY = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather",
         "input": {"city": "Paris", "unit": "celsius"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01",
         "content": [{"type": "text", "text": "18 degrees, sunny"}]},
        {"type": "text", "text": "Thanks. Summarize it."}]},
]
OPENAI_HISTORY = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "Let me check.", "tool_calls": [
        {"id": "toolu_01", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city":"Paris","unit":"celsius"}'}}]},
    {"role": "tool", "tool_call_id": "toolu_01", "content": "18 degrees, sunny"},
    {"role": "user", "content": "Thanks. Summarize it."},
]


def test_tool_history_renders_like_openai(server, client):
    """tool_use / tool_result blocks become the assistant tool_calls and tool
    message of the equivalent OpenAI conversation: the same prompt."""
    n = client.messages.count_tokens(model="m", messages=TOOL_HISTORY).input_tokens
    oa = server.client().chat.completions.create(model="m", messages=OPENAI_HISTORY,
                                                 max_tokens=1, **T0)
    assert n == oa.usage.prompt_tokens
    m = client.messages.create(model="m", max_tokens=6, **T0, messages=TOOL_HISTORY)
    assert m.usage.input_tokens + m.usage.cache_read_input_tokens == n
    # what the tool said reaches the prompt; an error result is marked as one
    changed = json.loads(json.dumps(TOOL_HISTORY))
    changed[2]["content"][0]["content"] = "18 degrees, sunny, with a light breeze from the west"
    assert client.messages.count_tokens(model="m", messages=changed).input_tokens > n
    changed = json.loads(json.dumps(TOOL_HISTORY))
    changed[2]["content"][0]["is_error"] = True
    assert client.messages.count_tokens(model="m", messages=changed).input_tokens > n


def test_tools_offered_render(hermes):
    c = anthropic_client(hermes)
    base = c.messages.count_tokens(model="m", messages=user("Weather in Oslo?")).input_tokens
    with_tools = c.messages.count_tokens(model="m", messages=user("Weather in Oslo?"),
                                         tools=[WEATHER]).input_tokens
    assert with_tools > base + 20  # the schema is in the system prompt
    oa = hermes.client().chat.completions.create(
        model="m", messages=user("Weather in Oslo?"), max_tokens=1, temperature=0,
        tools=[{"type": "function", "function": {"name": WEATHER["name"],
                                                  "description": WEATHER["description"],
                                                  "parameters": WEATHER["input_schema"]}}])
    assert with_tools == oa.usage.prompt_tokens


def test_tool_choice_any_forces_a_call(hermes):
    c = anthropic_client(hermes)
    m = c.messages.create(model="m", max_tokens=96, **T0, tools=[WEATHER, ADD],
                          tool_choice={"type": "any"}, messages=user("Weather in Oslo?"))
    calls = [b for b in m.content if b.type == "tool_use"]
    assert calls and m.stop_reason == "tool_use", m
    for b in calls:
        assert b.id.startswith("toolu_") and b.name in ("get_weather", "add")
        schema = WEATHER if b.name == "get_weather" else ADD
        jsonschema.validate(b.input, schema["input_schema"])
    assert len({b.id for b in calls}) == len(calls)


def test_tool_choice_named_streamed(hermes):
    c = anthropic_client(hermes)
    kw = dict(model="m", max_tokens=96, **T0, tools=[WEATHER, ADD],
              tool_choice={"type": "tool", "name": "add", "disable_parallel_tool_use": True},
              messages=user("What is 2 plus 3?"))
    whole = c.messages.create(**kw)
    calls = [b for b in whole.content if b.type == "tool_use"]
    assert len(calls) == 1 and calls[0].name == "add" and whole.stop_reason == "tool_use"
    jsonschema.validate(calls[0].input, ADD["input_schema"])
    with c.messages.stream(**kw) as s:
        events = list(s)
        final = s.get_final_message()
    deltas = [e for e in events if e.type == "content_block_delta"
              and e.delta.type == "input_json_delta"]
    assert deltas and json.loads("".join(d.delta.partial_json for d in deltas)) == calls[0].input
    fc = [b for b in final.content if b.type == "tool_use"]
    assert [(b.name, b.input) for b in fc] == [(calls[0].name, calls[0].input)]
    # the call and its result go back as the next turn's history
    nxt = c.messages.create(model="m", max_tokens=8, **T0, tools=[WEATHER, ADD],
                            messages=user("What is 2 plus 3?") + [
                                {"role": "assistant", "content": whole.content},
                                {"role": "user", "content": [{"type": "tool_result",
                                                              "tool_use_id": calls[0].id,
                                                              "content": "5"}]}])
    assert nxt.stop_reason in ("end_turn", "max_tokens", "tool_use")


def test_thinking_blocks(pasada_bin, smollm2):
    """A template that opens <think> itself: the output (SmolLM2 never closes
    it) is a thinking block, whole and streamed."""
    s = Server(pasada_bin, smollm2, "--parallel", 2, "--ctx", 1024, "--chat-template-file", need(R1))
    try:
        c = anthropic_client(s)
        kw = dict(model="m", max_tokens=10, **T0, messages=user("Hi"),
                  thinking={"type": "adaptive"})
        m = c.messages.create(**kw)
        assert m.content[0].type == "thinking" and m.content[0].thinking, m
        with c.messages.stream(**kw) as st:
            final = st.get_final_message()
        assert final.content[0].thinking == m.content[0].thinking
        kw["thinking"] = {"type": "adaptive", "display": "omitted"}
        hidden = c.messages.create(**kw)
        assert hidden.content[0].type == "thinking" and hidden.content[0].thinking == ""
        # disabled: a model that reasons whatever its template says (the prompt
        # opened <think>) has its block closed at once: no thinking, an answer
        kw["thinking"] = {"type": "disabled"}
        off = c.messages.create(**kw)
        assert [b.type for b in off.content] == ["text"] and off.content[0].text, off
        assert off.usage.output_tokens == 10
        with c.messages.stream(**kw) as st:
            assert st.get_final_message().content[0].text == off.content[0].text
    finally:
        assert s.stop() == 0, s.stderr


def test_thinking_budget_enforced(pasada_bin):
    """thinking.budget_tokens is enforced: the tiny random qwen3 model never
    closes the <think> the R1 template opens; after the budget the server
    writes </think> and the model answers (a text block), streamed or not.
    The thinking is then a prefix of the unlimited one, longer for a
    larger budget."""
    s = Server(pasada_bin, ROOT / "tests" / "fixtures" / "tiny" / "qwen3.gguf", "--ctx", 2048,
               "--chat-template-file", need(R1))
    try:
        c = anthropic_client(s)

        def ask(thinking, stream=False):
            kw = dict(model="m", max_tokens=1100, **T0, messages=user("Hi"), thinking=thinking)
            if not stream:
                return c.messages.create(**kw)
            with c.messages.stream(**kw) as st:
                return st.get_final_message()

        free = ask({"type": "adaptive"})
        assert [b.type for b in free.content] == ["thinking"]  # it never stops thinking
        small = ask({"type": "enabled", "budget_tokens": 1024})
        assert [b.type for b in small.content] == ["thinking", "text"], small.content
        assert small.content[1].text and small.usage.output_tokens == 1100
        streamed = ask({"type": "enabled", "budget_tokens": 1024}, stream=True)
        assert [(b.type, getattr(b, "thinking", None), getattr(b, "text", None))
                for b in streamed.content] == [
            (b.type, getattr(b, "thinking", None), getattr(b, "text", None)) for b in small.content]
        large = ask({"type": "enabled", "budget_tokens": 1050})
        assert [b.type for b in large.content] == ["thinking", "text"]
        a, b, f = (m.content[0].thinking for m in (small, large, free))
        assert len(a) < len(b) < len(f)
        assert f.startswith(a[:-3]) and f.startswith(b[:-3])  # (a cut may split a character)
    finally:
        assert s.stop() == 0, s.stderr


# ---- errors ----

def test_stream_error_event(pasada_bin, smollm2):
    """A stream whose request fails after its start (waiting for the only
    slot when the server shuts down) ends with an `error` event in
    Anthropic's shape; the running one ends with max_tokens."""
    s = Server(pasada_bin, smollm2, "--parallel", 1, "--ctx", 1024)
    try:
        body = {"model": "m", "max_tokens": 600, "stream": True, "temperature": 0,
                "messages": user("Count from 1 to 1000, one number per line.")}
        a = requests.post(s.url + "/v1/messages", json=body, stream=True, timeout=60)
        lines_a = a.iter_lines(decode_unicode=True)
        for line in lines_a:  # a is generating: it holds the slot
            if line == "event: content_block_delta":
                break
        b = anthropic_client(s).messages.create(**{k: v for k, v in body.items()
                                                   if k != "temperature"})
        assert next(iter(b)).type == "message_start"  # b has started, waiting for the slot
        s.proc.send_signal(signal.SIGTERM)
        with pytest.raises(anthropic.APIStatusError) as e:
            list(b)
        assert e.value.body["type"] == "error"
        assert e.value.body["error"]["type"] == "overloaded_error"
        rest = [ln for ln in lines_a if ln.startswith("data: ")]
        assert json.loads(rest[-1][6:])["type"] == "message_stop"
        assert json.loads(rest[-2][6:])["delta"]["stop_reason"] == "max_tokens"
    finally:
        assert s.stop() == 0, s.stderr


def test_errors(server, client):
    with pytest.raises(anthropic.BadRequestError) as e:
        client.post("/v1/messages", cast_to=object, body={"model": "m", "messages": user("hi")})
    assert "max_tokens" in error_of(e, 400)["message"]
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="m", max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}])
    err = error_of(e, 400)
    assert err["type"] == "invalid_request_error" and "image" in err["message"]
    assert "messages.0.content.0" in err["message"]
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="m", max_tokens=4, messages=user("hi"), tools=[WEATHER],
                               tool_choice={"type": "tool", "name": "nope"})
    assert "nope" in error_of(e, 400)["message"]
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="m", max_tokens=4, messages=[{"role": "system", "content": "x"}])
    assert "role" in error_of(e, 400)["message"]
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="m", max_tokens=4, messages=user("hi"),
                               tools=[{"type": "web_search_20250305", "name": "web_search"}])
    assert "web_search_20250305" in error_of(e, 400)["message"]
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="m", max_tokens=4, messages=user("hi"),
                               extra_body={"temperature": 1.5})
    assert "temperature" in error_of(e, 400)["message"]
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="m", max_tokens=4, messages=user("hi"),
                               thinking={"type": "sometimes"})
    error_of(e, 400)
    # Anthropic's bounds on the budget: at least 1024, below max_tokens
    for max_tokens, budget, param in [(2000, 1023, "budget_tokens"), (1024, 1024, "max_tokens"),
                                      (100, 1500, "max_tokens")]:
        with pytest.raises(anthropic.BadRequestError) as e:
            client.messages.create(model="m", max_tokens=max_tokens, messages=user("hi"),
                                   thinking={"type": "enabled", "budget_tokens": budget})
        assert param in error_of(e, 400)["message"]
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.count_tokens(model="m", messages=[])
    error_of(e, 400)
    # server-side features a local server lacks: refused, named
    for field, value in [("container", "c1"), ("mcp_servers", [{"type": "url", "url": "http://x",
                                                                  "name": "x"}]),
                         ("context_management", {"edits": []}), ("service_tier", "premium"),
                         ("diagnostics", {"previous_message_id": "msg_1"}), ("speed", "warp"),
                         ("cache_control", "x"), ("inference_geo", 3)]:
        with pytest.raises(anthropic.BadRequestError) as e:
            client.messages.create(model="m", max_tokens=2, messages=user("hi"),
                                   extra_body={field: value})
        assert field in error_of(e, 400)["message"]
    assert client.messages.create(model="m", max_tokens=2, messages=user("hi"),
                                  service_tier="standard_only", extra_body={
                                      "mcp_servers": [], "speed": "standard", "inference_geo": "us",
                                      "cache_control": {"type": "ephemeral"}}).content
    r = requests.post(server.url + "/v1/messages", data=b"{not json", timeout=10)
    assert r.status_code == 400 and r.json()["type"] == "error"
    r = requests.get(server.url + "/v1/messages", timeout=10)
    assert r.status_code == 405 and r.headers["Allow"] == "POST"
    assert r.json()["error"]["type"] == "invalid_request_error"
    # the server still answers
    assert client.messages.create(model="m", max_tokens=2, messages=user("hi")).content


def test_long_prompt_is_a_400(client):
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model="m", max_tokens=4, messages=user("word " * 3000))
    assert "context" in error_of(e, 400)["message"]
