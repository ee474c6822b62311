#!/usr/bin/env python3
"""Sends malformed requests to a lockstep server; each must be a 4xx with an error body in its API's shape."""
import argparse
import http.client
import json
import socket
import sys
import urllib.parse

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
COUNT = "/v1/messages/count_tokens"
TOKENIZE = "/tokenize"
DETOKENIZE = "/detokenize"
MODELS = "/v1/models"
BODY_LIMIT = 8 << 20


class Case:
    """One request and what its reply must be."""

    def __init__(self, name, path, body=None, method="POST", auth="good", want=None, shape="auto", raw=None):
        self.name = name
        self.path = path
        self.method = method
        self.auth = auth
        self.want = want
        if raw is not None:
            self.body = raw
        elif body is None:
            self.body = None
        else:
            self.body = json.dumps(body).encode()
        if shape == "auto":
            shape = "anthropic" if path.startswith(MESSAGES) else "openai"
        self.shape = shape


class Client:
    """Raw HTTP against one server, a fresh connection per request."""

    def __init__(self, url, key, timeout):
        u = urllib.parse.urlsplit(url)
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.https = u.scheme == "https"
        self.base = u.path.rstrip("/")
        self.key = key
        self.timeout = timeout

    def send(self, method, path, body=None, auth="good", headers=None):
        """Returns (status, body bytes); raises OSError or http.client errors on a broken exchange."""
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=self.timeout)
        try:
            conn.putrequest(method, self.base + path, skip_accept_encoding=True)
            h = {"Accept": "application/json"}
            if body is not None:
                h["Content-Type"] = "application/json"
                h["Content-Length"] = str(len(body))
            if auth == "good":
                h["Authorization"] = "Bearer " + self.key
            elif auth == "good-x":
                h["x-api-key"] = self.key
            elif auth == "wrong-bearer":
                h["Authorization"] = "Bearer " + self.key + "-wrong"
            elif auth == "wrong-x":
                h["x-api-key"] = "not-" + self.key
            elif auth == "no-scheme":
                h["Authorization"] = self.key
            elif auth == "basic":
                h["Authorization"] = "Basic " + self.key
            elif auth == "empty-bearer":
                h["Authorization"] = "Bearer "
            h.update(headers or {})
            for k, v in h.items():
                conn.putheader(k, v)
            conn.endheaders()
            if body:
                try:
                    view = memoryview(body)
                    for at in range(0, len(body), 1 << 16):
                        conn.send(view[at:at + (1 << 16)])
                except (BrokenPipeError, ConnectionResetError):
                    # the server may answer and close before the whole body is read
                    pass
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()


def error_shape_problem(shape, data):
    """None when `data` is an error body of `shape`, else what is wrong with it."""
    try:
        v = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        return "body is not JSON (%s): %r" % (e, data[:200])
    if not isinstance(v, dict):
        return "body is not an object: %r" % (data[:200],)
    err = v.get("error")
    if not isinstance(err, dict):
        return "no `error` object: %r" % (data[:200],)
    if shape == "anthropic":
        if v.get("type") != "error":
            return "Anthropic body lacks type=error: %r" % (data[:200],)
        missing = [k for k in ("type", "message") if k not in err]
    else:
        if "type" in v:
            return "OpenAI body has a top-level `type` (Anthropic shape?): %r" % (data[:200],)
        missing = [k for k in ("message", "type", "param", "code") if k not in err]
    if missing:
        return "error lacks %s: %r" % (missing, data[:200])
    if not isinstance(err["message"], str) or not err["message"].strip():
        return "error message is not a non-empty string: %r" % (data[:200],)
    if not isinstance(err["type"], str) or not err["type"]:
        return "error type is not a non-empty string: %r" % (data[:200],)
    return None


