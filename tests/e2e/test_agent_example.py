"""examples/agent.py run as a new user would: the official `openai` and
`anthropic` clients, unmodified, in a tool-using loop against `pasada serve`,
streamed and not. Each run must call at least one tool on its first turn
(tool_choice required / any), every call must name a tool of the example
with arguments valid for its schema (the first turn's are grammar-
constrained; later turns are the model's own choice, so their calls need
only name a known tool and parse), every call must have been executed, and
the loop must end with an answer. Greedy decoding: the streamed run makes
the same calls as the plain one.

SmolLM2-135M and gemma-3-270m (the conftest models), each with
Qwen 2.5's template from the corpus (Hermes <tool_call> syntax): their own
templates have no tool-call syntax."""
import importlib.util
import json
import pathlib
import subprocess
import sys

import jsonschema
import pytest
from conftest import CHAT_TEMPLATES

from test_server import Server

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "agent.py"
QWEN25 = CHAT_TEMPLATES / "Qwen-Qwen2.5-7B-Instruct.jinja"
MAX_TURNS = 3


def example_tools():
    spec = importlib.util.spec_from_file_location("agent_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.TOOLS


@pytest.fixture(scope="module", params=["smollm2", "gemma3"])
def server(request, pasada_bin):
    model = request.getfixturevalue(request.param)
    if not QWEN25.exists():
        pytest.skip(f"{QWEN25} is missing (the shared chat-template corpus)")
    s = Server(pasada_bin, model, "--ctx", 2048, "--parallel", 2, "--chat-template-file", QWEN25)
    yield s
    assert s.stop() == 0, s.stderr


def run_agent(server, api, stream):
    cmd = [sys.executable, str(EXAMPLE), "--base-url", server.url, "--api", api, "--json",
           "--max-turns", str(MAX_TURNS), "--max-tokens", "64"] + (["--stream"] if stream else [])
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_agent_loop(server, api):
    tools = example_tools()
    runs = {stream: run_agent(server, api, stream) for stream in (False, True)}
    for stream, run in runs.items():
        assert run["api"] == api and run["stream"] == stream
        calls = run["calls"]
        assert any(c["turn"] == 0 for c in calls), f"no tool call on the first turn: {run}"
        for c in calls:
            assert c["name"] in tools, c
            assert isinstance(c["arguments"], dict), c
            if c["turn"] == 0:
                jsonschema.validate(c["arguments"], tools[c["name"]]["parameters"])
            assert c["result"] and not c["result"].startswith("error: no tool"), c
            assert 0 <= c["turn"] < MAX_TURNS - 1, c  # the last turn offers no tools
        assert isinstance(run["answer"], str), run
    assert runs[False]["calls"] == runs[True]["calls"]
