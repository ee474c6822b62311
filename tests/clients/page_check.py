"""Drives the server's page in headless Chromium over WebDriver (standard library only): the dashboard shows the lanes while two chats stream, a chat sent from the page streams and shows its token_sha, its replay matches, and with an API key the page refuses to chat until the key is given."""
import argparse
import base64
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse


class Failure(Exception):
    pass


class Browser:
    """A minimal W3C WebDriver client for chromedriver."""

    def __init__(self, driver, chromium):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        self.profile = tempfile.mkdtemp(prefix="lockstep-page-")
        self.proc = subprocess.Popen([driver, f"--port={self.port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 30
        while True:
            try:
                self._call("GET", "/status")
                break
            except OSError:
                if time.time() > deadline:
                    raise Failure("chromedriver did not start")
                time.sleep(0.1)
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1280,900",
                f"--user-data-dir={self.profile}"]
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {"binary": chromium, "args": args}, "goog:loggingPrefs": {"browser": "ALL"}}}}
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _call(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        data = json.loads(r.read() or b"{}")
        c.close()
        if r.status != 200:
            raise Failure(f"webdriver {method} {path}: {data.get('value', data)}")
        return data.get("value", data)

    def cmd(self, method, path, body=None):
        return self._call(method, f"/session/{self.session}{path}", body)

    def go(self, url):
        self.cmd("POST", "/url", {"url": url})

    def js(self, script, *args):
        return self.cmd("POST", "/execute/sync", {"script": script, "args": list(args)})

    def el(self, css):
        v = self.cmd("POST", "/element", {"using": "css selector", "value": css})
        return next(iter(v.values()))

    def click(self, css):
        self.cmd("POST", f"/element/{self.el(css)}/click", {})

    def type(self, css, text):
        e = self.el(css)
        self.cmd("POST", f"/element/{e}/clear", {})
        self.cmd("POST", f"/element/{e}/value", {"text": text})

    def shot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.cmd("GET", "/screenshot")))

    def close(self):
        try:
            self.cmd("DELETE", "")
        except Exception:
            pass
        self.proc.terminate()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)


