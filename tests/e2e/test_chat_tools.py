"""The OpenAI chat API's agent features end to end, with the official `openai`
client: the model's own Jinja chat template (and --chat-template-file),
/apply-template, tools with tool_choice required / named (grammar-constrained,
so the arguments always parse and match the schema), streamed tool-call
deltas, tool results rendered back, response_format json_object / json_schema,
the `grammar` extension, reasoning split into reasoning_content, logit_bias,
and the OpenAI fields that are refused rather than ignored.

SmolLM2-135M is too small to choose tools on its own, so the tool tests use
constrained modes (required, a named function) whose output is decided by the
grammar's shape, and a Hermes-style template from the corpus
(--chat-template-file) whose tool-call syntax the server parses."""
import json
import pathlib

import jsonschema
import openai
import pytest
from conftest import CHAT_TEMPLATES
import requests

from test_server import Server, assert_error, raw_post

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = CHAT_TEMPLATES
QWEN25 = CORPUS / "Qwen-Qwen2.5-7B-Instruct.jinja"
QWEN3 = CORPUS / "Qwen-Qwen3-0.6B.jinja"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 24},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city", "unit"],
            "additionalProperties": False,
        },
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Adds two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
}


def need(path):
    if not path.exists():
        pytest.skip(f"{path} is missing (the shared chat-template corpus)")
    return path


@pytest.fixture(scope="module")
def plain(pasada_bin, smollm2):
    """SmolLM2 with its own template (chatml without tool syntax)."""
    s = Server(pasada_bin, smollm2, "--parallel", 4, "--ctx", 1024)
    yield s
    assert s.stop() == 0, s.stderr


@pytest.fixture(scope="module")
def hermes(pasada_bin, smollm2):
    """SmolLM2 rendered with Qwen 2.5's template: Hermes <tool_call> syntax."""
    s = Server(pasada_bin, smollm2, "--parallel", 4, "--ctx", 2048, "--chat-template-file",
               need(QWEN25))
    yield s
    assert s.stop() == 0, s.stderr


@pytest.fixture(scope="module")
def thinking(pasada_bin, smollm2):
    """SmolLM2 rendered with Qwen 3's template: <think> reasoning markers."""
    s = Server(pasada_bin, smollm2, "--parallel", 2, "--ctx", 2048, "--chat-template-file",
               need(QWEN3))
    yield s
    assert s.stop() == 0, s.stderr


def jinja_render(template_text, context):
    """The prompt as transformers' apply_chat_template renders it."""
    import sys
    sys.path.insert(0, str(ROOT / "tests" / "tools"))
    from render_templates import render  # the template corpus' fixture script
    return render(template_text, context)


def test_model_template_is_rendered_as_jinja2_does(plain, smollm2):
    import gguf
    reader = gguf.GGUFReader(str(smollm2))
    f = reader.fields["tokenizer.chat_template"]
    template = bytes(f.parts[f.data[0]]).decode()
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Sky?"}]
    r = requests.post(plain.url + "/apply-template", json={"messages": msgs}, timeout=30)
    assert r.status_code == 200, r.text
    want = jinja_render(template, {"messages": msgs, "add_generation_prompt": True,
                                   "bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"})
    assert r.json()["prompt"] == want
    r = requests.post(plain.url + "/apply-template",
                      json={"messages": msgs[:3], "add_generation_prompt": False}, timeout=30)
    assert not r.json()["prompt"].endswith("<|im_start|>assistant\n")


def test_template_file_renders_tools_and_history(hermes):
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}}
    msgs = [{"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": "21 C, sunny"}]
    r = requests.post(hermes.url + "/apply-template", json={"messages": msgs, "tools": [WEATHER]},
                      timeout=30)
    assert r.status_code == 200, r.text
    p = r.json()["prompt"]
    assert '"name": "get_weather"' in p and "<tools>" in p
    # the call is rendered back with its arguments as an object, the result as a tool response
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}' in p
    assert "<tool_response>\n21 C, sunny\n</tool_response>" in p
    want = jinja_render(QWEN25.read_text(), {
        "messages": [msgs[0], {**msgs[1], "content": "", "tool_calls": [
            {**call, "function": {"name": "get_weather",
                                  "arguments": {"city": "Paris", "unit": "celsius"}}}]},
            msgs[2]],
        "tools": [WEATHER], "add_generation_prompt": True, "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>"})
    assert p == want