def with_field(base, **kw):
    """A copy of `base` with fields set (a value of `...` removes the field)."""
    out = dict(base)
    for k, v in kw.items():
        if v is ...:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def build_corpus(model):
    """Every malformed case, generated from templates."""
    user = [{"role": "user", "content": "Hi"}]
    bases = {
        COMPLETIONS: {"model": model, "prompt": "Hi", "max_tokens": 1},
        CHAT: {"model": model, "messages": user, "max_tokens": 1},
        MESSAGES: {"model": model, "messages": user, "max_tokens": 1},
        COUNT: {"model": model, "messages": user},
        TOKENIZE: {"prompt": "Hi"},
        DETOKENIZE: {"tokens": [1, 2]},
    }
    cases = []
    add = cases.append
    generating = (COMPLETIONS, CHAT, MESSAGES)

    # bodies that are not JSON objects
    for path, base in bases.items():
        text = json.dumps(base)
        raws = {
            "empty body": b"",
            "whitespace body": b"  \n ",
            "truncated": text[:-1].encode(),
            "truncated mid-key": text[: len(text) // 2].encode(),
            "trailing garbage": (text + " xyz").encode(),
            "two objects": (text + text).encode(),
            "single quotes": text.replace('"', "'").encode(),
            "NaN literal": text.replace("{", '{"temperature": NaN, ', 1).encode(),
            "Infinity literal": text.replace("{", '{"temperature": Infinity, ', 1).encode(),
            "-Infinity literal": text.replace("{", '{"temperature": -Infinity, ', 1).encode(),
            "trailing comma": text.replace("}", ",}", 1).encode() if text.endswith("}") else b"{,}",
            "invalid UTF-8 in a string": text.replace('"Hi"', '"H\xff"').encode("latin-1") if '"Hi"' in text else b'{"tokens": "\xff\xfe"}',
            "invalid UTF-8 bare bytes": b"\xff\xfe\xfd",
            "overlong UTF-8": b'{"model": "\xc0\xaf"}',
            "lone surrogate escape": b'{"model": "\\ud800"}',
            "top-level array": b"[]",
            "top-level array of body": ("[" + text + "]").encode(),
            "top-level number": b"42",
            "top-level string": b'"hello"',
            "top-level null": b"null",
            "top-level true": b"true",
        }
        for name, raw in raws.items():
            add(Case("%s: %s" % (path, name), path, raw=raw, want=400))

    # wrong types, field by field
    number = ["1", True, [1], {"x": 1}]
    integer = ["1", True, 1.5, [1]]
    boolean = ["true", 1, [True]]
    string = [5, ["x"], {"x": 1}, True]
    obj = ["x", 5, [1]]
    sampling = {"temperature": number, "top_p": number, "min_p": number, "presence_penalty": number,
                "frequency_penalty": number, "top_k": integer, "seed": integer[:3], "n": integer,
                "ignore_eos": boolean, "stream": boolean, "draft": boolean, "user": string,
                "stream_options": obj, "lockstep": obj}
    typed = {
        COMPLETIONS: dict(sampling, model=string, max_tokens=integer, stop=[5, [1], {"a": 1}],
                          logprobs=["1", True, 1.5], echo=["false", 0], suffix=[5, ["x"]], best_of=["1", 1.5],
                          prompt=[5, {"x": 1}, True, [1.5], ["a", "b"], [["a"]]]),
        CHAT: dict(sampling, model=string, max_tokens=integer, max_completion_tokens=integer,
                   stop=[5, [1], {"a": 1}], logprobs=["true", 1], top_logprobs=["1", 1.5],
                   messages=["Hi", {"role": "user"}, 5], tools=["x", {"type": "function"}, 5],
                   tool_choice=[5, ["auto"], True], reasoning_effort=[5, ["low"]],
                   chat_template_kwargs=obj, response_format=["text", 5], parallel_tool_calls=["yes", 1]),
        MESSAGES: dict(sampling, model=string, max_tokens=integer, stop_sequences=[5, [1], {"a": 1}],
                       messages=["Hi", {"role": "user"}, 5], system=[5, {"x": 1}, True],
                       tools=["x", {"name": "f"}, 5], tool_choice=["auto", 5, ["auto"]], thinking=obj),
        COUNT: dict(model=string, messages=["Hi", {"role": "user"}, 5], system=[5, True],
                    tools=["x", 5], tool_choice=["auto", 5], thinking=obj),
        TOKENIZE: dict(prompt=[5, ["a", "b"], {"x": 1}], add_special_tokens=["yes", 1]),
        DETOKENIZE: dict(tokens=["x", 5, {"x": 1}, ["a"], [1.5]]),
    }
    for path, fields in typed.items():
        for field, values in fields.items():
            for v in values:
                body = with_field(bases[path], **{field: v})
                add(Case("%s: %s = %s" % (path, field, json.dumps(v)), path, body))

    # numbers out of range, and fractions where integers belong
    ranges = [("temperature", -1), ("temperature", 3), ("temperature", 1e300),
              ("top_p", 0), ("top_p", 1.5), ("top_p", -0.5), ("min_p", 2), ("min_p", -0.1),
              ("presence_penalty", 3), ("presence_penalty", -3), ("frequency_penalty", 3), ("frequency_penalty", -3),
              ("max_tokens", 0), ("max_tokens", -5), ("max_tokens", 1e12), ("max_tokens", 10 ** 12), ("max_tokens", 1.5),
              ("top_k", -2), ("top_k", 2.5), ("n", 2), ("n", 0), ("n", 1.5), ("seed", 1.5), ("seed", 2 ** 70),
              ("repetition_penalty", 1.2)]
    for path in generating:
        for field, v in ranges:
            add(Case("%s: %s = %r" % (path, field, v), path, with_field(bases[path], **{field: v})))
    for v in (21, -1, 2.5):
        add(Case("%s: logprobs = %r" % (COMPLETIONS, v), COMPLETIONS, with_field(bases[COMPLETIONS], logprobs=v)))
    for v in (99, 21, -1):
        add(Case("%s: top_logprobs = %r" % (CHAT, v), CHAT, with_field(bases[CHAT], logprobs=True, top_logprobs=v)))
    add(Case("%s: top_logprobs without logprobs" % CHAT, CHAT, with_field(bases[CHAT], top_logprobs=2)))
    for v in (0, -5, 1.5):
        add(Case("%s: max_completion_tokens = %r" % (CHAT, v), CHAT, with_field(bases[CHAT], max_completion_tokens=v)))
    for path, stop in ((COMPLETIONS, "stop"), (CHAT, "stop"), (MESSAGES, "stop_sequences")):
        add(Case("%s: 17 %s" % (path, stop), path, with_field(bases[path], **{stop: ["s%d" % i for i in range(17)]})))
        add(Case("%s: empty %s entry" % (path, stop), path, with_field(bases[path], **{stop: ["a", ""]})))
    add(Case("%s: echo true" % COMPLETIONS, COMPLETIONS, with_field(bases[COMPLETIONS], echo=True)))
    add(Case("%s: suffix" % COMPLETIONS, COMPLETIONS, with_field(bases[COMPLETIONS], suffix="tail")))
    add(Case("%s: best_of 2" % COMPLETIONS, COMPLETIONS, with_field(bases[COMPLETIONS], best_of=2)))
    for path in (COMPLETIONS, CHAT):
        add(Case("%s: logit_bias" % path, path, with_field(bases[path], logit_bias={"15": 5})))
        add(Case("%s: logit_bias list" % path, path, with_field(bases[path], logit_bias=[1])))

    # errors that must come back as JSON before any stream starts
    for path in generating:
        base = with_field(bases[path], stream=True)
        for name, kw in (("temperature 3", {"temperature": 3}), ("unknown field", {"foo": 1}), ("max_tokens 0", {"max_tokens": 0}),
                         ("include_usage string", {"stream_options": {"include_usage": "yes"}})):
            add(Case("%s: streamed with %s" % (path, name), path, with_field(base, **kw), want=400))
        add(Case("%s: streamed with unknown model" % path, path, with_field(base, model=model + "-nope"), want=404))
        long_kw = {"prompt": [7] * 600} if path == COMPLETIONS else {"messages": [{"role": "user", "content": "word " * 2000}]}
        add(Case("%s: streamed over the context" % path, path, with_field(base, **long_kw), want=400))

    # missing required fields
    for path, fields in ((COMPLETIONS, ["model", "prompt"]), (CHAT, ["model", "messages"]),
                         (MESSAGES, ["model", "messages", "max_tokens"]), (COUNT, ["model", "messages"]),
                         (DETOKENIZE, ["tokens"]), (TOKENIZE, ["prompt"])):
        for field in fields:
            add(Case("%s: missing %s" % (path, field), path, with_field(bases[path], **{field: ...})))
            add(Case("%s: null %s" % (path, field), path, with_field(bases[path], **{field: None})))
    add(Case("%s: empty object" % COMPLETIONS, COMPLETIONS, {}))
    add(Case("%s: prompt and messages" % TOKENIZE, TOKENIZE, {"prompt": "a", "messages": user}))

    # unknown fields, top level and nested
    for path, base in bases.items():
        for k in ("foo", "Model", "max-tokens", ""):
            add(Case("%s: unknown field %r" % (path, k), path, with_field(base, **{k: 1}), want=400))
    for path in generating:
        add(Case("%s: unknown stream_options field" % path, path, with_field(bases[path], stream_options={"include_usage": True, "x": 1}), want=400))
        add(Case("%s: unknown lockstep field" % path, path, with_field(bases[path], lockstep={"logits_sha": True, "x": 1}), want=400))
        add(Case("%s: stream_options.include_usage string" % path, path, with_field(bases[path], stream_options={"include_usage": "yes"})))
        add(Case("%s: lockstep.logits_sha number" % path, path, with_field(bases[path], lockstep={"logits_sha": 1})))
    add(Case("%s: unknown chat_template_kwargs field" % CHAT, CHAT, with_field(bases[CHAT], chat_template_kwargs={"x": 1}), want=400))
    add(Case("%s: unknown thinking field" % MESSAGES, MESSAGES, with_field(bases[MESSAGES], thinking={"type": "enabled", "x": 1}), want=400))

    # unknown model
    for path in (COMPLETIONS, CHAT, MESSAGES, COUNT):
        for name in (model + "-nope", "", model.upper() if model.upper() != model else model + "X"):
            add(Case("%s: unknown model %r" % (path, name), path, with_field(bases[path], model=name), want=404))

    # roles and message shapes
    for role in ("robot", "function", "System", ""):
        add(Case("%s: role %r" % (CHAT, role), CHAT, with_field(bases[CHAT], messages=[{"role": role, "content": "Hi"}])))
    for role in ("system", "tool", "developer", "robot"):
        add(Case("%s: role %r" % (MESSAGES, role), MESSAGES, with_field(bases[MESSAGES], messages=[{"role": role, "content": "Hi"}])))
    for path in (CHAT, MESSAGES, COUNT):
        base = bases[path]
        add(Case("%s: empty messages" % path, path, with_field(base, messages=[])))
        add(Case("%s: message without role" % path, path, with_field(base, messages=[{"content": "Hi"}])))
        add(Case("%s: message is a string" % path, path, with_field(base, messages=["Hi"])))
        add(Case("%s: role is a number" % path, path, with_field(base, messages=[{"role": 1, "content": "Hi"}])))
        add(Case("%s: content is a number" % path, path, with_field(base, messages=[{"role": "user", "content": 5}])))
        add(Case("%s: content is an object" % path, path, with_field(base, messages=[{"role": "user", "content": {"text": "Hi"}}])))

    # bad content parts (OpenAI) and blocks (Anthropic)
    parts = {
        "part without type": [{"text": "Hi"}],
        "part type number": [{"type": 5, "text": "Hi"}],
        "unknown part type": [{"type": "audio", "input_audio": {"data": "", "format": "wav"}}],
        "text part without text": [{"type": "text"}],
        "text part with number text": [{"type": "text", "text": 5}],
        "part is a string": ["Hi"],
        "image_url part": [{"type": "text", "text": "what is this"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}],
        "input_image part": [{"type": "input_image", "image_url": "https://example.com/a.png"}],
        "image part": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}],
    }
    for name, content in parts.items():
        add(Case("%s: %s" % (CHAT, name), CHAT, with_field(bases[CHAT], messages=[{"role": "user", "content": content}])))
    blocks = {
        "block without type": [{"text": "Hi"}],
        "unknown block type": [{"type": "video", "text": "Hi"}],
        "text block without text": [{"type": "text"}],
        "text block number text": [{"type": "text", "text": 7}],
        "image block": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}],
        "document block": [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}],
        "tool_use in a user turn": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
        "thinking in a user turn": [{"type": "thinking", "thinking": "hmm"}],
        "tool_result without tool_use_id": [{"type": "tool_result", "content": "x"}],
        "tool_result with image content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "image", "source": {}}]}],
    }
    for path in (MESSAGES, COUNT):
        for name, content in blocks.items():
            add(Case("%s: %s" % (path, name), path, with_field(bases[path], messages=[{"role": "user", "content": content}])))
        for name, content in (("tool_result in an assistant turn", [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]),
                              ("tool_use without input", [{"type": "tool_use", "id": "t1", "name": "f"}]),
                              ("tool_use with list input", [{"type": "tool_use", "id": "t1", "name": "f", "input": [1]}]),
                              ("tool_use without name", [{"type": "tool_use", "id": "t1", "input": {}}])):
            msgs = user + [{"role": "assistant", "content": content}]
            add(Case("%s: %s" % (path, name), path, with_field(bases[path], messages=msgs)))
        add(Case("%s: message without content" % path, path, with_field(bases[path], messages=[{"role": "user"}])))
        add(Case("%s: system image block" % path, path, with_field(bases[path], system=[{"type": "image", "source": {}}])))
    tool_turns = {
        "tool message without tool_call_id": [{"role": "tool", "content": "sunny"}],
        "tool_calls not a list": [{"role": "assistant", "content": None, "tool_calls": {"id": "c"}}],
        "tool call without function": [{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function"}]}],
        "tool call without name": [{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"arguments": "{}"}}]}],
        "tool call arguments a number": [{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": 5}}]}],
    }
    for name, turns in tool_turns.items():
        add(Case("%s: %s" % (CHAT, name), CHAT, with_field(bases[CHAT], messages=user + turns)))
        add(Case("%s: %s" % (TOKENIZE, name), TOKENIZE, {"messages": user + turns}))

    # tools and tool_choice
    fn = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}
    bad_tools = {
        "tool type retrieval": [{"type": "retrieval"}],
        "tool without function": [{"type": "function"}],
        "tool with empty name": [{"type": "function", "function": {"name": ""}}],
        "tool name with a quote": [{"type": "function", "function": {"name": 'a"b'}}],
        "tool name with an angle bracket": [{"type": "function", "function": {"name": "a<b"}}],
        "tool name a number": [{"type": "function", "function": {"name": 5}}],
        "tool is a string": ["get_weather"],
    }
    for name, tools in bad_tools.items():
        add(Case("%s: %s" % (CHAT, name), CHAT, with_field(bases[CHAT], tools=tools)))
    bad_choice = {
        "tool_choice unknown string": ("sometimes", [fn]),
        "tool_choice object without function": ({"type": "function"}, [fn]),
        "tool_choice wrong object type": ({"type": "tool", "name": "get_weather"}, [fn]),
        "tool_choice names a missing tool": ({"type": "function", "function": {"name": "nope"}}, [fn]),
        "tool_choice required without tools": ("required", None),
        "tool_choice named without tools": ({"type": "function", "function": {"name": "get_weather"}}, None),
    }
    for name, (choice, tools) in bad_choice.items():
        body = with_field(bases[CHAT], tool_choice=choice, tools=tools if tools else ...)
        add(Case("%s: %s" % (CHAT, name), CHAT, body))
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        for think in ({"chat_template_kwargs": {"enable_thinking": True}}, {"chat_template_kwargs": {"thinking": True}}, {"reasoning_effort": "high"}):
            add(Case("%s: tool_choice %s in thinking mode %s" % (CHAT, json.dumps(choice), json.dumps(think)), CHAT,
                     with_field(bases[CHAT], tools=[fn], tool_choice=choice, **think), want=400))
    for v in ("extreme", "", "HIGH"):
        add(Case("%s: reasoning_effort %r" % (CHAT, v), CHAT, with_field(bases[CHAT], reasoning_effort=v)))
    add(Case("%s: chat_template_kwargs.reasoning_effort bogus" % CHAT, CHAT, with_field(bases[CHAT], chat_template_kwargs={"reasoning_effort": "bogus"})))
    add(Case("%s: chat_template_kwargs.enable_thinking string" % CHAT, CHAT, with_field(bases[CHAT], chat_template_kwargs={"enable_thinking": "yes"})))
    for rf in ({"type": "json_object"}, {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}, {}, {"type": 5}):
        add(Case("%s: response_format %s" % (CHAT, json.dumps(rf)), CHAT, with_field(bases[CHAT], response_format=rf)))
    atool = {"name": "get_weather", "description": "weather", "input_schema": {"type": "object", "properties": {}}}
    for path in (MESSAGES, COUNT):
        base = bases[path]
        for name, tools in (("tool without name", [{"input_schema": {}}]), ("tool with empty name", [{"name": "", "input_schema": {}}]),
                            ("tool without input_schema", [{"name": "f"}]), ("tool input_schema a string", [{"name": "f", "input_schema": "x"}]),
                            ("tool name with a quote", [{"name": 'a"b', "input_schema": {}}])):
            add(Case("%s: %s" % (path, name), path, with_field(base, tools=tools)))
        for name, choice, tools in (("tool_choice unknown type", {"type": "sometimes"}, [atool]), ("tool_choice without type", {"name": "get_weather"}, [atool]),
                                    ("tool_choice tool without name", {"type": "tool"}, [atool]), ("tool_choice names a missing tool", {"type": "tool", "name": "nope"}, [atool]),
                                    ("tool_choice any without tools", {"type": "any"}, None), ("tool_choice OpenAI shape", {"type": "function", "function": {"name": "get_weather"}}, [atool])):
            add(Case("%s: %s" % (path, name), path, with_field(base, tool_choice=choice, tools=tools if tools else ...)))
        for choice in ({"type": "any"}, {"type": "tool", "name": "get_weather"}):
            add(Case("%s: tool_choice %s with thinking" % (path, json.dumps(choice)), path,
                     with_field(base, tools=[atool], tool_choice=choice, thinking={"type": "enabled", "budget_tokens": 64}), want=400))
        for t in ({"type": "maybe"}, {}, {"type": "enabled", "budget_tokens": 0}, {"type": "enabled", "budget_tokens": "many"}, {"type": True}):
            add(Case("%s: thinking %s" % (path, json.dumps(t)), path, with_field(base, thinking=t)))

    # token ids outside the vocabulary, and prompts past the context
    for ids in ([10 ** 9], [-1], [1, -5], [2 ** 32 + 1], [1, 2.5], [1, "a"], [[]], [[1], [2]], [], [10 ** 30]):
        add(Case("%s: token prompt %s" % (COMPLETIONS, json.dumps(ids)), COMPLETIONS, with_field(bases[COMPLETIONS], prompt=ids)))
    for ids in ([10 ** 9], [-1], [2 ** 32 + 1]):
        add(Case("%s: tokens %s" % (DETOKENIZE, json.dumps(ids)), DETOKENIZE, {"tokens": ids}))
    long_text = " ".join("word%d" % (i % 50) for i in range(3000))
    add(Case("%s: prompt over the context (text)" % COMPLETIONS, COMPLETIONS, with_field(bases[COMPLETIONS], prompt=long_text), want=400))
    add(Case("%s: prompt over the context (600 ids)" % COMPLETIONS, COMPLETIONS, with_field(bases[COMPLETIONS], prompt=[100 + i % 500 for i in range(600)]), want=400))
    add(Case("%s: empty string prompt" % COMPLETIONS, COMPLETIONS, with_field(bases[COMPLETIONS], prompt="")))
    for path in (CHAT, MESSAGES):
        add(Case("%s: conversation over the context" % path, path, with_field(bases[path], messages=[{"role": "user", "content": long_text}]), want=400))
        add(Case("%s: system over the context" % path, path,
                 with_field(bases[path], **({"system": long_text} if path == MESSAGES else {"messages": [{"role": "system", "content": long_text}] + user})), want=400))

    # bodies over the limit
    big = "a" * (BODY_LIMIT + 1024)
    for path in (COMPLETIONS, CHAT, MESSAGES, COUNT, TOKENIZE):
        body = with_field(bases[path], **({"prompt": big} if path in (COMPLETIONS, TOKENIZE) else {"messages": [{"role": "user", "content": big}]}))
        add(Case("%s: body over 8 MiB" % path, path, body, want=413))
    add(Case("%s: 9 MiB of spaces" % CHAT, CHAT, raw=b" " * (BODY_LIMIT + (1 << 20)), want=413))

    # keys
    protected = [(p, "POST", bases[p]) for p in bases] + [(MODELS, "GET", None), ("/status", "GET", None)]
    for path, method, body in protected:
        for auth in ("none", "wrong-bearer", "wrong-x", "no-scheme", "basic", "empty-bearer"):
            add(Case("%s %s: key %s" % (method, path, auth), path, body, method=method, auth=auth, want=401))
    add(Case("GET /v1/nope: no key", "/v1/nope", method="GET", auth="none", want=401))

    # routes that do not exist
    for method, path in (("GET", "/v1/nope"), ("POST", "/v1/nope"), ("POST", "/v2/completions"), ("POST", "/v1/chat"),
                         ("POST", "/v1/messages/nope"), ("POST", "/v1/messages/count_tokens/x"), ("GET", "/ui/nope"),
                         ("POST", "/v1/completions/x"), ("GET", "/v1/models/" + model), ("POST", "/v1/embeddings"),
                         ("POST", "/v1/responses"), ("GET", "/healthz")):
        add(Case("%s %s: unknown route" % (method, path), path, bases[COMPLETIONS] if method == "POST" else None, method=method, want=404))

    # wrong methods on real routes
    for method, path in (("GET", COMPLETIONS), ("GET", CHAT), ("GET", MESSAGES), ("GET", COUNT), ("PUT", TOKENIZE),
                         ("GET", DETOKENIZE), ("DELETE", MODELS), ("POST", MODELS), ("POST", "/health"), ("PATCH", CHAT)):
        add(Case("%s %s: wrong method" % (method, path), path, method=method, shape=None))
    return cases


