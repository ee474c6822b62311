#!/usr/bin/env python3
"""Soak test for a lockstep server on this machine: N clients send a seeded pool of request templates (three routes,
streamed or not, greedy or sampled, tools, images, shared and unique prefixes) for a bounded time, cancel some of
them mid-flight, and compare every completed reply's lockstep.token_sha with the same template's solo reply. A
sampler reads /status (and the server's RSS and fds from /proc with --server-pid) every second.

Exit 0 when every completed reply matched, nothing failed (429s are counted as refused and retried), the server went
idle at the end, the prompt cache stayed within its budget, the server's open fds returned to where they started
and its heap (the /status heap_bytes) gained no more than --heap-slack-mib beyond the cache over the second half;
1 otherwise; 2 when the run could not start (bad arguments, server unreachable, a template failing solo).
Run the server with a small --prompt-cache-gib (e.g. 0.02) to make the cache evict under load.
"""
import argparse
import base64
import http.client
import ipaddress
import json
import os
import random
import socket
import struct
import sys
import threading
import time
import urllib.parse
import zlib

WORDS = ("harbour lantern copper meadow signal river orbit granite velvet anchor thistle beacon quartz ember willow "
         "compass falcon marble cinder harvest tundra glacier saddle pepper walnut mosaic prism canyon ledger violet "
         "rocket candle summit pebble maple frost timber coral basalt heron juniper nickel oyster raven spruce").split()
TOOL_OPENAI = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
                   "required": ["city"]}}}
TOOL_ANTHROPIC = {"name": "get_weather", "description": "Current weather for a city.",
                  "input_schema": TOOL_OPENAI["function"]["parameters"]}
ROUTES = {"chat": "/v1/chat/completions", "completions": "/v1/completions", "messages": "/v1/messages"}


def note(*parts):
    print(*parts, file=sys.stderr, flush=True)


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def png(rng, width, height):
    """A seeded RGB noise PNG, built with zlib and struct."""
    rows = b"".join(b"\x00" + bytes(rng.randrange(256) for _ in range(3 * width)) for _ in range(height))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def image_part(route, data):
    b64 = base64.b64encode(data).decode("ascii")
    if route == "chat":
        return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64}}
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64}}


def follow_up(route, base, rng):
    """A later turn of a base template's conversation, so its prompt extends the base's prompt."""
    body = json.loads(json.dumps(base))
    question = f"And what about {words(rng, 4)}?"
    if route == "completions":
        body["prompt"] = base["prompt"] + f" continued with {words(rng, 12)}.\n"
        return body
    tools = "tools" in body
    if route == "chat":
        if tools:
            body["messages"] += [{"role": "assistant", "content": "", "tool_calls": [{"id": "call_0", "type": "function",
                                  "function": {"name": "get_weather", "arguments": json.dumps({"city": "Oslo"})}}]},
                                 {"role": "tool", "tool_call_id": "call_0", "content": "4 degrees and rain"}]
        else:
            body["messages"].append({"role": "assistant", "content": f"It is {words(rng, 6)}."})
        body["messages"].append({"role": "user", "content": question})
        body.pop("tool_choice", None)
        return body
    if tools:
        body["messages"] += [{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_0", "name": "get_weather", "input": {"city": "Oslo"}}]},
                             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0", "content": "4 degrees and rain"},
                                                          {"type": "text", "text": question}]}]
    else:
        body["messages"] += [{"role": "assistant", "content": f"It is {words(rng, 6)}."}, {"role": "user", "content": question}]
    body.pop("tool_choice", None)
    return body