@pytest.mark.parametrize("stream", [False, True])
def test_required_tool_call_parses_and_matches_schema(hermes, stream):
    client = hermes.client()
    kw = dict(model="m", messages=[{"role": "user", "content": "What is the weather in Oslo?"}],
              tools=[WEATHER, ADD], tool_choice="required", max_tokens=120, temperature=0)
    if not stream:
        r = client.chat.completions.create(**kw)
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls", choice
        calls = choice.message.tool_calls
    else:
        calls, finish = {}, None
        for chunk in client.chat.completions.create(stream=True, **kw):
            for c in chunk.choices:
                finish = c.finish_reason or finish
                for d in c.delta.tool_calls or []:
                    slot = calls.setdefault(d.index, {"id": None, "name": "", "args": ""})
                    slot["id"] = d.id or slot["id"]
                    slot["name"] += d.function.name or ""
                    slot["args"] += d.function.arguments or ""
        assert finish == "tool_calls"
        calls = [type("C", (), {"id": v["id"], "function": type("F", (), {
            "name": v["name"], "arguments": v["args"]})}) for _, v in sorted(calls.items())]
    assert calls, "no tool call"
    for c in calls:
        assert c.id
        tool = {"get_weather": WEATHER, "add": ADD}[c.function.name]
        jsonschema.validate(json.loads(c.function.arguments), tool["function"]["parameters"])


def test_named_tool_choice_forces_that_function(hermes):
    r = hermes.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Tell me a joke."}], tools=[WEATHER, ADD],
        tool_choice={"type": "function", "function": {"name": "add"}}, max_tokens=80,
        temperature=0.7, seed=3)
    calls = r.choices[0].message.tool_calls
    assert calls and all(c.function.name == "add" for c in calls)
    for c in calls:
        args = json.loads(c.function.arguments)
        assert isinstance(args["a"], int) and isinstance(args["b"], int)
    r = hermes.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Tell me a joke."}], tools=[WEATHER, ADD],
        tool_choice={"type": "function", "function": {"name": "add"}}, parallel_tool_calls=False,
        max_tokens=80, temperature=0.7, seed=3)
    assert [c.function.name for c in r.choices[0].message.tool_calls] == ["add"]


def test_tool_choice_none_answers_in_text(hermes):
    r = hermes.client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Say hi."}], tools=[WEATHER],
        tool_choice="none", max_tokens=8, temperature=0)
    assert r.choices[0].message.tool_calls is None and r.choices[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize("stream", [False, True])
def test_json_schema_output_validates(plain, stream):
    schema = {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]},
                 "maxItems": 3}},
        "required": ["name", "age", "tags"], "additionalProperties": False}
    kw = dict(model="m", messages=[{"role": "user", "content": "Describe a person as JSON."}],
              response_format={"type": "json_schema",
                               "json_schema": {"name": "person", "schema": schema, "strict": True}},
              max_tokens=200, temperature=0.8, seed=11)
    client = plain.client()
    if stream:
        text = "".join(c.choices[0].delta.content or "" for c in
                       client.chat.completions.create(stream=True, **kw) if c.choices)
    else:
        r = client.chat.completions.create(**kw)
        assert r.choices[0].finish_reason == "stop"
        text = r.choices[0].message.content
    jsonschema.validate(json.loads(text), schema)


def test_json_object_and_grammar(plain):
    client = plain.client()
    r = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": 'Output exactly this: {"ok": true}'}],
        response_format={"type": "json_object"}, max_tokens=60, temperature=0)
    assert r.choices[0].finish_reason == "stop"
    assert isinstance(json.loads(r.choices[0].message.content), dict)
    r = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Yes or no?"}], max_tokens=10,
        extra_body={"grammar": 'root ::= ("yes" | "no") "."'})
    assert r.choices[0].message.content in ("yes.", "no.")
    r = client.completions.create(model="m", prompt="The answer is", max_tokens=10,
                                  extra_body={"grammar": 'root ::= " " [0-9]+'})
    assert r.choices[0].text[0] == " " and r.choices[0].text[1:].isdigit()


