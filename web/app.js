// The server's page: a dashboard polled from /status and a chat streamed from /v1/chat/completions, with each reply's token_sha and a replay that checks it.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY = "lockstep-key";
const state = { model: null, needKey: false, busy: false, history: [] };

function key() { return sessionStorage.getItem(KEY) || ""; }

function headers(json) {
  const h = {};
  if (json) h["Content-Type"] = "application/json";
  if (key()) h["Authorization"] = "Bearer " + key();
  return h;
}

function showError(text) {
  const e = $("error");
  e.textContent = text;
  e.hidden = !text;
}

function setBadge(text, kind) {
  const b = $("state");
  b.textContent = text;
  b.className = "badge" + (kind ? " " + kind : "");
}

function askKey(reason) {
  state.needKey = true;
  $("keybox").hidden = false;
  $("send").disabled = true;
  setBadge(reason, "bad");
}

function fmtBytes(n) {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + u[i];
}

function short(h) { return h ? h.slice(0, 16) + "…" : "none recorded"; }

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text;
  row.appendChild(td);
}

function renderLanes(s) {
  const body = $("lanes").tBodies[0];
  body.textContent = "";
  for (const l of s.lanes) {
    const tr = document.createElement("tr");
    tr.dataset.lane = l.id;
    cell(tr, l.id);
    cell(tr, l.phase);
    cell(tr, l.position);
    cell(tr, l.prompt_tokens);
    cell(tr, l.generated);
    cell(tr, l.tok_s.toFixed(1));
    body.appendChild(tr);
  }
  if (!s.lanes.length) {
    const tr = document.createElement("tr");
    const td = document.createElement("td");
    td.colSpan = 6;
    td.className = "empty";
    td.textContent = "no stream running";
    tr.appendChild(td);
    body.appendChild(tr);
  }
  $("lane-count").textContent = s.lanes.length + " of " + s.parallel + " busy";
  $("waiting").textContent = s.waiting;
  $("max-queue").textContent = s.max_queue;
}

function renderIdentity(s) {
  const id = s.identity || {};
  const rows = [
    ["version", id.version || "loading"],
    ["contract hash", id.contract_hash || "none recorded (lockstep contract --hash)"],
    ["checkpoint", id.checkpoint_fingerprint || ""],
    ["device", id.device || ""],
    ["model", s.model.id + " · " + s.model.context + " positions per lane" + (s.vision ? " · images" : "")],
  ];
  const dl = $("identity");
  dl.textContent = "";
  for (const [k, v] of rows) {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = v;
    dd.title = v;
    dl.append(dt, dd);
  }
}

function renderCache(s) {
  const c = s.cache;
  const pct = c.budget ? Math.min(100, (100 * c.bytes) / c.budget) : 0;
  $("cache-bar").style.width = pct.toFixed(1) + "%";
  const rate = c.queries ? ((100 * c.hits) / c.queries).toFixed(1) + "%" : "n/a";
  $("cache").textContent = c.budget ? `${fmtBytes(c.bytes)} of ${fmtBytes(c.budget)} · ${c.entries} entries · ${c.hits} of ${c.queries} prompt tokens resumed (${rate})` : "off (--prompt-cache-gib 0)";
}

function chart(canvas, points, pick) {
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height;
  ctx.clearRect(0, 0, w, h);
  const span = 600;
  const max = Math.max(1, ...points.map(pick));
  ctx.strokeStyle = "#e2e5eb";
  ctx.beginPath();
  ctx.moveTo(0, h - 0.5);
  ctx.lineTo(w, h - 0.5);
  ctx.stroke();
  ctx.fillStyle = "#6b7385";
  ctx.font = "11px system-ui";
  ctx.fillText(max.toFixed(0), 4, 12);
  ctx.strokeStyle = "#2f6fde";
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  points.forEach((p, i) => {
    const x = w - (Math.min(p.age_s, span) / span) * w;
    const y = h - 4 - (pick(p) / max) * (h - 18);
    if (i) ctx.lineTo(x, y); else ctx.moveTo(x, y);
  });
  ctx.stroke();
}

function renderRates(s) {
  const r = s.rates;
  const last = r.length ? r[r.length - 1] : { decode_tok_s: 0, prefill_tok_s: 0 };
  $("decode-now").textContent = last.decode_tok_s.toFixed(1);
  $("prefill-now").textContent = last.prefill_tok_s.toFixed(1);
  chart($("chart-decode"), r, (p) => p.decode_tok_s);
  chart($("chart-prefill"), r, (p) => p.prefill_tok_s);
  $("totals").textContent = `${s.totals.generated_tokens} tokens generated, ${s.totals.prefilled_tokens} prompt tokens computed since start`;
}

async function poll() {
  try {
    const r = await fetch("/status", { headers: headers(false), cache: "no-store" });
    if (r.status === 401) {
      askKey(key() ? "key refused" : "key required");
      return;
    }
    if (!r.ok) throw new Error("GET /status: HTTP " + r.status);
    const s = await r.json();
    state.needKey = false;
    $("keybox").hidden = true;
    state.model = s.model.id;
    $("model").textContent = s.model.id;
    $("send").disabled = state.busy || s.status !== "ok";
    setBadge(s.status === "ok" ? "serving" : s.status === "loading" ? "loading" : "failed: " + (s.reason || ""), s.status === "ok" ? "ok" : "bad");
    renderIdentity(s);
    renderLanes(s);
    renderCache(s);
    renderRates(s);
  } catch (e) {
    setBadge("unreachable", "bad");
  }
}