def wait(what, fn, timeout):
    deadline = time.time() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.time() > deadline:
            raise Failure(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def no_error(b):
    e = b.js("const e = document.getElementById('error'); return e.hidden ? '' : e.textContent;")
    if e:
        raise Failure(f"the page shows an error: {e}")


def api_stream(url, key, body, out):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = "Bearer " + key
    c.request("POST", "/v1/chat/completions", body=json.dumps(body), headers=h)
    r = c.getresponse()
    text = r.read().decode()
    out.append((r.status, text))


def api_sha(url, key, body):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
    h = {"Content-Type": "application/json"}
    if key:
        h["Authorization"] = "Bearer " + key
    c.request("POST", "/v1/chat/completions", body=json.dumps(dict(body, stream=False)), headers=h)
    r = c.getresponse()
    v = json.loads(r.read())
    if r.status != 200:
        raise Failure(f"the API refused the page's request: {v}")
    return v["lockstep"]["token_sha"]


def chat_from_page(b, url, key, prompt, temperature, seed, max_tokens, timeout):
    """Sends one chat from the page; the reply's element once it is done, after checking its sha against the API."""
    b.click("#tab-chat")
    before = b.js("return document.querySelectorAll('.msg.assistant').length;")
    b.type("#temperature", str(temperature))
    b.type("#seed", str(seed))
    b.type("#max-tokens", str(max_tokens))
    b.type("#prompt", prompt)
    b.click("#send")
    wait("the reply to start", lambda: b.js("return document.querySelectorAll('.msg.assistant').length;") > before, 10)
    state = lambda: b.js("const m = document.querySelectorAll('.msg.assistant'); return m[m.length - 1].dataset.state;")
    s = wait("the reply to finish streaming", lambda: (lambda v: v if v in ("done", "error") else None)(state()), timeout)
    no_error(b)
    if s != "done":
        raise Failure("the reply ended in an error: " + b.js("return document.getElementById('error').textContent;"))
    sha, request = b.js("const m = document.querySelectorAll('.msg.assistant'); const d = m[m.length - 1]; return [d.dataset.sha, d.dataset.request];")
    if not re.fullmatch(r"[0-9a-f]{64}", sha or ""):
        raise Failure(f"the reply shows no token_sha: {sha!r}")
    shown = b.js("const m = document.querySelectorAll('.msg.assistant'); return m[m.length - 1].querySelector('.meta').textContent;")
    for label in ("token_sha " + sha[:16], "cached_tokens", "TTFT", "tok/s"):
        if label not in shown:
            raise Failure(f"the reply's figures lack {label!r}: {shown!r}")
    if api_sha(url, key, json.loads(request)) != sha:
        raise Failure("the page's token_sha differs from the API's for the same request")
    return sha


def open_page(b, url):
    b.go(url + "/")
    return b


def run_open(b, args):
    open_page(b, args.url)
    wait("the dashboard to show the server serving", lambda: b.js("return document.getElementById('state').textContent;") == "serving", 60)
    no_error(b)
    streams, threads = [], []
    for i in range(2):
        body = {"model": args.model, "messages": [{"role": "user", "content": f"Count slowly, stream {i}."}], "stream": True, "max_tokens": args.long_tokens, "ignore_eos": True, "temperature": 0}
        t = threading.Thread(target=api_stream, args=(args.url, args.api_key, body, streams))
        t.start()
        threads.append(t)
    rows = lambda: b.js("return Array.from(document.querySelectorAll('#lanes tbody tr[data-lane]')).map(r => r.cells[1].textContent);")
    seen = wait("two lanes on the dashboard while two chats stream", lambda: (lambda r: r if len(r) >= 2 else None)(rows()), 60)
    tokens = b.js("return Array.from(document.querySelectorAll('#lanes tbody tr[data-lane]')).map(r => Number(r.cells[4].textContent));")
    rate = wait("a decode rate on the dashboard while they stream", lambda: float(b.js("return document.getElementById('decode-now').textContent;")) or None, 15)
    if args.shots:
        b.shot(os.path.join(args.shots, "page-dashboard.png"))
    for t in threads:
        t.join(timeout=300)
    if len(streams) != 2 or any(s != 200 or "[DONE]" not in text for s, text in streams):
        raise Failure(f"the two API streams did not complete: {[s for s, _ in streams]}")
    wait("the lanes to empty", lambda: not rows(), 30)
    totals = lambda: b.js("return document.getElementById('totals').textContent;")
    wait("the generated tokens counted on the dashboard", lambda: totals().split(" ")[0] not in ("", "0"), 10)
    no_error(b)
    print(f"dashboard: lanes seen {seen} with {tokens} tokens generated, decode {rate} tok/s; totals: {totals()}")
    sha = chat_from_page(b, args.url, args.api_key, "Hello from the page!", 1, 7, 24, 120)
    b.click(".msg.assistant:last-child .replay")
    result = wait("the replay", lambda: b.js("const m = document.querySelectorAll('.msg.assistant'); return m[m.length - 1].dataset.replay;"), 120)
    if result != "match":
        raise Failure(f"the replay's token_sha did not match: {result}")
    no_error(b)
    if args.shots:
        b.shot(os.path.join(args.shots, "page-chat.png"))
    print(f"chat: token_sha {sha}, shown and equal to the API's; replay matched")


def run_keyed(b, args):
    open_page(b, args.url)
    wait("the page to ask for the key", lambda: b.js("return !document.getElementById('keybox').hidden && document.getElementById('send').disabled;"), 30)
    b.click("#tab-chat")
    b.type("#prompt", "Without a key.")
    b.js("document.getElementById('chatform').requestSubmit();")
    time.sleep(1)
    if b.js("return document.querySelectorAll('.msg.assistant').length;") != 0:
        raise Failure("the page sent a chat before the key was given")
    b.type("#key", "wrong-" + args.api_key)
    b.click("#keysave")
    wait("the page to refuse a wrong key", lambda: b.js("return document.getElementById('state').textContent;") == "key refused", 10)
    b.type("#key", args.api_key)
    b.click("#keysave")
    wait("the page to take the key", lambda: b.js("return document.getElementById('state').textContent;") == "serving", 10)
    sha = chat_from_page(b, args.url, args.api_key, "Hello with a key.", 0, 1, 12, 120)
    print(f"keyed: refused to chat without the key and with a wrong one; with it, token_sha {sha}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--api-key", default="")
    p.add_argument("--expect-key", action="store_true", help="the server requires the key: check the page refuses to chat until it is given")
    p.add_argument("--long-tokens", type=int, default=400)
    p.add_argument("--shots", default="")
    p.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    p.add_argument("--chromedriver", default=shutil.which("chromedriver") or "/usr/bin/chromedriver")
    a = p.parse_args()
    for exe in (a.chromium, a.chromedriver):
        if not os.path.exists(exe):
            print(f"{exe} is missing: install Debian's chromium and chromium-driver (scripts/test does)", file=sys.stderr)
            sys.exit(3)
    b = Browser(a.chromedriver, a.chromium)
    try:
        run_keyed(b, a) if a.expect_key else run_open(b, a)
    except Failure as e:
        logs = ""
        try:
            logs = json.dumps(b.cmd("POST", "/se/log", {"type": "browser"}))[:2000]
        except Exception:
            pass
        print(f"FAIL: {e}\nbrowser console: {logs}", file=sys.stderr)
        sys.exit(1)
    finally:
        b.close()
    print("page ok")


if __name__ == "__main__":
    main()