def run_case(client, case):
    """None when the reply is a proper refusal, else the failure; also the status (or an error name)."""
    try:
        status, data = client.send(case.method, case.path, case.body, case.auth)
    except socket.timeout:
        return "no reply within %ss (hang?)" % client.timeout, "timeout"
    except (OSError, http.client.HTTPException) as e:
        return "connection error: %s: %s" % (type(e).__name__, e), "conn-error"
    if not 400 <= status < 500:
        return "status %d, want 4xx: %r" % (status, data[:200]), status
    if case.want is not None and status != case.want:
        return "status %d, want %d: %r" % (status, case.want, data[:200]), status
    if case.shape is None:
        return None, status
    problem = error_shape_problem(case.shape, data)
    return ("status %d, %s" % (status, problem) if problem else None), status


def valid_sha(client, model, auth="good"):
    """The token_sha of a fixed, valid completion."""
    body = json.dumps({"model": model, "prompt": "Hello world", "max_tokens": 8, "temperature": 1, "seed": 11}).encode()
    status, data = client.send("POST", COMPLETIONS, body, auth)
    if status != 200:
        raise RuntimeError("the valid completion got %d: %r" % (status, data[:300]))
    v = json.loads(data)
    sha = v.get("lockstep", {}).get("token_sha")
    if not (isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha.lower())):
        raise RuntimeError("the valid completion has no 64-hex lockstep.token_sha: %r" % (data[:300],))
    return sha


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--model", required=True)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each reply")
    ap.add_argument("--verbose", action="store_true", help="print every case")
    args = ap.parse_args()
    client = Client(args.url, args.api_key, args.timeout)

    failures = []
    try:
        before = valid_sha(client, args.model)
    except Exception as e:
        print("FAIL valid request before the corpus: %s" % e)
        return 1
    cases = build_corpus(args.model)
    by_status = {}
    ok = 0
    for case in cases:
        problem, status = run_case(client, case)
        by_status[str(status)] = by_status.get(str(status), 0) + 1
        if problem:
            failures.append("%s -> %s" % (case.name, problem))
        else:
            ok += 1
        if args.verbose:
            print("%s %s [%s]" % ("FAIL" if problem else "ok  ", case.name, status))

    try:
        after = valid_sha(client, args.model, auth="good-x")
        if after != before:
            failures.append("valid request after the corpus: token_sha %s, before %s" % (after, before))
    except Exception as e:
        failures.append("valid request after the corpus: %s" % e)
    try:
        status, data = client.send("GET", "/health", auth="none")
        if status != 200:
            failures.append("GET /health after the corpus: %d %r" % (status, data[:200]))
    except Exception as e:
        failures.append("GET /health after the corpus: %s" % e)

    for f in failures:
        print("FAIL " + f)
    print(json.dumps({"cases": len(cases), "ok": ok, "failed": len(cases) - ok, "by_status": dict(sorted(by_status.items()))}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