def build_templates(seed, count, model, images):
    """A fixed pool of request templates, the same for the same seed and count."""
    rng = random.Random(seed)
    shared = "You are a careful assistant for a lighthouse museum. " + words(rng, 220) + "\n"
    pictures = [png(rng, w, h) for w, h in ((16, 16), (24, 12), (20, 28))]
    out = []
    for i in range(count):
        route = ("chat", "completions", "messages")[i % 3]
        stream = (i // 3) % 2 == 1
        greedy = (i // 6) % 2 == 0
        shares = i % 4 < 2
        system = shared if shares else f"Template {i} has its own system prompt: {words(rng, 30)}\n"
        user = f"Question {i}: tell me about {words(rng, rng.randint(3, 12))}."
        max_tokens = rng.randint(4, 48)
        earlier = [t for t in out if t["route"] == route and not t["follow_up"]]
        if i >= 6 and i % 7 == 0 and earlier:
            base = earlier[rng.randrange(len(earlier))]
            body = follow_up(route, base["body"], rng)
            info = {"follow_up": base["id"]}
        elif route == "completions":
            body = {"prompt": system + user + "\nAnswer:"}
            info = {"follow_up": None}
        else:
            content = user
            tools = (i // 2) % 4 == 0
            if images and i % 5 == 2:
                content = [{"type": "text", "text": user}, image_part(route, pictures[rng.randrange(len(pictures))])]
            if route == "chat":
                body = {"messages": [{"role": "system", "content": system}, {"role": "user", "content": content}]}
                if tools:
                    body["tools"] = [TOOL_OPENAI]
                    body["tool_choice"] = "required" if i % 3 == 0 else "auto"
            else:
                body = {"system": system, "messages": [{"role": "user", "content": content}]}
                if tools:
                    body["tools"] = [TOOL_ANTHROPIC]
                    body["tool_choice"] = {"type": "any" if i % 3 == 0 else "auto"}
            info = {"follow_up": None}
        body.update({"model": model, "max_tokens": max_tokens, "stream": stream,
                     "temperature": 0.0 if greedy else 1.0, "seed": rng.randrange(1 << 31)})
        if i % 5 == 4:
            body["ignore_eos"] = True
        if stream and route != "messages" and i % 2 == 0:
            body["stream_options"] = {"include_usage": True}
        tags = [route, "stream" if stream else "whole", "greedy" if greedy else "sampled"]
        tags += [t for t, on in (("tools", "tools" in body), ("image", "base64" in json.dumps(body)),
                                 ("shared", shares and info["follow_up"] is None), ("follow-up", info["follow_up"] is not None)) if on]
        out.append({"id": f"t{i:02d}", "route": route, "stream": stream, "body": body, "tags": tags, **info,
                    "bytes": json.dumps(body).encode("utf-8")})
    return out


class Target:
    """A loopback server: host, port, key, timeout."""

    def __init__(self, url, key, timeout):
        u = urllib.parse.urlsplit(url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"{url}: only http://HOST:PORT on this machine is taken")
        if u.hostname != "localhost":
            try:
                loop = ipaddress.ip_address(u.hostname).is_loopback
            except ValueError:
                loop = False
            if not loop:
                raise ValueError(f"{url}: {u.hostname} is not a loopback address; soak.py talks to this machine only")
        self.host, self.port, self.key, self.timeout = u.hostname, u.port or 80, key, timeout

    def headers(self):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.key:
            h["Authorization"] = f"Bearer {self.key}"
        return h

    def conn(self):
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)

    def get(self, path, parse=True):
        c = self.conn()
        try:
            c.request("GET", path, headers=self.headers())
            r = c.getresponse()
            data = r.read()
            if r.status != 200:
                raise RuntimeError(f"GET {path}: HTTP {r.status}: {data[:200]!r}")
            return json.loads(data) if parse else data.decode("utf-8", "replace")
        finally:
            c.close()


def hard_close(conn, resp=None):
    """Drops the connection at once, as a client that goes away does."""
    try:
        if conn.sock is not None:
            conn.sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        if resp is not None:
            resp.close()
    except Exception:
        pass
    conn.close()


def error_text(data):
    try:
        v = json.loads(data)
        e = v.get("error")
        return e.get("message", str(e)) if isinstance(e, dict) else str(v)[:300]
    except (ValueError, AttributeError):
        return data[:300].decode("utf-8", "replace") if isinstance(data, bytes) else str(data)[:300]


def run_one(target, tpl, cancel=None):
    """Sends a template; returns ('ok', sha), ('cancelled',), ('refused', wait) or ('failed', message)."""
    conn = target.conn()
    resp = None
    try:
        conn.request("POST", ROUTES[tpl["route"]], body=tpl["bytes"], headers=target.headers())
        if cancel is not None and not tpl["stream"]:
            if cancel > 0:
                time.sleep(cancel)
            hard_close(conn)
            return ("cancelled",)
        resp = conn.getresponse()
        if resp.status == 429:
            resp.read()
            try:
                wait = float(resp.getheader("Retry-After", "1"))
            except ValueError:
                wait = 1.0
            return ("refused", min(5.0, max(0.1, wait)))
        if resp.status != 200:
            return ("failed", f"HTTP {resp.status}: {error_text(resp.read())}")
        if not tpl["stream"]:
            ls = json.loads(resp.read()).get("lockstep") or {}
            return ("ok", ls["token_sha"]) if ls.get("token_sha") else ("failed", "reply without lockstep.token_sha")
        return read_stream(conn, resp, tpl, cancel)
    except (OSError, http.client.HTTPException) as e:
        return ("failed", f"transport: {type(e).__name__}: {e}")
    except ValueError as e:
        return ("failed", f"bad JSON: {e}")
    finally:
        hard_close(conn, resp)


def read_stream(conn, resp, tpl, cancel):
    """Reads SSE events up to [DONE] or message_stop, or drops the connection after `cancel` events."""
    events, name, sha = 0, None, None
    while True:
        if cancel is not None and events >= cancel:
            hard_close(conn, resp)
            return ("cancelled",)
        raw = resp.readline()
        if not raw:
            return ("failed", "stream ended before its last event")
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line.startswith("event:"):
            name = line[6:].strip()
            continue
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        events += 1
        if payload == "[DONE]":
            break
        obj = json.loads(payload)
        if name == "error" or "error" in obj:
            return ("failed", f"stream error: {error_text(payload.encode())}")
        if (obj.get("lockstep") or {}).get("token_sha"):
            sha = obj["lockstep"]["token_sha"]
        if obj.get("type") == "message_stop":
            break
        name = None
    return ("ok", sha) if sha else ("failed", "stream finished without lockstep.token_sha")


def proc_sample(pid):
    """VmRSS in bytes and the open fd count of a process, None where unreadable."""
    rss = fds = None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        pass
    return rss, fds


def sample(target, pid):
    s = {"t": time.monotonic()}
    try:
        st = target.get("/status")
        cache = st.get("cache") or {}
        s.update(running=len(st.get("lanes") or []), waiting=st.get("waiting"), cache_bytes=cache.get("bytes"),
                 cache_budget=cache.get("budget"), cache_entries=cache.get("entries"), cache_hits=cache.get("hits"),
                 cache_queries=cache.get("queries"), heap=st.get("heap_bytes"))
    except Exception as e:
        s["error"] = f"{type(e).__name__}: {e}"
    if pid:
        s["rss"], s["fds"] = proc_sample(pid)
    return s


def metrics(target):
    """The server's counters from /metrics, by name."""
    out = {}
    try:
        for line in target.get("/metrics", parse=False).splitlines():
            if line and not line.startswith("#") and "{" in line:
                name, _, rest = line.partition("{")
                if "le=" not in rest:
                    out[name] = float(rest.rsplit(" ", 1)[1])
    except Exception as e:
        note(f"/metrics unreadable: {e}")
    return out


class Stats:
    """Counters shared by the client threads."""

    def __init__(self, templates, max_requests):
        self.lock = threading.Lock()
        self.total = {k: 0 for k in ("sent", "completed", "cancelled", "refused", "refused_dropped", "failed", "unequal")}
        self.per = {t["id"]: dict(self.total) for t in templates}
        self.failures, self.unequal = [], []
        self.tickets = max_requests

    def ticket(self):
        with self.lock:
            if self.tickets is not None:
                if self.tickets <= 0:
                    return False
                self.tickets -= 1
            return True

    def count(self, tid, key, detail=None):
        with self.lock:
            self.total[key] += 1
            self.per[tid][key] += 1
            if key == "failed":
                self.failures.append(f"{tid}: {detail}")
                if len(self.failures) <= 10:
                    note(f"failed {tid}: {detail}")
            elif key == "unequal":
                self.unequal.append(detail)
                note(f"UNEQUAL {tid}: {detail}")


def client(idx, args, target, templates, expected, stats, deadline):
    """Sends random templates until the deadline or the request bound; never raises."""
    rng = random.Random(args.seed * 1_000_003 + idx)
    while time.monotonic() < deadline and stats.ticket():
        tpl = templates[rng.randrange(len(templates))]
        tid = tpl["id"]
        try:
            cancel = None
            if rng.random() < args.cancel:
                if tpl["stream"]:
                    cancel = rng.randint(0, args.cancel_events)
                else:
                    cancel = 0.0 if rng.random() < 0.5 else rng.uniform(0.0, 0.5)
            stats.count(tid, "sent")
            while True:
                try:
                    res = run_one(target, tpl, cancel)
                except Exception as e:
                    res = ("failed", f"{type(e).__name__}: {e}")
                if res[0] != "refused":
                    break
                stats.count(tid, "refused")
                if time.monotonic() >= deadline:
                    res = ("refused_dropped",)
                    break
                time.sleep(res[1] * (0.5 + rng.random()))
            if res[0] == "ok":
                stats.count(tid, "completed")
                if res[1] != expected[tid]:
                    stats.count(tid, "unequal", f"{tid} ({' '.join(tpl['tags'])}): solo {expected[tid][:16]} load {res[1][:16]}")
            elif res[0] in ("cancelled", "refused_dropped"):
                stats.count(tid, res[0])
            else:
                stats.count(tid, "failed", res[1])
        except Exception as e:
            stats.count(tid, "failed", f"client error: {type(e).__name__}: {e}")


def solo_runs(target, templates):
    """Each template's token_sha from one request run alone."""
    expected = {}
    for tpl in templates:
        for _ in range(100):
            res = run_one(target, tpl)
            if res[0] != "refused":
                break
            time.sleep(res[1])
        if res[0] != "ok":
            raise RuntimeError(f"solo run of {tpl['id']} ({' '.join(tpl['tags'])}) failed: {res[-1]}")
        expected[tpl["id"]] = res[1]
    return expected


def wait_idle(target, limit):
    """Polls /status until no lane runs and nothing waits; the last reading and whether it went idle."""
    t_end = time.monotonic() + limit
    last = {}
    while True:
        try:
            st = target.get("/status")
            last = {"running": len(st.get("lanes") or []), "waiting": st.get("waiting")}
            if last["running"] == 0 and last["waiting"] == 0:
                return last, True
        except Exception as e:
            last = {"error": str(e)}
        if time.monotonic() >= t_end:
            return last, False
        time.sleep(0.5)


def memory_report(samples, t0, t1):
    """RSS at peak and end, and over the second half of the load how far RSS moved beyond the cache's growth."""
    rss = [s for s in samples if s.get("rss") is not None]
    if not rss:
        return None
    half = [s for s in rss if (t0 + t1) / 2 <= s["t"] <= t1 and s.get("cache_bytes") is not None]
    out = {"peak_rss": max(s["rss"] for s in rss), "final_rss": rss[-1]["rss"]}
    if len(half) >= 2:
        spread = max(s["rss"] for s in half) - min(s["rss"] for s in half)
        growth = half[-1]["cache_bytes"] - half[0]["cache_bytes"]
        out.update(half_first_rss=half[0]["rss"], half_last_rss=half[-1]["rss"], half_rss_spread=spread,
                   half_cache_growth=growth, beyond_cache=spread - max(0, growth))
    heap = [s for s in half if s.get("heap") is not None]
    if len(heap) >= 2:
        out.update(heap_peak=max(s["heap"] for s in samples if s.get("heap") is not None), heap_first=heap[0]["heap"],
                   heap_last=heap[-1]["heap"], heap_beyond_cache=(heap[-1]["heap"] - heap[0]["heap"]) - (heap[-1]["cache_bytes"] - heap[0]["cache_bytes"]))
    return out


def mib(x):
    return "n/a" if x is None else f"{x / (1 << 20):.1f} MiB"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8080", help="server base URL (loopback only)")
    p.add_argument("--api-key", default=None, help="sent as Authorization: Bearer KEY")
    p.add_argument("--model", default=None, help="served model id (default: from /v1/models)")
    p.add_argument("--clients", type=int, default=None, help="concurrent clients (default 64; 8 with --quick)")
    p.add_argument("--minutes", type=float, default=None, help="load duration (default 10; 0.33 with --quick)")
    p.add_argument("--max-requests", type=int, default=None, help="stop after this many requests (default unbounded; 80 with --quick)")
    p.add_argument("--templates", type=int, default=None, help="request templates in the pool (default 36; 12 with --quick)")
    p.add_argument("--seed", type=int, default=1, help="seeds the templates and every client's choices")
    p.add_argument("--images", action="store_true", help="include image requests (the server must run with --vision)")
    p.add_argument("--server-pid", type=int, default=None, help="the server's pid, for RSS and fds from /proc")
    p.add_argument("--solo-url", default=None, help="a second server for the solo runs (default: the same, before the load)")
    p.add_argument("--cancel", type=float, default=0.1, help="share of requests the client abandons (default 0.1)")
    p.add_argument("--cancel-events", type=int, default=8, help="a cancelled stream reads 0..K events first (default 8)")
    p.add_argument("--idle-timeout", type=float, default=60.0, help="seconds to wait for the server to go idle at the end")
    p.add_argument("--heap-slack-mib", type=float, default=2.0, help="heap MiB the server may gain beyond its cache over the second half")
    p.add_argument("--fd-slack", type=int, default=8, help="open fds the server may hold beyond its count at the start")
    p.add_argument("--timeout", type=float, default=300.0, help="per-request socket timeout in seconds")
    p.add_argument("--out", default=None, help="write the summary JSON here")
    p.add_argument("--quick", action="store_true", help="a short self-check")
    args = p.parse_args()
    q = args.quick
    args.clients = args.clients or (8 if q else 64)
    args.minutes = args.minutes if args.minutes is not None else (0.33 if q else 10.0)
    args.max_requests = args.max_requests if args.max_requests is not None else (80 if q else None)
    args.templates = args.templates or (12 if q else 36)
    if args.clients < 1 or args.minutes <= 0 or args.templates < 1 or not 0 <= args.cancel <= 1:
        p.error("--clients and --templates must be positive, --minutes above 0, --cancel in [0, 1]")
    try:
        target = Target(args.url, args.api_key, args.timeout)
        solo = Target(args.solo_url, args.api_key, args.timeout) if args.solo_url else target
        status = target.get("/status")
        model = args.model or target.get("/v1/models")["data"][0]["id"]
    except Exception as e:
        note(f"cannot start: {e}")
        return 2
    if args.images and not status.get("vision"):
        note("--images needs a server started with --vision (/status says vision is off)")
        return 2
    templates = build_templates(args.seed, args.templates, model, args.images)
    note(f"model {model} at {args.url}: {len(templates)} templates, {args.clients} clients, {args.minutes:g} min, "
         f"max requests {args.max_requests}, seed {args.seed}, cancel {args.cancel:g}")
    t_solo = time.monotonic()
    try:
        expected = solo_runs(solo, templates)
    except Exception as e:
        note(f"cannot start: {e}")
        return 2
    note(f"solo runs: {len(expected)} in {time.monotonic() - t_solo:.1f} s on {args.solo_url or args.url}")
    m0 = metrics(target)
    first = sample(target, args.server_pid)
    samples = [first]
    stop = threading.Event()

    def sampler():
        while not stop.wait(1.0):
            samples.append(sample(target, args.server_pid))

    sam = threading.Thread(target=sampler, daemon=True)
    sam.start()
    stats = Stats(templates, args.max_requests)
    t0 = time.monotonic()
    deadline = t0 + args.minutes * 60
    threads = [threading.Thread(target=client, args=(i, args, target, templates, expected, stats, deadline), daemon=True)
               for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t1 = time.monotonic()
    note(f"load done in {t1 - t0:.1f} s; waiting for the server to go idle")
    end_state, idle = wait_idle(target, args.idle_timeout)
    stop.set()
    sam.join()
    last = sample(target, args.server_pid)
    fd_deadline = time.monotonic() + 5
    while (args.server_pid and first.get("fds") is not None and last.get("fds") is not None
           and last["fds"] > first["fds"] + args.fd_slack and time.monotonic() < fd_deadline):
        time.sleep(0.5)
        last = sample(target, args.server_pid)
    samples.append(last)
    m1 = metrics(target)
    ok = [s for s in samples if "error" not in s]
    budget = next((s["cache_budget"] for s in reversed(ok) if s.get("cache_budget") is not None), None)
    peak_cache = max((s["cache_bytes"] for s in ok if s.get("cache_bytes") is not None), default=None)
    over_budget = budget is not None and peak_cache is not None and budget > 0 and peak_cache > budget
    fds_leaked = (first.get("fds") is not None and last.get("fds") is not None and last["fds"] > first["fds"] + args.fd_slack)
    mem = memory_report(samples, t0, t1)
    heap_grew = bool(mem and "heap_beyond_cache" in mem and mem["heap_beyond_cache"] > args.heap_slack_mib * (1 << 20))
    tot = stats.total
    summary = {
        "url": args.url, "model": model, "seed": args.seed, "clients": args.clients, "minutes": args.minutes,
        "max_requests": args.max_requests, "images": args.images, "load_s": round(t1 - t0, 1),
        "counts": tot,
        "per_template": {t["id"]: {"tags": t["tags"], "follow_up": t["follow_up"], "solo_sha": expected[t["id"]], **stats.per[t["id"]]}
                         for t in templates},
        "unequal": stats.unequal, "failures": stats.failures[:50],
        "idle_at_end": idle, "end_state": end_state,
        "cache": {"peak_bytes": peak_cache, "budget": budget, "over_budget": over_budget,
                  "final_bytes": last.get("cache_bytes"), "entries": last.get("cache_entries"),
                  "hits_tokens": last.get("cache_hits"), "queried_tokens": last.get("cache_queries")},
        "memory": mem,
        "fds": {"start": first.get("fds"), "end": last.get("fds"), "slack": args.fd_slack, "leaked": fds_leaked},
        "server_metrics_delta": {k: m1.get(k, 0) - m0.get(k, 0) for k in ("vllm:request_success_total", "lockstep:request_failure_total",
                                                                            "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total")},
        "status_errors": sum(1 for s in samples if "error" in s),
        "samples": len(samples),
        "series": [[round(s["t"] - t0, 1), s.get("rss"), s.get("cache_bytes"), s.get("running"), s.get("waiting"), s.get("heap")] for s in samples[::10]],
    }
    reasons = [r for r, bad in (("unequal replies", tot["unequal"]), ("failed requests", tot["failed"]),
                                ("server not idle at the end", not idle), ("prompt cache above its budget", over_budget),
                                ("server fds leaked", fds_leaked), ("heap grew beyond the cache over the second half", heap_grew)) if bad]
    summary["pass"] = not reasons
    summary["reasons"] = reasons
    print(f"requests: sent {tot['sent']}, completed {tot['completed']}, cancelled {tot['cancelled']}, refused (429 answers) {tot['refused']}"
          f" ({tot['refused_dropped']} dropped at the deadline), failed {tot['failed']}, unequal {tot['unequal']}")
    print("per template: " + ", ".join(f"{k} {v['sent']}" for k, v in stats.per.items()))
    for u in stats.unequal:
        print(f"unequal: {u}")
    for f in stats.failures[:10]:
        print(f"failure: {f}")
    if mem:
        line = f"rss: peak {mib(mem['peak_rss'])}, final {mib(mem['final_rss'])}"
        if "beyond_cache" in mem:
            line += (f"; second half {mib(mem['half_first_rss'])} -> {mib(mem['half_last_rss'])}, spread {mib(mem['half_rss_spread'])},"
                     f" cache growth {mib(mem['half_cache_growth'])}, beyond the cache {mib(mem['beyond_cache'])}")
        print(line)
        per_min = {}
        for s in samples:
            if s.get("rss") is not None:
                per_min[int((s["t"] - t0) // 60)] = s["rss"]
        print("rss at each minute's end: " + ", ".join(f"{m + 1}: {mib(v)}" for m, v in sorted(per_min.items())))
    if mem and "heap_last" in mem:
        print(f"heap (bytes the server holds): peak {mib(mem['heap_peak'])}; second half {mib(mem['heap_first'])} -> {mib(mem['heap_last'])},"
              f" beyond the cache's growth {mib(mem['heap_beyond_cache'])}")
        per_min = {int((s["t"] - t0) // 60): s["heap"] for s in samples if s.get("heap") is not None}
        print("heap at each minute's end: " + ", ".join(f"{m + 1}: {mib(v)}" for m, v in sorted(per_min.items())))
    print(f"prompt cache: peak {mib(peak_cache)} of {mib(budget)} budget, final {mib(last.get('cache_bytes'))},"
          f" {last.get('cache_entries')} entries, hits {last.get('cache_hits')} of {last.get('cache_queries')} tokens")
    print(f"end: idle {idle} ({end_state}); fds start {first.get('fds')} end {last.get('fds')} (slack {args.fd_slack})")
    print(f"server metrics over the run: {summary['server_metrics_delta']}")
    d = summary["server_metrics_delta"]
    if d["vllm:prefix_cache_queries_total"] and d["vllm:prefix_cache_hits_total"] >= d["vllm:prefix_cache_queries_total"]:
        print("note: every prompt token came from the cache; a smaller --prompt-cache-gib on the server makes the load prefill too")
    print("PASS" if not reasons else "FAIL: " + "; ".join(reasons))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)
    return 0 if not reasons else 1


if __name__ == "__main__":
    sys.exit(main())