def test_reasoning_is_split_from_content(thinking):
    grammar = 'root ::= "<think>\\nsome thought\\n</think>\\n\\nThe answer."'
    client = thinking.client()
    kw = dict(model="m", messages=[{"role": "user", "content": "Think first."}], max_tokens=40,
              extra_body={"grammar": grammar})
    r = client.chat.completions.create(**kw)
    msg = r.choices[0].message
    assert msg.content == "The answer."
    assert msg.model_extra["reasoning_content"].strip() == "some thought"
    content, reasoning = "", ""
    for chunk in client.chat.completions.create(stream=True, **kw):
        for c in chunk.choices:
            content += c.delta.content or ""
            reasoning += (c.delta.model_extra or {}).get("reasoning_content") or ""
    assert content == "The answer." and reasoning.strip() == "some thought"


def test_logit_bias(plain):
    client = plain.client()
    kw = dict(model="m", messages=[{"role": "user", "content": "Count to three."}], max_tokens=1,
              temperature=0, logprobs=True)
    first = client.chat.completions.create(**kw).choices[0].logprobs.content[0]
    tok = requests.post(plain.url + "/tokenize", json={"content": first.token},
                        timeout=10).json()["tokens"]
    assert len(tok) == 1
    banned = client.chat.completions.create(logit_bias={str(tok[0]): -100}, **kw)
    assert banned.choices[0].logprobs.content[0].token != first.token
    zebra = requests.post(plain.url + "/tokenize", json={"content": " zebra"},
                          timeout=10).json()["tokens"][0]
    r = client.chat.completions.create(logit_bias={str(zebra): 100}, **kw)
    got = r.choices[0].logprobs.content[0].token
    assert requests.post(plain.url + "/tokenize", json={"content": got},
                         timeout=10).json()["tokens"] == [zebra]


@pytest.mark.parametrize("body,param", [
    ({"tools": [{"type": "code_interpreter"}]}, "tools[0]"),
    ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools[0]"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice"),
    ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"response_format": {"type": "xml"}}, "response_format.type"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {
        "type": "object", "properties": {"a": {"type": "string", "format": "hostname-ish"}}}}}},
     None),
    ({"logit_bias": {"abc": 5}}, "logit_bias"),
    ({"logit_bias": {"1": 500}}, "logit_bias"),
    ({"audio": {"voice": "x"}}, "audio"),
    ({"modalities": ["text", "audio"]}, "modalities"),
    ({"store": True}, "store"),
    ({"moderation": {"model": "m"}}, "moderation"),
    ({"verbosity": "low"}, "verbosity"),
    ({"service_tier": "cheap"}, "service_tier"),
    ({"prompt_cache_retention": "1y"}, "prompt_cache_retention"),
    ({"user": 7}, "user"),
    ({"metadata": "x"}, "metadata"),
    ({"grammar": "root ::= undefined-rule"}, "grammar"),
    ({"messages": [{"role": "tool", "tool_call_id": "call_9", "content": "x"}]},
     "messages[0].tool_call_id"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {
        "name": "f", "arguments": "not json"}}]}]}, "messages[0].tool_calls[0].function.arguments"),
])
def test_refused_fields(hermes, body, param):
    full = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, **body}
    err = assert_error(raw_post(hermes, "/v1/chat/completions", json.dumps(full)), 400, param)
    assert err["message"]


def test_accepted_fields(hermes):
    """Fields about the caller and the provider's caching change nothing a
    local server does: accepted (their types checked)."""
    full = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "store": False,
            "user": "u1", "safety_identifier": "s1", "prompt_cache_key": "k",
            "prompt_cache_retention": "24h", "metadata": {"a": "b"}, "service_tier": "auto",
            "verbosity": "medium"}
    r = raw_post(hermes, "/v1/chat/completions", json.dumps(full))
    assert r.status_code == 200, r.text


