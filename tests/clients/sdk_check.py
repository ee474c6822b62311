#!/usr/bin/env python3
"""Drives a lockstep server through the unmodified `openai` and `anthropic` SDKs and checks what they read back."""
import argparse
import base64
import json
import sys
import traceback

import anthropic
import openai

WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
OPENAI_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.", "parameters": WEATHER_SCHEMA}}
ANTHROPIC_TOOL = {"name": "get_weather", "description": "The weather in a city.", "input_schema": WEATHER_SCHEMA}


def expect(cond, what):
    """Raises AssertionError with `what` unless `cond`."""
    if not cond:
        raise AssertionError(what)


def is_sha(v):
    """Whether `v` is 64 lowercase-or-uppercase hex digits."""
    return isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdefABCDEF" for c in v)


def extra(obj, name):
    """A field the SDK's model does not declare, read from `model_extra` or as an attribute."""
    got = (getattr(obj, "model_extra", None) or {}).get(name)
    return got if got is not None else getattr(obj, name, None)


class Checks:
    """The checks, sharing two clients and what earlier checks saw."""

    def __init__(self, url, key, model):
        self.model = model
        self.oa = openai.OpenAI(base_url=url.rstrip("/") + "/v1", api_key=key, max_retries=0, timeout=120)
        self.an = anthropic.Anthropic(base_url=url.rstrip("/"), api_key=key, max_retries=0, timeout=120)
        self.url = url
        self.key = key
        self.chat_args = dict(model=model, messages=[{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hello to the SDK check."}],
                              max_tokens=8, seed=3, temperature=0)
        self.chat_content = None
        self.notes = []

    def chat(self):
        """(a) a whole chat completion: a message, integer cached_tokens, and lockstep.token_sha in the raw JSON."""
        raw = self.oa.chat.completions.with_raw_response.create(**self.chat_args)
        expect(raw.status_code == 200, "status %s" % raw.status_code)
        resp = raw.parse()
        body = json.loads(raw.text)
        expect(len(resp.choices) == 1, "want one choice, got %r" % resp.choices)
        msg = resp.choices[0].message
        expect(msg is not None and msg.role == "assistant", "choices[0].message is %r" % msg)
        expect(isinstance(msg.content, str), "message.content is %r" % msg.content)
        expect(resp.choices[0].finish_reason in ("stop", "length"), "finish_reason %r" % resp.choices[0].finish_reason)
        cached = resp.usage.prompt_tokens_details.cached_tokens
        expect(isinstance(cached, int) and not isinstance(cached, bool), "cached_tokens is %r" % cached)
        expect(resp.usage.completion_tokens <= 8, "completion_tokens %d > max_tokens 8" % resp.usage.completion_tokens)
        ls = body.get("lockstep") or {}
        expect(is_sha(ls.get("token_sha")), "raw lockstep.token_sha is %r" % ls.get("token_sha"))
        expect(ls.get("seed") == 3, "lockstep.seed is %r, want 3" % ls.get("seed"))
        expect(is_sha((extra(resp, "lockstep") or {}).get("token_sha")), "parsed reply lacks lockstep.token_sha")
        self.chat_content = msg.content
        self.chat_sha = ls["token_sha"]

    def chat_stream(self):
        """(b) the same chat streamed with usage: the same content, and usage on the last chunk."""
        stream = self.oa.chat.completions.create(**self.chat_args, stream=True, stream_options={"include_usage": True})
        chunks = list(stream)
        expect(chunks, "no chunks")
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        reasons = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
        expect(reasons in (["stop"], ["length"]), "finish reasons %r" % reasons)
        expect(content == self.chat_content, "streamed content %r != whole %r" % (content, self.chat_content))
        last = chunks[-1]
        expect(last.usage is not None, "the last chunk has no usage: %r" % last)
        expect(isinstance(last.usage.prompt_tokens_details.cached_tokens, int), "streamed usage lacks cached_tokens")
        sha = next((extra(c, "lockstep") or {}).get("token_sha") for c in reversed(chunks) if extra(c, "lockstep"))
        expect(sha == self.chat_sha, "streamed token_sha %r != whole %r" % (sha, self.chat_sha))

    def completions(self):
        """(c) a legacy completion whole and streamed: the same text."""
        args = dict(model=self.model, prompt="Hello world", max_tokens=8, seed=3, temperature=1)
        whole = self.oa.completions.create(**args)
        expect(len(whole.choices) == 1, "want one choice")
        text = whole.choices[0].text
        expect(isinstance(text, str), "text is %r" % text)
        sha = (extra(whole, "lockstep") or {}).get("token_sha")
        expect(is_sha(sha), "no lockstep.token_sha on the completion")
        chunks = list(self.oa.completions.create(**args, stream=True))
        streamed = "".join(c.choices[0].text for c in chunks if c.choices)
        expect(streamed == text, "streamed text %r != whole %r" % (streamed, text))
        ssha = next((extra(c, "lockstep") or {}).get("token_sha") for c in reversed(chunks) if extra(c, "lockstep"))
        expect(ssha == sha, "streamed token_sha %r != whole %r" % (ssha, sha))

    def cached(self):
        """(d) a chat sent twice: the second reports cached prompt tokens."""
        args = dict(self.chat_args, messages=[{"role": "user", "content": "Count the cached tokens of this prompt, please."}])
        first = self.oa.chat.completions.create(**args)
        second = self.oa.chat.completions.create(**args)
        c = second.usage.prompt_tokens_details.cached_tokens
        expect(isinstance(c, int) and c > 0, "second request cached_tokens is %r" % c)
        expect(c <= second.usage.prompt_tokens, "cached_tokens %d > prompt_tokens %d" % (c, second.usage.prompt_tokens))
        expect(first.choices[0].message.content == second.choices[0].message.content, "the cached reply differs from the first")
        a, b = extra(first, "lockstep")["token_sha"], extra(second, "lockstep")["token_sha"]
        expect(a == b, "token_sha differs after a cache hit: %s vs %s" % (a, b))

    def tools(self):
        """(e) a named tool choice, then a follow-up turn carrying a tool call and its result."""
        ask = [{"role": "user", "content": "What is the weather in Paris?"}]
        resp = self.oa.chat.completions.create(model=self.model, messages=ask, tools=[OPENAI_TOOL], max_tokens=8, seed=3, temperature=1,
                                               tool_choice={"type": "function", "function": {"name": "get_weather"}})
        ch = resp.choices[0]
        if ch.finish_reason == "tool_calls":
            calls = ch.message.tool_calls or []
            expect(calls and calls[0].function.name == "get_weather", "tool_calls finish without a get_weather call: %r" % calls)
            json.loads(calls[0].function.arguments)
            expect(calls[0].id, "the tool call has no id")
            self.notes.append("named tool choice: parsed tool call %s(%s)" % (calls[0].function.name, calls[0].function.arguments))
        else:
            expect(ch.finish_reason in ("length", "stop"), "finish_reason %r" % ch.finish_reason)
            expect(isinstance(ch.message.content, str), "no tool call and no content: %r" % ch.message)
            expect(not ch.message.tool_calls, "tool_calls with finish_reason %r" % ch.finish_reason)
            self.notes.append("named tool choice: finish_reason %s with content %r (no parsable call)" % (ch.finish_reason, ch.message.content))
        turn = ask + [
            {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        ]
        raw = self.oa.chat.completions.with_raw_response.create(model=self.model, messages=turn, tools=[OPENAI_TOOL], max_tokens=8, seed=3, temperature=1)
        expect(raw.status_code == 200, "follow-up status %s" % raw.status_code)
        follow = raw.parse()
        expect(follow.choices[0].finish_reason in ("stop", "length", "tool_calls"), "follow-up finish_reason %r" % follow.choices[0].finish_reason)
        expect(follow.choices[0].message.role == "assistant", "follow-up has no assistant message")

    def anthropic_messages(self):
        """(f) Anthropic messages whole and streamed: the same text for one seed, cache_read_input_tokens, lockstep.token_sha."""
        args = dict(model=self.model, max_tokens=8, system="You are terse.", messages=[{"role": "user", "content": "Say hello to the Anthropic SDK."}],
                    extra_body={"seed": 3, "temperature": 1})
        whole = self.an.messages.create(**args)
        expect(whole.type == "message" and whole.role == "assistant", "not an assistant message: %r" % whole)
        text = "".join(b.text for b in whole.content if b.type == "text")
        expect(whole.stop_reason in ("end_turn", "max_tokens", "stop_sequence"), "stop_reason %r" % whole.stop_reason)
        cr = whole.usage.cache_read_input_tokens
        if cr is None:
            cr = extra(whole.usage, "cache_read_input_tokens")
        expect(isinstance(cr, int), "usage.cache_read_input_tokens is %r" % cr)
        expect(whole.usage.output_tokens <= 8, "output_tokens %d > 8" % whole.usage.output_tokens)
        sha = (extra(whole, "lockstep") or {}).get("token_sha")
        expect(is_sha(sha), "no lockstep.token_sha on the message")
        expect((extra(whole, "lockstep") or {}).get("seed") == 3, "lockstep.seed is not 3")
        with self.an.messages.stream(**args) as s:
            pieces = list(s.text_stream)
            final = s.get_final_message()
        streamed = "".join(b.text for b in final.content if b.type == "text")
        expect("".join(pieces) == streamed, "text_stream %r != final message %r" % ("".join(pieces), streamed))
        expect(streamed == text, "streamed text %r != whole %r" % (streamed, text))
        expect(final.stop_reason == whole.stop_reason, "streamed stop_reason %r != whole %r" % (final.stop_reason, whole.stop_reason))
        expect(final.usage.output_tokens == whole.usage.output_tokens, "streamed output_tokens %r != whole %r" % (final.usage.output_tokens, whole.usage.output_tokens))

    def anthropic_tools(self):
        """(f) an Anthropic tool_use / tool_result round trip in the history."""
        msgs = [
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}, {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]},
        ]
        raw = self.an.messages.with_raw_response.create(model=self.model, max_tokens=8, tools=[ANTHROPIC_TOOL], messages=msgs, extra_body={"seed": 3})
        expect(raw.status_code == 200, "status %s" % raw.status_code)
        resp = raw.parse()
        expect(resp.stop_reason in ("end_turn", "max_tokens", "stop_sequence", "tool_use"), "stop_reason %r" % resp.stop_reason)
        for b in resp.content:
            if b.type == "tool_use":
                expect(b.name == "get_weather" and isinstance(b.input, dict), "bad tool_use block %r" % b)
        block_msgs = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]}]}]
        resp2 = self.an.messages.create(model=self.model, max_tokens=8, tools=[ANTHROPIC_TOOL], messages=msgs[:2] + block_msgs, extra_body={"seed": 3})
        expect(resp2.role == "assistant", "tool_result with text blocks: %r" % resp2)

    def anthropic_count(self):
        """(g) count_tokens: a positive count that grows with the prompt and matches the message's usage."""
        msgs = [{"role": "user", "content": "Count these tokens."}]
        n = self.an.messages.count_tokens(model=self.model, messages=msgs).input_tokens
        expect(isinstance(n, int) and n > 0, "input_tokens is %r" % n)
        more = self.an.messages.count_tokens(model=self.model, messages=msgs, system="A longer system prompt adds tokens.", tools=[ANTHROPIC_TOOL]).input_tokens
        expect(more > n, "system and tools did not add tokens: %d vs %d" % (more, n))
        msg = self.an.messages.create(model=self.model, max_tokens=1, messages=msgs, extra_body={"seed": 3})
        total = msg.usage.input_tokens + (msg.usage.cache_read_input_tokens or 0)
        expect(total == n, "count_tokens %d != message input %d + cache_read %s" % (n, msg.usage.input_tokens, msg.usage.cache_read_input_tokens))

    def errors(self):
        """Error replies the SDKs parse: unknown model, bad key, bad field."""
        try:
            self.oa.chat.completions.create(**dict(self.chat_args, model=self.model + "-nope"))
            raise AssertionError("an unknown model was served (openai)")
        except openai.NotFoundError as e:
            expect(isinstance(e.body, dict) and e.body.get("message"), "openai 404 body %r" % e.body)
        try:
            self.oa.chat.completions.create(**dict(self.chat_args, temperature=5))
            raise AssertionError("temperature 5 was accepted")
        except openai.BadRequestError as e:
            expect(isinstance(e.body, dict) and e.body.get("param") == "temperature", "openai 400 body %r" % e.body)
        bad = openai.OpenAI(base_url=self.url.rstrip("/") + "/v1", api_key=self.key + "-wrong", max_retries=0)
        try:
            bad.models.list()
            raise AssertionError("a wrong key was accepted (openai)")
        except openai.AuthenticationError:
            pass
        try:
            self.an.messages.create(model=self.model + "-nope", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
            raise AssertionError("an unknown model was served (anthropic)")
        except anthropic.NotFoundError as e:
            expect(isinstance(e.body, dict) and e.body.get("type") == "error" and e.body["error"].get("message"), "anthropic 404 body %r" % e.body)
        bad = anthropic.Anthropic(base_url=self.url.rstrip("/"), api_key=self.key + "-wrong", max_retries=0)
        try:
            bad.messages.count_tokens(model=self.model, messages=[{"role": "user", "content": "hi"}])
            raise AssertionError("a wrong key was accepted (anthropic)")
        except anthropic.AuthenticationError as e:
            expect(isinstance(e.body, dict) and e.body.get("type") == "error", "anthropic 401 body %r" % e.body)
        models = self.oa.models.list()
        expect(any(m.id == self.model for m in models.data), "models.list lacks %s" % self.model)


class ImageChecks:
    """Image prompts through both SDKs: an image part and an image block served, every bad image a 400 naming its fault, the server serving after."""

    def __init__(self, c, image, big, max_images):
        self.c = c
        self.b64 = base64.b64encode(open(image, "rb").read()).decode()
        self.big = base64.b64encode(open(big, "rb").read()).decode()
        self.max_images = max_images
        self.shas = {}

    def oa_args(self, parts):
        return dict(model=self.c.model, max_tokens=8, temperature=0, seed=3, messages=[{"role": "user", "content": parts + [{"type": "text", "text": "Describe the picture."}]}])

    def an_args(self, blocks):
        return dict(model=self.c.model, max_tokens=8, extra_body={"seed": 3, "temperature": 0}, messages=[{"role": "user", "content": blocks + [{"type": "text", "text": "Describe the picture."}]}])

    def part(self, data, media="image/png"):
        return {"type": "image_url", "image_url": {"url": "data:%s;base64,%s" % (media, data)}}

    def block(self, data, media="image/png"):
        return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}

    def openai_image(self):
        """An image part, whole and streamed: one reply, with more prompt tokens than the text alone."""
        whole = self.c.oa.chat.completions.create(**self.oa_args([self.part(self.b64)]))
        sha = (extra(whole, "lockstep") or {}).get("token_sha")
        expect(is_sha(sha), "no lockstep.token_sha on the image chat")
        text_only = self.c.oa.chat.completions.create(**self.oa_args([]))
        expect(whole.usage.prompt_tokens > text_only.usage.prompt_tokens + 3, "the image added %d prompt tokens" % (whole.usage.prompt_tokens - text_only.usage.prompt_tokens))
        chunks = list(self.c.oa.chat.completions.create(stream=True, **self.oa_args([self.part(self.b64)])))
        streamed = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        expect(streamed == (whole.choices[0].message.content or ""), "streamed %r != whole %r" % (streamed, whole.choices[0].message.content))
        self.shas["openai"] = sha

    def anthropic_image(self):
        """An image block, whole and streamed: one reply."""
        whole = self.c.an.messages.create(**self.an_args([self.block(self.b64)]))
        sha = (extra(whole, "lockstep") or {}).get("token_sha")
        expect(is_sha(sha), "no lockstep.token_sha on the image message")
        with self.c.an.messages.stream(**self.an_args([self.block(self.b64)])) as s:
            streamed = "".join(s.text_stream)
        text = "".join(b.text for b in whole.content if b.type == "text")
        expect(streamed == text, "streamed %r != whole %r" % (streamed, text))
        n = self.c.an.messages.count_tokens(model=self.c.model, messages=self.an_args([self.block(self.b64)])["messages"]).input_tokens
        expect(n == whole.usage.input_tokens + (whole.usage.cache_read_input_tokens or 0), "count_tokens %d != the message's input tokens" % n)
        self.shas["anthropic"] = sha

    def bad_images(self):
        """Truncated, not an image, too many pixels, too many images: a 400 from each SDK naming the fault."""
        cases = [("truncated", self.b64[:120], "cannot decode"), ("not an image", base64.b64encode(b"plain text, no picture").decode(), "not an image"),
                 ("too many pixels", self.big, "--max-image-pixels")]
        for name, data, want in cases:
            for api, call, err in (("openai", lambda: self.c.oa.chat.completions.create(**self.oa_args([self.part(data)])), openai.BadRequestError),
                                   ("anthropic", lambda: self.c.an.messages.create(**self.an_args([self.block(data)])), anthropic.BadRequestError)):
                try:
                    call()
                    raise AssertionError("%s: a %s image was served" % (api, name))
                except err as e:
                    expect(want in str(e), "%s %s: %s lacks %r" % (api, name, e, want))
        many = [self.part(self.b64)] * (self.max_images + 1)
        try:
            self.c.oa.chat.completions.create(**self.oa_args(many))
            raise AssertionError("openai: %d images were served" % len(many))
        except openai.BadRequestError as e:
            expect("--max-images" in str(e), "too many images: %s" % e)
        try:
            self.c.an.messages.create(**self.an_args([self.block(self.b64)] * (self.max_images + 1)))
            raise AssertionError("anthropic: too many images were served")
        except anthropic.BadRequestError as e:
            expect("--max-images" in str(e), "too many images: %s" % e)
        again = self.c.oa.chat.completions.create(**self.oa_args([self.part(self.b64)]))
        expect((extra(again, "lockstep") or {}).get("token_sha") == self.shas.get("openai"), "the image chat after the bad ones differs")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--url", default="http://127.0.0.1:8080", help="the server's base address, without /v1")
    ap.add_argument("--api-key", default="none")
    ap.add_argument("--model", required=True)
    ap.add_argument("--image", help="check image prompts only, with this PNG")
    ap.add_argument("--big-image", help="a PNG over the server's --max-image-pixels")
    ap.add_argument("--max-images", type=int, default=4, help="the server's --max-images")
    args = ap.parse_args()
    c = Checks(args.url, args.api_key, args.model)
    if args.image:
        ic = ImageChecks(c, args.image, args.big_image, args.max_images)
        order = [("openai_image", ic.openai_image), ("anthropic_image", ic.anthropic_image), ("bad_images", ic.bad_images)]
    else:
        order = [("chat", c.chat), ("chat_stream", c.chat_stream), ("completions", c.completions), ("cached", c.cached),
                 ("tools", c.tools), ("anthropic_messages", c.anthropic_messages), ("anthropic_tools", c.anthropic_tools),
                 ("anthropic_count", c.anthropic_count), ("errors", c.errors)]
        ic = None
    failed = []
    for name, fn in order:
        try:
            fn()
            print("ok " + name, flush=True)
        except Exception as e:
            failed.append(name)
            print("FAIL %s: %s: %s" % (name, type(e).__name__, e), flush=True)
            traceback.print_exc()
    for n in c.notes:
        print("note " + n)
    print(json.dumps({"checks": len(order), "ok": len(order) - len(failed), "failed": failed, "image_shas": ic.shas if ic else None}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