function bubble(role, text) {
  const d = document.createElement("div");
  d.className = "msg " + role;
  if (role === "assistant") {
    const t = document.createElement("div");
    t.className = "thinking";
    t.hidden = true;
    const c = document.createElement("div");
    c.className = "content";
    const m = document.createElement("div");
    m.className = "meta";
    d.append(t, c, m);
  } else {
    d.textContent = text;
  }
  $("messages").appendChild(d);
  d.scrollIntoView({ block: "end" });
  return d;
}

// Streams one request; on_delta gets (content, reasoning); resolves to the last chunk's lockstep object.
async function stream(body, onDelta) {
  const r = await fetch("/v1/chat/completions", { method: "POST", headers: headers(true), body: JSON.stringify(body) });
  if (r.status === 401) {
    askKey("key required");
    throw new Error("the server requires an API key");
  }
  if (!r.ok) {
    let msg = "HTTP " + r.status;
    try { msg = (await r.json()).error.message; } catch (_) { /* not JSON */ }
    throw new Error(msg);
  }
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = "", info = null;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let at;
    while ((at = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, at);
      buf = buf.slice(at + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") return info;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message || "the stream failed");
        const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
        if (delta) onDelta(delta.content || "", delta.reasoning_content || "");
        if (chunk.lockstep) info = { ...chunk.lockstep, usage: chunk.usage };
      }
    }
  }
  if (!info) throw new Error("the stream ended without its last chunk");
  return info;
}

function request() {
  const t = parseFloat($("temperature").value);
  return {
    model: state.model,
    messages: state.history.slice(),
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: Math.max(1, parseInt($("max-tokens").value, 10) || 64),
    temperature: isFinite(t) ? t : 0,
    seed: Math.max(0, parseInt($("seed").value, 10) || 0),
    chat_template_kwargs: { enable_thinking: $("thinking").checked },
  };
}

function meta(d, info, t0, tFirst, n) {
  const m = d.querySelector(".meta");
  m.textContent = "";
  const ttft = (tFirst - t0) / 1000;
  const span = (performance.now() - tFirst) / 1000;
  const rate = n > 1 && span > 0 ? (n - 1) / span : 0;
  const parts = [
    ["token_sha", info.token_sha.slice(0, 16) + "…"],
    ["cached_tokens", info.cached_tokens],
    ["TTFT", ttft.toFixed(2) + " s"],
    ["tok/s", (info.decode_tok_s || rate).toFixed(1)],
  ];
  for (const [k, v] of parts) {
    const s = document.createElement("span");
    s.textContent = k + " " + v;
    if (k === "token_sha") { s.className = "sha"; s.title = info.token_sha; }
    m.appendChild(s);
  }
  const b = document.createElement("button");
  b.type = "button";
  b.className = "replay";
  b.textContent = "Replay";
  const out = document.createElement("span");
  out.className = "replay-result";
  b.addEventListener("click", () => replay(d, b, out));
  m.append(b, out);
}

async function replay(d, button, out) {
  button.disabled = true;
  out.textContent = "replaying…";
  out.className = "replay-result";
  try {
    const info = await stream(JSON.parse(d.dataset.request), () => {});
    const same = info.token_sha === d.dataset.sha;
    d.dataset.replay = same ? "match" : "mismatch";
    out.textContent = same ? "✓ same token_sha" : "✗ token_sha differs: " + info.token_sha.slice(0, 16) + "…";
    out.className = "replay-result " + (same ? "match" : "mismatch");
    if (!same) showError("replay gave another token_sha: " + info.token_sha + " vs " + d.dataset.sha);
  } catch (e) {
    d.dataset.replay = "error";
    out.textContent = "";
    showError("replay failed: " + e.message);
  } finally {
    button.disabled = false;
  }
}

async function send(ev) {
  ev.preventDefault();
  if (state.needKey) { askKey("key required"); return; }
  const text = $("prompt").value.trim();
  if (!text || state.busy || !state.model) return;
  showError("");
  state.busy = true;
  $("send").disabled = true;
  $("prompt").value = "";
  state.history.push({ role: "user", content: text });
  bubble("user", text);
  const d = bubble("assistant");
  d.dataset.state = "streaming";
  const body = request();
  d.dataset.request = JSON.stringify(body);
  const c = d.querySelector(".content"), th = d.querySelector(".thinking");
  const t0 = performance.now();
  let tFirst = 0, n = 0, answer = "";
  try {
    const info = await stream(body, (content, reasoning) => {
      if (!tFirst) tFirst = performance.now();
      n++;
      if (reasoning) { th.hidden = false; th.textContent += reasoning; }
      if (content) { answer += content; c.textContent = answer; }
      d.scrollIntoView({ block: "end" });
    });
    d.dataset.sha = info.token_sha;
    d.dataset.state = "done";
    state.history.push({ role: "assistant", content: answer });
    meta(d, info, t0, tFirst || performance.now(), n);
  } catch (e) {
    d.dataset.state = "error";
    state.history.pop();
    showError("chat: " + e.message);
  } finally {
    state.busy = false;
    $("send").disabled = state.needKey;
  }
}

function tab(name) {
  for (const t of ["dash", "chat"]) {
    $(t).hidden = t !== name;
    $("tab-" + t).classList.toggle("active", t === name);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("tab-dash").addEventListener("click", () => tab("dash"));
  $("tab-chat").addEventListener("click", () => tab("chat"));
  $("chatform").addEventListener("submit", send);
  $("prompt").addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) send(e); });
  $("clear").addEventListener("click", () => { state.history = []; $("messages").textContent = ""; showError(""); });
  $("keyform").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(KEY, $("key").value);
    $("key").value = "";
    state.needKey = false;
    poll();
  });
  if (location.hash === "#chat") tab("chat");
  poll();
  setInterval(poll, 1000);
});