def test_tools_on_a_template_without_tool_syntax(plain):
    body = {"messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER], "max_tokens": 2}
    assert_error(raw_post(plain, "/v1/chat/completions", json.dumps(body)), 400, "tools")


def test_template_errors_are_400_naming_the_line(pasada_bin, smollm2, tmp_path):
    t = tmp_path / "t.jinja"
    t.write_text("{% for m in messages %}{{ m.content }}\n{% if m.role == 'tool' %}"
                 "{{ raise_exception('no tools here') }}{% endif %}{% endfor %}")
    s = Server(pasada_bin, smollm2, "--chat-template-file", t)
    try:
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        r = raw_post(s, "/v1/chat/completions", json.dumps(
            {**body, "messages": [{"role": "assistant", "content": "x", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "y"}]}))
        err = assert_error(r, 400, "messages")
        assert "no tools here" in err["message"] and "line 2" in err["message"]
    finally:
        assert s.stop() == 0, s.stderr
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% for x in messages %}")
    import subprocess
    p = subprocess.run([str(pasada_bin), "serve", "-m", str(smollm2), "--port", "0",
                        "--chat-template-file", str(bad)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode != 0 and "bad.jinja" in p.stderr


def test_n_choices_share_the_prompt(plain):
    """n choices: one prompt prefilled once (the others attach its KV
    blocks), each choice drawn with the request's seed + its index, so
    choice k equals a single request with seed + k."""
    client = plain.client()
    msgs = [{"role": "system", "content": "You are a poet. " * 12},
            {"role": "user", "content": "Write one line about the sea."}]
    before = plain.wait_idle()
    r = client.chat.completions.create(model="m", messages=msgs, n=3, temperature=0.9, seed=5,
                                       max_tokens=12)
    after = plain.wait_idle()  # the scheduler counts a choice's hits just after its finish
    assert [c.index for c in r.choices] == [0, 1, 2]
    single = [client.chat.completions.create(model="m", messages=msgs, temperature=0.9,
                                             seed=5 + k, max_tokens=12) for k in range(3)]
    for k in range(3):
        assert r.choices[k].message.content == single[k].choices[0].message.content
    assert r.usage.prompt_tokens == single[0].usage.prompt_tokens
    assert r.usage.completion_tokens == sum(s.usage.completion_tokens for s in single)
    # choices 1 and 2 attached the prompt that choice 0 prefilled
    hits = after["pasada_prefix_cache_hit_tokens_total"] - before["pasada_prefix_cache_hit_tokens_total"]
    assert hits >= 2 * (r.usage.prompt_tokens - 16), hits

    texts, finish = {}, {}
    usage = None
    for chunk in client.chat.completions.create(model="m", messages=msgs, n=3, temperature=0.9,
                                                seed=5, max_tokens=12, stream=True,
                                                stream_options={"include_usage": True}):
        usage = chunk.usage or usage
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
            finish[c.index] = c.finish_reason or finish.get(c.index)
    assert texts == {k: r.choices[k].message.content for k in range(3)}
    assert all(finish[k] in ("stop", "length") for k in range(3))
    assert usage.completion_tokens == r.usage.completion_tokens


def test_completions_list_of_prompts(plain):
    client = plain.client()
    prompts = ["The capital of France is", "One, two, three,"]
    r = client.completions.create(model="m", prompt=prompts, n=2, max_tokens=6, temperature=0.8,
                                  seed=9)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    for k in range(4):
        one = client.completions.create(model="m", prompt=prompts[k // 2], max_tokens=6,
                                        temperature=0.8, seed=9 + k)
        assert r.choices[k].text == one.choices[0].text, k
    texts = {}
    for chunk in client.completions.create(model="m", prompt=prompts, n=2, max_tokens=6,
                                           temperature=0.8, seed=9, stream=True):
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + c.text
    assert texts == {k: r.choices[k].text for k in range(4)}


def test_concurrent_requests_share_a_grammar(plain):
    """Requests with the same schema share one compiled grammar (the server's
    cache); each still follows it, and a different schema gets its own."""
    from concurrent.futures import ThreadPoolExecutor
    schema = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0,
                                                     "maximum": 99}},
              "required": ["n"], "additionalProperties": False}
    other = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
             "additionalProperties": False}
    client = plain.client()

    def ask(k):
        s = schema if k % 3 else other
        r = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": f"Pick a number, {k}."}],
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": s}},
            max_tokens=40, temperature=0.9, seed=k)
        return s, r.choices[0].message.content

    with ThreadPoolExecutor(8) as ex:
        for s, text in ex.map(ask, range(12)):
            jsonschema.validate(json.loads(text), s)
