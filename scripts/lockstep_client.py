#!/usr/bin/env python3
"""HTTP and SSE helpers the bench tools share: requests with 429 retries, streamed chunks, the model id, common flags."""
import http.client
import json
import statistics
import sys
import time
import urllib.error
import urllib.request


class ApiError(Exception):
    """An HTTP, transport or in-stream error reported while talking to the server."""


def note(*parts):
    print(*parts, file=sys.stderr, flush=True)


def _headers(api_key):
    h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if api_key:
        h["Authorization"] = f"Bearer {api_key}"
    return h


def _error_message(err):
    try:
        raw = err.read().decode("utf-8", "replace")
    except OSError:
        return err.reason
    try:
        return json.loads(raw)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return raw[:300] or err.reason


def _retry_after(err):
    try:
        return min(30.0, max(0.1, float(err.headers.get("Retry-After", "1"))))
    except ValueError:
        return 1.0


def open_request(base, path, body, api_key, timeout, retries=3):
    """Sends a request (GET when body is None) and returns (response, send time); retries 429s."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    for attempt in range(retries + 1):
        req = urllib.request.Request(base.rstrip("/") + path, data=data, headers=_headers(api_key),
                                     method="GET" if data is None else "POST")
        t_send = time.perf_counter()
        try:
            return urllib.request.urlopen(req, timeout=timeout), t_send
        except urllib.error.HTTPError as e:
            if e.code == 429 and attempt < retries:
                wait = _retry_after(e)
                note(f"429 from {path}, retrying in {wait:g}s")
                time.sleep(wait)
                continue
            raise ApiError(f"HTTP {e.code}: {_error_message(e)}") from None
        except (urllib.error.URLError, OSError) as e:
            raise ApiError(f"transport error: {e}") from None
    raise ApiError("retries exhausted")


def request_json(base, path, body, api_key, timeout, retries=3):
    resp, _ = open_request(base, path, body, api_key, timeout, retries)
    try:
        with resp:
            return json.loads(resp.read().decode("utf-8"))
    except ValueError as e:
        raise ApiError(f"bad JSON from {path}: {e}") from None
    except (OSError, http.client.HTTPException) as e:
        raise ApiError(f"transport error reading {path}: {e!r}") from None


def delta_text(chunk):
    """The text a completions or chat chunk adds, or '' when it carries none."""
    choices = chunk.get("choices") or []
    if not choices:
        return ""
    c = choices[0]
    if "text" in c:
        return c.get("text") or ""
    d = c.get("delta") or {}
    return (d.get("content") or "") + (d.get("reasoning_content") or "")


def _sse_chunks(resp):
    """Yields each parsed `data:` JSON chunk of an SSE reply up to [DONE]; raises on an error chunk."""
    for raw in iter(resp.readline, b""):
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        try:
            chunk = json.loads(payload)
        except ValueError:
            raise ApiError(f"bad SSE payload: {payload[:200]}") from None
        if "error" in chunk:
            err = chunk["error"]
            raise ApiError(f"stream error: {err.get('message') if isinstance(err, dict) else err}")
        yield chunk
    raise ApiError("stream ended without [DONE]")


def stream_request(base, path, body, api_key, timeout, retries=3):
    """Streams an SSE reply; returns send/first/last delta times, delta count, text and the usage chunk."""
    resp, t_send = open_request(base, path, body, api_key, timeout, retries)
    t_first = t_last = None
    parts, final = [], {}
    try:
        with resp:
            for chunk in _sse_chunks(resp):
                piece = delta_text(chunk)
                if piece:
                    t_last = time.perf_counter()
                    t_first = t_last if t_first is None else t_first
                    parts.append(piece)
                if chunk.get("usage") is not None or chunk.get("lockstep") is not None:
                    final = chunk
    except (OSError, http.client.HTTPException) as e:
        raise ApiError(f"transport error mid-stream: {e!r}") from None
    return {"t_send": t_send, "t_first": t_first, "t_last": t_last, "t_end": time.perf_counter(),
            "deltas": len(parts), "text": "".join(parts), "final": final}


def resolve_model(args):
    if args.model:
        return args.model
    models = request_json(args.url, "/v1/models", None, args.api_key, args.timeout)
    try:
        return models["data"][0]["id"]
    except (KeyError, IndexError, TypeError):
        raise ApiError(f"GET /v1/models returned no model: {models}") from None


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def float_list(text):
    return [float(x) for x in text.split(",") if x.strip()]


def add_common_flags(p):
    p.add_argument("--url", default="http://127.0.0.1:8080", help="server base URL")
    p.add_argument("--api-key", default=None, help="sent as Authorization: Bearer KEY")
    p.add_argument("--model", default=None, help="model id (default: first id from GET /v1/models)")
    p.add_argument("--timeout", type=float, default=600.0, help="per-request timeout in seconds")
    p.add_argument("--seed", type=int, default=1, help="sampling seed")


