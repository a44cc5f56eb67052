#!/usr/bin/env python3
"""Renders the reference cases of tests/chat/references with jinja2 configured exactly as Hugging Face
transformers' apply_chat_template does (transformers/utils/chat_template_utils.py):

  ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                extensions=[AssistantTracker, jinja2.ext.loopcontrols])
  filters["tojson"]       = json.dumps(x, ensure_ascii=False, indent, separators, sort_keys)
  globals["raise_exception"] raises TemplateError
  globals["strftime_now"]  = datetime.now().strftime(fmt)   (here: a fixed instant, see NOW_UNIX)
  render(messages=..., tools=<list or None>, documents=None, add_generation_prompt=...,
         **special_tokens_map, **template_kwargs)

Usage: python3 make_references.py            # rewrites cases/<name>.json and cases/<name>.txt
       python3 make_references.py --check    # verifies the committed files (exit 1 on a difference)
Needs only python3 and python3-jinja2 (Debian); prints the jinja2 version it used.
"""
import json
import os
import sys
from datetime import datetime, timezone

import jinja2
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
# strftime_now's clock for every case: 2026-03-05 12:00:00 UTC ("05 Mar 2026" with "%d %b %Y").
NOW_UNIX = 1772712000


class AssistantTracker(Extension):
    """transformers' {% generation %} tag: renders its body unchanged (the mask bookkeeping is unused)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.fromtimestamp(NOW_UNIX, tz=timezone.utc).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


# Special tokens as each tokenizer's special_tokens_map gives them to the template.
LLAMA3 = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
MISTRAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
GEMMA3 = {"bos_token": "<bos>", "eos_token": "<end_of_turn>", "unk_token": "<unk>", "pad_token": "<pad>"}

T_LLAMA31 = "templates/meta-llama-Llama-3.1-8B-Instruct.jinja"
T_LLAMA32 = "templates/meta-llama-Llama-3.2-3B-Instruct.jinja"
T_MISTRAL = "templates/mistralai-Mistral-7B-Instruct-v0.3.jinja"
T_GEMMA3 = "templates/google-gemma-3-it.jinja"

WEATHER = {"type": "function", "function": {
    "name": "get_current_temperature",
    "description": "Get the current temperature at a location.",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "The location, in the format \"City, Country\""},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "The unit."}},
        "required": ["location", "unit"]},
    "return": {"type": "number", "description": "The temperature, as a float."}}}
SEARCH = {"type": "function", "function": {
    "name": "search_web",
    "description": "Search the web; returns the top results. Ünïcode ✓ & <tags>.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                     "max_results": {"type": "integer", "minimum": 1}},
                   "required": ["query"]}}}

SYS = {"role": "system", "content": "  You are a concise assistant. Answer in English.\n"}
U1 = {"role": "user", "content": "Hello! Who are you?"}
A1 = {"role": "assistant", "content": "I am an assistant. How can I help?"}
U2 = {"role": "user", "content": "  What's 2 + 2?  \n"}
UW = {"role": "user", "content": "What's the temperature in Paris right now?"}


def call(name, args, cid=None):
    c = {"type": "function", "function": {"name": name, "arguments": args}}
    if cid is not None:
        c = {"id": cid, **c}
    return c


def llama_cases(prefix, template):
    call_msg = {"role": "assistant", "tool_calls": [call("get_current_temperature",
                                                          {"location": "Paris, France", "unit": "celsius"})]}
    cases = [
        ("user", [U1], None, True, {}),
        ("user-nogen", [U1], None, False, {}),
        ("system-multiturn", [SYS, U1, A1, U2], None, True, {}),
        ("tools-system-user", [SYS, UW], [WEATHER, SEARCH], True, {}),
        ("tools-call-result", [SYS, UW, call_msg,
                               {"role": "tool", "content": "22.5"},
                               {"role": "assistant", "content": "It is 22.5 °C in Paris."},
                               {"role": "user", "content": "Thanks!"}], [WEATHER], True, {}),
        ("tools-in-system", [SYS, UW], [WEATHER], True, {"tools_in_user_message": False}),
        ("ipython-result-object", [UW, call_msg,
                                   {"role": "ipython", "content": {"temperature": 22.5, "unit": "celsius"}}],
         [WEATHER], True, {}),
        ("date-string", [SYS, U1], None, True, {"date_string": "01 Jan 2025"}),
    ]
    if prefix == "llama3.1":
        search_call = {"role": "assistant", "tool_calls": [call("brave_search", {"query": "weather in Paris"})]}
        cases.append(("builtin-tools-python-tag",
                      [SYS, {"role": "user", "content": "Search the weather in Paris."}, search_call,
                       {"role": "ipython", "content": "Sunny, 22 C"}],
                      None, True, {"builtin_tools": ["brave_search", "wolfram_alpha", "code_interpreter"]}))
    return [(f"{prefix}-{n}", template, m, t, g, {**LLAMA3, **v}) for n, m, t, g, v in cases]


def mistral_cases():
    c1 = {"role": "assistant", "tool_calls": [call("get_current_temperature",
                                                    {"location": "Paris, France", "unit": "celsius"}, "abcDEF123")]}
    c2 = {"role": "assistant", "tool_calls": [
        call("get_current_temperature", {"location": "Paris, France", "unit": "celsius"}, "call00001"),
        call("search_web", {"query": "Paris events"}, "call00002")]}
    cases = [
        ("user", [U1], None, True),
        ("system-user", [SYS, U1], None, True),
        ("system-multiturn", [SYS, U1, A1, U2], None, False),
        ("tools-user", [UW], [WEATHER, SEARCH], True),
        ("tools-system-call-result", [SYS, UW, c1,
                                      {"role": "tool", "tool_call_id": "abcDEF123", "content": "22.5"},
                                      {"role": "assistant", "content": "It is 22.5 °C in Paris.  "},
                                      {"role": "user", "content": "And in Lyon?"}], [WEATHER], True),
        ("tools-parallel-calls", [UW, c2,
                                  {"role": "tool", "tool_call_id": "call00001", "content": "22.5"},
                                  {"role": "tool", "tool_call_id": "call00002",
                                   "content": "{\"events\": [\"Fête\"]}"}], [WEATHER, SEARCH], True),
        ("tool-result-object", [UW, c1,
                                {"role": "tool", "tool_call_id": "abcDEF123",
                                 "content": {"content": "22.5 celsius"}}], [WEATHER], True),
    ]
    return [(f"mistral-v0.3-{n}", T_MISTRAL, m, t, g, dict(MISTRAL)) for n, m, t, g in cases]


def gemma_cases():
    parts = {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "  Describe this image. "}]}
    cases = [
        ("user", [U1], None, True),
        ("user-nogen", [U1], None, False),
        ("system-user", [SYS, U1], None, True),
        ("system-multiturn", [SYS, U1, A1, U2], None, True),
        ("content-parts", [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]}, parts],
         None, True),
        # Gemma 3's template has no tool syntax: tools given to it change nothing.
        ("tools-ignored", [SYS, UW], [WEATHER], True),
    ]
    return [(f"gemma3-{n}", T_GEMMA3, m, t, g, dict(GEMMA3)) for n, m, t, g in cases]


# Cases whose template refuses the conversation: the reference is the error message.
def error_cases():
    bad_id = {"role": "assistant", "tool_calls": [call("get_current_temperature", {"location": "Paris"}, "short")]}
    return [
        ("mistral-v0.3-error-tool-call-id", T_MISTRAL, [UW, bad_id], [WEATHER], True, dict(MISTRAL)),
        ("mistral-v0.3-error-alternation", T_MISTRAL, [U1, U2], None, True, dict(MISTRAL)),
        ("gemma3-error-alternation", T_GEMMA3, [U1, A1, A1], None, True, dict(GEMMA3)),
        ("llama3.2-error-parallel-calls", T_LLAMA32,
         [UW, {"role": "assistant", "tool_calls": [call("a", {}), call("b", {})]}], [WEATHER], True, dict(LLAMA3)),
    ]


def render(env, spec):
    with open(os.path.join(HERE, spec["template"]), encoding="utf-8") as f:
        tmpl = env.from_string(f.read())
    return tmpl.render(messages=spec["messages"], tools=spec["tools"], documents=None,
                       add_generation_prompt=spec["add_generation_prompt"], **spec["template_vars"])


def main():
    check = "--check" in sys.argv[1:]
    env = make_env()
    out_dir = os.path.join(HERE, "cases")
    os.makedirs(out_dir, exist_ok=True)
    specs = []
    for name, template, messages, tools, gen, tvars in (llama_cases("llama3.1", T_LLAMA31) +
                                                       llama_cases("llama3.2", T_LLAMA32) +
                                                       mistral_cases() + gemma_cases()):
        specs.append(({"name": name, "template": template, "messages": messages, "tools": tools,
                       "add_generation_prompt": gen, "template_vars": tvars, "now_unix": NOW_UNIX}, False))
    for name, template, messages, tools, gen, tvars in error_cases():
        specs.append(({"name": name, "template": template, "messages": messages, "tools": tools,
                       "add_generation_prompt": gen, "template_vars": tvars, "now_unix": NOW_UNIX}, True))
    bad = 0
    for spec, is_error in specs:
        if is_error:
            try:
                render(env, spec)
                raise SystemExit(f"{spec['name']}: expected the template to raise")
            except jinja2.exceptions.TemplateError as e:
                spec["expected_error"] = str(e)
            expected = None
        else:
            expected = render(env, spec)
            spec["expected"] = expected
        text = json.dumps(spec, ensure_ascii=False, indent=1) + "\n"
        paths = [(os.path.join(out_dir, spec["name"] + ".json"), text)]
        if expected is not None:
            paths.append((os.path.join(out_dir, spec["name"] + ".txt"), expected))
        for path, content in paths:
            if check:
                with open(path, encoding="utf-8", newline="") as f:
                    if f.read() != content:
                        print(f"differs: {path}")
                        bad += 1
            else:
                with open(path, "w", encoding="utf-8", newline="") as f:
                    f.write(content)
    print(f"jinja2 {jinja2.__version__}: {len(specs)} cases {'checked' if check else 'written'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
