#!/usr/bin/env python3
"""agent.py: a minimal tool-using agent against `pasada serve`, with the
official `openai` client (Chat Completions) or the `anthropic` client
(Messages API), unmodified, pointed at the local server.

Two real tools: `calculate` (arithmetic on numbers: + - * / // % ** and
parentheses) and `list_files` (the files of a scratch folder this script
fills, with their sizes, optionally only those whose name ends with a
suffix). The loop: ask the question with the tools offered; while the model
answers with tool calls, run each one and send its result back (an
OpenAI `tool` message, or an Anthropic `tool_result` block); stop at a plain
answer. The first turn requires a tool call (tool_choice "required", or
Anthropic's {"type": "any"}), so even a tiny model uses the tools; the
last allowed turn forbids them (tool_choice "none"), so the loop ends.

  pasada serve -m MODEL.gguf --port 8080      # a model whose template has tool calls
  python examples/agent.py                    # openai client, http://127.0.0.1:8080
  python examples/agent.py --api anthropic --stream
  python examples/agent.py --question "What is 2**10 - 24?" --json

--json prints the whole run as one JSON object (the calls with their turn,
arguments and results, the answer) instead of the narration.
"""
import argparse
import ast
import json
import operator
import pathlib
import sys
import tempfile

TOOLS = {
    "calculate": {
        "description": "Evaluates an arithmetic expression of numbers with + - * / // % ** "
                       "and parentheses, and returns its value.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "maxLength": 64}},
            "required": ["expression"],
            "additionalProperties": False,
        },
    },
    "list_files": {
        "description": "Lists the files of the working folder with their sizes in bytes, "
                     "only those whose name ends with `suffix` when it is not empty.",
        "parameters": {
            "type": "object",
            "properties": {"suffix": {"type": "string", "maxLength": 8}},
            "required": ["suffix"],
            "additionalProperties": False,
        },
    },
}

QUESTION = ("How many .txt files are in the working folder, and what is their total size "
            "in bytes times 3?")

OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
       ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
       ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos}


def calculate(expression):
    """The value of an arithmetic expression (no names, no calls)."""
    def value(node):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in OPS:
            a, b = value(node.left), value(node.right)
            if isinstance(node.op, ast.Pow) and abs(b) > 64:
                raise ValueError("exponent too large")
            return OPS[type(node.op)](a, b)
        if isinstance(node, ast.UnaryOp) and type(node.op) in OPS:
            return OPS[type(node.op)](value(node.operand))
        raise ValueError(f"not arithmetic: {ast.dump(node)[:40]}")
    try:
        return str(value(ast.parse(expression, mode="eval").body))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError) as e:
        return f"error: {e}"


def list_files(folder, suffix):
    names = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(suffix))
    return "\n".join(f"{p.name} {p.stat().st_size}" for p in names) or "(no files)"


def make_folder():
    folder = pathlib.Path(tempfile.mkdtemp(prefix="pasada-agent-"))
    (folder / "notes.txt").write_text("Buy milk.\nCall Ana.\n")
    (folder / "todo.txt").write_text("Fix the bike.\n")
    (folder / "budget.csv").write_text("rent,900\nfood,300\n")
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(56))
    return folder


def run_tool(folder, name, arguments):
    """The tool's result as text; a bad call is an error message for the model."""
    if name not in TOOLS:
        return f"error: no tool named {name!r}"
    if not isinstance(arguments, dict):
        return "error: the arguments must be a JSON object"
    if name == "calculate":
        return calculate(str(arguments.get("expression", "")))
    return list_files(folder, str(arguments.get("suffix", "")))


# ---- the loop with the openai client ----

