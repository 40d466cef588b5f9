#!/usr/bin/env python3
"""render_templates.py: the reference renderer of pasada's Jinja template tests.

Renders a chat template with Python's jinja2 configured as Hugging Face transformers'
apply_chat_template configures it: an ImmutableSandboxedEnvironment with trim_blocks,
lstrip_blocks and the loopcontrols extension, the `{% generation %}` block tag (its body is
rendered), a `tojson` filter that is json.dumps(x, ensure_ascii=False, indent=indent,
separators=separators, sort_keys=sort_keys), and the globals raise_exception(msg) and
strftime_now(fmt). The variables are those transformers passes: messages, tools (None when
there are none), documents (None), add_generation_prompt, then every other key of the
conversation (bos_token, eos_token, enable_thinking, ...); bos_token and eos_token are empty
strings when the conversation has none, as `pasada template` without a model has them.

strftime_now uses the current local time, or PASADA_TEMPLATE_NOW (unix seconds) when it is
set, as pasada does.

Usage: render_templates.py TEMPLATE CONVERSATION.json [--tools TOOLS.json]
                           [--no-generation-prompt]
prints the rendered prompt on stdout; a template error is one line on stderr, exit 1.
Importable: render(source, conversation, tools=None, add_generation_prompt=True), or
compile_template(source) once and render_compiled(template, conversation, ...) per case."""
import argparse
import datetime
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox


class _Generation(jinja2.ext.Extension):
    """{% generation %}...{% endgeneration %}: transformers' assistant-mask marker; renders
    its body (as transformers' AssistantTracker does, as a call block)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_body", [])
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _body(self, caller):
        return caller()


def _now():
    fixed = os.environ.get("PASADA_TEMPLATE_NOW")
    if fixed:
        return datetime.datetime.fromtimestamp(int(fixed))
    return datetime.datetime.now()


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(fmt):
    return _now().strftime(fmt)


def environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


def variables(conversation, tools=None, add_generation_prompt=True):
    """The render's variables, in the order transformers passes them."""
    extra = {k: v for k, v in conversation.items() if k != "messages"}
    out = {"messages": conversation.get("messages", []), "tools": tools, "documents": None,
           "add_generation_prompt": add_generation_prompt}
    out.update({"bos_token": "", "eos_token": ""})
    out.update(extra)
    return out


def compile_template(source):
    """The compiled template (raises on a syntax error)."""
    return environment().from_string(source)


def render_compiled(template, conversation, tools=None, add_generation_prompt=True):
    """The rendered text of a compiled template; raises on a template error."""
    return template.render(**variables(conversation, tools, add_generation_prompt))


def render(source, conversation, tools=None, add_generation_prompt=True):
    """The rendered text; raises on a template error (jinja2's own exceptions, or a Python
    one such as TypeError from an operation the template does)."""
    return render_compiled(compile_template(source), conversation, tools, add_generation_prompt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("template")
    ap.add_argument("conversation")
    ap.add_argument("--tools")
    ap.add_argument("--no-generation-prompt", action="store_true")
    a = ap.parse_args()
    with open(a.template, encoding="utf-8") as f:
        source = f.read()
    with open(a.conversation, encoding="utf-8") as f:
        conversation = json.load(f)
    tools = None
    if a.tools:
        with open(a.tools, encoding="utf-8") as f:
            tools = json.load(f)
    try:
        out = render(source, conversation, tools, not a.no_generation_prompt)
    except Exception as e:  # a template error of any kind: one line, as pasada prints it
        print(f"render_templates: {type(e).__name__}: {e}".replace("\n", " "), file=sys.stderr)
        return 1
    sys.stdout.buffer.write(out.encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