def openai_turn(client, args, messages, tool_choice):
    tools = [{"type": "function", "function": {"name": n, **t}} for n, t in TOOLS.items()]
    kw = dict(model=args.model, messages=messages, tools=tools, tool_choice=tool_choice,
              max_tokens=args.max_tokens, temperature=0)
    if not args.stream:
        m = client.chat.completions.create(**kw).choices[0].message
        calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
                 for c in m.tool_calls or []]
        return m.content or "", calls
    text, calls = [], {}
    for chunk in client.chat.completions.create(stream=True, **kw):
        for c in chunk.choices:
            text.append(c.delta.content or "")
            for d in c.delta.tool_calls or []:  # a call arrives in pieces, by index
                slot = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                slot["id"] = d.id or slot["id"]
                slot["name"] += (d.function and d.function.name) or ""
                slot["arguments"] += (d.function and d.function.arguments) or ""
    return "".join(text), [calls[i] for i in sorted(calls)]


def run_openai(args, folder, log):
    import openai
    client = openai.OpenAI(base_url=args.base_url.rstrip("/") + "/v1", api_key="unused")
    messages = [{"role": "system", "content": "You answer with the help of the tools."},
                {"role": "user", "content": args.question}]
    for turn in range(args.max_turns):
        choice = "required" if turn == 0 else "none" if turn == args.max_turns - 1 else "auto"
        text, calls = openai_turn(client, args, messages, choice)
        if not calls:
            return text
        messages.append({"role": "assistant", "content": text or None, "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}} for c in calls]})
        for c in calls:
            result = log(turn, c["name"], json.loads(c["arguments"]))
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})
    return None


# ---- the loop with the anthropic client ----

def run_anthropic(args, folder, log):
    import anthropic
    client = anthropic.Anthropic(base_url=args.base_url, api_key="unused")
    tools = [{"name": n, "description": t["description"], "input_schema": t["parameters"]}
             for n, t in TOOLS.items()]
    messages = [{"role": "user", "content": args.question}]
    for turn in range(args.max_turns):
        choice = {"type": "any"} if turn == 0 else {"type": "none"} \
            if turn == args.max_turns - 1 else {"type": "auto"}
        kw = dict(model=args.model, max_tokens=args.max_tokens, extra_body={"temperature": 0},
                  system="You answer with the help of the tools.", tools=tools,
                  tool_choice=choice, messages=messages)
        if args.stream:
            with client.messages.stream(**kw) as s:
                msg = s.get_final_message()
        else:
            msg = client.messages.create(**kw)
        uses = [b for b in msg.content if b.type == "tool_use"]
        if not uses:
            return "".join(b.text for b in msg.content if b.type == "text")
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": b.text} if b.type == "text" else
            {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
            for b in msg.content if b.type in ("text", "tool_use")]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": log(turn, b.name, b.input)}
            for b in uses]})
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default="http://127.0.0.1:8080")
    ap.add_argument("--model", default="default")
    ap.add_argument("--api", choices=["openai", "anthropic"], default="openai")
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--question", default=QUESTION)
    ap.add_argument("--max-turns", type=int, default=3, help="model turns at most (>= 2)")
    ap.add_argument("--max-tokens", type=int, default=128, help="per turn")
    ap.add_argument("--json", action="store_true", help="print the run as one JSON object")
    args = ap.parse_args()
    if args.max_turns < 2:
        ap.error("--max-turns must be at least 2 (a tool turn, then an answer)")
    folder = make_folder()
    calls = []

    def log(turn, name, arguments):
        result = run_tool(folder, name, arguments)
        calls.append({"turn": turn, "name": name, "arguments": arguments, "result": result})
        if not args.json:
            print(f"-> {name}({json.dumps(arguments)})\n   {result.replace(chr(10), chr(10) + '   ')}")
        return result

    if not args.json:
        print(f"question: {args.question}")
    answer = (run_anthropic if args.api == "anthropic" else run_openai)(args, folder, log)
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()
    if args.json:
        print(json.dumps({"api": args.api, "stream": args.stream, "calls": calls, "answer": answer}))
    else:
        print(f"answer: {answer}")
    return 0 if answer is not None else 1


if __name__ == "__main__":
    sys.exit(main())
