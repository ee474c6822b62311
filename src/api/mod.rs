//! The HTTP APIs over the lane host: OpenAI's and Anthropic's routes, tokenize, health, metrics; keys, request ids, body limits and error shapes.
pub mod anthropic;
pub mod chat;
pub mod error;
pub mod fetch;
pub mod images;
pub mod listen;
pub mod metrics;
pub mod openai;
pub mod page;
pub mod params;
pub mod reply;
pub mod state;

use crate::serve::Job;
use crate::text::{ReasoningEffort, ToolCall};
use axum::body::Body;
use futures_util::StreamExt;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use error::{ApiError, Dialect};
use params::{Fields, Settings};
use serde_json::{json, Value};
use state::AppState;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The largest request body.
pub const BODY_LIMIT: usize = 8 << 20;

/// The job for a prompt and its settings.
pub(crate) fn job(state: &AppState, prompt: Vec<u32>, images: Vec<crate::serve::JobImage>, s: &Settings, max_tokens: usize, logprobs: Option<usize>, skip_special: bool, tx: crate::serve::EventSender) -> Job {
    Job {
        id: state.job_id(),
        prompt,
        images,
        sampler: s.sampler,
        seed: s.seed,
        max_tokens,
        stop_ids: if s.ignore_eos { Vec::new() } else { state.model.stop_ids.clone() },
        stop_strings: s.stop.clone(),
        logprobs,
        logits_sha: s.logits_sha,
        token_ids: s.token_ids,
        skip_special,
        draft: s.draft,
        forced: s.forced.clone(),
        events: tx,
        arrived: std::time::Instant::now(),
    }
}

/// The reply budget for a prompt of `n` tokens; a prompt that leaves no room in the context is a 400.
pub(crate) fn prompt_fits(state: &AppState, f: &Fields<'_>, n: usize, asked: Option<usize>, field: &str) -> Result<usize, ApiError> {
    let ctx = state.model.context;
    if n >= ctx {
        return Err(f.err(field, format!("the prompt has {n} tokens; the context holds {ctx} positions per lane (--context), so at most {} prompt tokens", ctx - 1)));
    }
    Ok(asked.unwrap_or(state.model.max_tokens).min(ctx - n))
}

/// The request's model, which must be the one served.
pub(crate) fn request_model(state: &AppState, f: &Fields<'_>) -> Result<String, ApiError> {
    let m = f.str("model")?.ok_or_else(|| f.err("model", "`model` is required"))?;
    if m != state.model.id {
        let mut e = ApiError::new(StatusCode::NOT_FOUND, format!("model `{m}` is not served here; this server serves `{}`", state.model.id)).dialect(f.dialect());
        e.param = Some("model".into());
        return Err(e);
    }
    Ok(m.to_string())
}

/// Tool calls in OpenAI's shape, with ids derived from the reply id.
pub(crate) fn tool_calls_json(calls: &[ToolCall], reply: &str) -> Vec<Value> {
    calls.iter().enumerate().map(|(i, c)| json!({ "id": format!("call_{}_{i}", reply.rsplit('-').next().unwrap_or("0")), "type": "function", "function": { "name": c.name, "arguments": c.arguments } })).collect()
}

/// Thinking on or off, and its budget.
pub(crate) struct Thinking {
    pub on: bool,
    pub effort: ReasoningEffort,
}

impl Thinking {
    /// From `chat_template_kwargs.enable_thinking` / `thinking` and `reasoning_effort` (off unless asked).
    pub fn openai(f: &Fields<'_>) -> Result<Thinking, ApiError> {
        let mut on = false;
        let mut effort = ReasoningEffort::default();
        if let Some(k) = f.get("chat_template_kwargs") {
            let o = Fields::nested(k, "chat_template_kwargs", &["enable_thinking", "thinking", "reasoning_effort"], Dialect::OpenAi)?;
            on = o.bool("enable_thinking")?.or(o.bool("thinking")?).unwrap_or(false);
            if let Some(e) = o.str("reasoning_effort")? {
                effort = ReasoningEffort::named(e).map_err(|e| o.err("chat_template_kwargs.reasoning_effort", e.to_string()))?;
            }
        }
        match f.str("reasoning_effort")? {
            None => {}
            Some("none") | Some("minimal") => on = false,
            Some(e @ ("low" | "medium" | "high" | "max")) => {
                on = true;
                effort = ReasoningEffort::named(if e == "medium" { "high" } else { e }).unwrap_or_default();
            }
            Some(e) => return Err(f.err("reasoning_effort", format!("`reasoning_effort` `{e}` is not one of none, minimal, low, medium, high, max"))),
        }
        Ok(Thinking { on, effort })
    }
}

/// OpenAI `tools`, checked.
pub(crate) fn openai_tools(f: &Fields<'_>) -> Result<Vec<Value>, ApiError> {
    let Some(v) = f.get("tools") else { return Ok(Vec::new()) };
    let list = v.as_array().ok_or_else(|| f.err("tools", "`tools` must be a list"))?;
    for (i, t) in list.iter().enumerate() {
        if t.get("type").and_then(Value::as_str) != Some("function") {
            return Err(f.err(&format!("tools[{i}].type"), "every tool must have `type: \"function\"`"));
        }
        let func = t.get("function");
        let name = func.and_then(|x| x.get("name")).and_then(Value::as_str);
        if name.is_none_or(|n| n.is_empty() || n.contains('"') || n.contains('<')) {
            return Err(f.err(&format!("tools[{i}].function.name"), "every tool needs a `function.name` without quotes or angle brackets"));
        }
        if func.and_then(|x| x.get("description")).is_some_and(|d| !d.is_string() && !d.is_null()) {
            return Err(f.err(&format!("tools[{i}].function.description"), "a tool's description must be a string"));
        }
        if func.and_then(|x| x.get("parameters")).is_some_and(|d| !d.is_object() && !d.is_null()) {
            return Err(f.err(&format!("tools[{i}].function.parameters"), "a tool's parameters must be a JSON schema object"));
        }
    }
    Ok(list.clone())
}

/// What a tool choice does: whether the tools are rendered, and the forced opening of the model's output. `read` maps the route's value to `none`, `auto`, `required` or `name:NAME`.
pub(crate) fn tool_choice(f: &Fields<'_>, v: Option<&Value>, tools: &[Value], thinking: bool, read: impl Fn(&Value) -> Result<String, ()>) -> Result<(bool, String), ApiError> {
    let choice = match v {
        None => "auto".to_string(),
        Some(v) => read(v).map_err(|_| f.err("tool_choice", "`tool_choice` must be none, auto, required/any, or a named tool"))?,
    };
    let names: Vec<&str> = tools.iter().filter_map(|t| t.get("function").and_then(|x| x.get("name")).and_then(Value::as_str)).collect();
    let open = "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"";
    match choice.as_str() {
        "none" => Ok((false, String::new())),
        "auto" => Ok((!tools.is_empty(), String::new())),
        "required" | "any" if tools.is_empty() => Err(f.err("tool_choice", "`tool_choice` requires a tool call but no tools are given")),
        _ if thinking => Err(f.err("tool_choice", "a required or named tool call cannot be enforced in thinking mode (reasoning comes first); turn thinking off or use `auto`")),
        "required" | "any" => Ok((true, open.to_string())),
        c => match c.strip_prefix("name:") {
            Some(n) if names.contains(&n) => Ok((true, format!("{open}{n}\">\n"))),
            Some(n) => Err(f.err("tool_choice", format!("`tool_choice` names `{n}`, which is not among the tools"))),
            None => Err(f.err("tool_choice", format!("unknown `tool_choice` `{c}`"))),
        },
    }
}

/// Reads a JSON body within the limit (a declared length past it refused before reading); bad UTF-8, bad JSON, an oversized body and one that stalls are 4xx in `d`'s shape.
async fn json_body(state: &AppState, req: Request, d: Dialect) -> Result<Value, ApiError> {
    let limit = state.body_limit();
    let too_big = || ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, format!("the request body is over {limit} bytes")).dialect(d);
    let declared = req.headers().get(axum::http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|s| s.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_big());
    }
    let mut body = req.into_body().into_data_stream();
    let mut bytes = Vec::with_capacity(declared.unwrap_or(0) as usize);
    loop {
        let stalled = || ApiError::new(StatusCode::REQUEST_TIMEOUT, format!("the request body stalled: no byte arrived for {} s (--idle-timeout)", state.idle_timeout.as_secs_f64())).dialect(d);
        match tokio::time::timeout(state.idle_timeout, body.next()).await.map_err(|_| stalled())? {
            None => break,
            Some(Ok(chunk)) if bytes.len() + chunk.len() > limit => return Err(too_big()),
            Some(Ok(chunk)) => bytes.extend_from_slice(&chunk),
            Some(Err(e)) => return Err(ApiError::bad(format!("reading the request body failed: {e}")).dialect(d)),
        }
    }
    let text = std::str::from_utf8(&bytes).map_err(|e| ApiError::bad(format!("the request body is not UTF-8: {e}")).dialect(d))?;
    serde_json::from_str(text).map_err(|e| ApiError::bad(format!("the request body is not valid JSON: {e}")).dialect(d))
}

/// The request id: `x-request-id` when given (printable, at most 128 bytes), else a fresh one.
fn request_id(req: &Request) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    req.headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_string)
        .unwrap_or_else(|| format!("{:x}{:04x}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis()), NEXT.fetch_add(1, Ordering::Relaxed) & 0xffff))
}

/// The key a request carries: `Authorization: Bearer` or `x-api-key`.
fn presented_key(req: &Request) -> Option<&str> {
    let h = req.headers();
    h.get("authorization").and_then(|v| v.to_str().ok()).and_then(|s| s.strip_prefix("Bearer ")).or_else(|| h.get("x-api-key").and_then(|v| v.to_str().ok()))
}

/// Whether `path` is served without the key: `/health` (for probes) and the page's static files (they hold no server data; the page asks for the key).
fn open_route(state: &AppState, path: &str) -> bool {
    path == "/health" || (state.ui && matches!(path, "/" | "/ui/app.js" | "/ui/app.css"))
}

/// Request ids on every reply, and the API key on every route but the open ones.
async fn guard(State(state): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let rid = request_id(&req);
    let path = req.uri().path().to_string();
    let dialect = if path.starts_with("/v1/messages") { Dialect::Anthropic } else { Dialect::OpenAi };
    let open = open_route(&state, &path);
    let mut resp = match (&state.api_key, open) {
        (Some(key), false) if presented_key(&req).is_none_or(|k| !constant_eq(k.as_bytes(), key.as_bytes())) => ApiError::new(StatusCode::UNAUTHORIZED, "a valid API key is required (Authorization: Bearer KEY or x-api-key)").dialect(dialect).into_response(),
        _ => {
            req.extensions_mut().insert(RequestId(rid.clone()));
            next.run(req).await
        }
    };
    if let Ok(v) = HeaderValue::from_str(&rid) {
        resp.headers_mut().insert("x-request-id", v);
    }
    resp
}

/// Whether two keys are equal, in time independent of where they differ and of their lengths: their SHA-256 digests are compared in full.
fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    let (da, db) = (Sha256::digest(a), Sha256::digest(b));
    da.iter().zip(db.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The request's id, set by the guard.
#[derive(Clone)]
struct RequestId(String);

fn rid_of(req: &Request) -> String {
    req.extensions().get::<RequestId>().map_or_else(|| "0".into(), |r| r.0.clone())
}

async fn health(State(state): State<Arc<AppState>>) -> Response {
    let st = state.status.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let id = state.identity().map(|i| i.json());
    let body = json!({ "status": if st.failure.is_some() { "failed" } else if st.ready { "ok" } else { "loading" }, "reason": st.failure, "identity": id, "running": st.lanes.len(), "waiting": st.waiting });
    let code = if st.ready && st.failure.is_none() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (code, axum::Json(body)).into_response()
}

async fn models(State(state): State<Arc<AppState>>) -> Response {
    let m = &state.model;
    axum::Json(json!({ "object": "list", "data": [{ "id": m.id, "object": "model", "created": 0, "owned_by": "lockstep", "context_length": m.context, "max_model_len": m.context, "lockstep": state.identity().map(|i| i.json()) }] })).into_response()
}

async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let st = state.status.lock().unwrap_or_else(|p| p.into_inner()).clone();
    ([("content-type", "text/plain; version=0.0.4")], state.metrics.render(&st, &state.model.id)).into_response()
}

async fn tokenize(State(state): State<Arc<AppState>>, req: Request) -> Result<Response, ApiError> {
    let body = json_body(&state, req, Dialect::OpenAi).await?;
    let f = Fields::new(&body, &["model", "prompt", "messages", "add_special_tokens"], Dialect::OpenAi)?;
    let ids = match (f.get("prompt"), f.get("messages")) {
        (Some(Value::String(p)), None) => {
            let mut ids = if f.bool("add_special_tokens")?.unwrap_or(true) { vec![state.model.bos] } else { Vec::new() };
            ids.extend(state.tok.encode(p).map_err(|e| f.err("prompt", e.to_string()))?);
            ids
        }
        (None, Some(m)) => {
            let (msgs, inputs) = chat::openai_messages(m)?;
            let text = crate::text::encode_chat(&msgs, &crate::text::ChatOptions { thinking: false, ..Default::default() }).map_err(|e| f.err("messages", e.to_string()))?;
            let ids = state.tok.encode_rendered(&text).map_err(|e| f.err("messages", format!("the conversation cannot be tokenized: {e}")))?;
            let (ids, images) = images::prepare(state.vision.as_ref(), Dialect::OpenAi, ids, inputs).await?;
            let count = images.iter().map(|i| i.len).sum::<usize>();
            return Ok(axum::Json(json!({ "tokens": ids, "count": ids.len(), "image_tokens": count, "max_model_len": state.model.context })).into_response());
        }
        _ => return Err(f.err("prompt", "give `prompt` (a string) or `messages`")),
    };
    Ok(axum::Json(json!({ "tokens": ids, "count": ids.len(), "image_tokens": 0, "max_model_len": state.model.context })).into_response())
}

async fn detokenize(State(state): State<Arc<AppState>>, req: Request) -> Result<Response, ApiError> {
    let body = json_body(&state, req, Dialect::OpenAi).await?;
    let f = Fields::new(&body, &["model", "tokens"], Dialect::OpenAi)?;
    let list = f.need("tokens")?.as_array().ok_or_else(|| f.err("tokens", "`tokens` must be a list of token ids"))?;
    let ids: Vec<u32> = list.iter().map(|x| x.as_u64().filter(|&t| (t as usize) < state.model.vocab).map(|t| t as u32).ok_or_else(|| f.err("tokens", format!("token id {x} is not in the vocabulary")))).collect::<Result<_, _>>()?;
    let text = state.tok.decode(&ids, false).map_err(|e| f.err("tokens", e.to_string()))?;
    Ok(axum::Json(json!({ "prompt": text })).into_response())
}

async fn route_completions(State(state): State<Arc<AppState>>, req: Request) -> Result<Response, ApiError> {
    let rid = rid_of(&req);
    let body = json_body(&state, req, Dialect::OpenAi).await?;
    openai::completions(state, rid, body).await
}

async fn route_chat(State(state): State<Arc<AppState>>, req: Request) -> Result<Response, ApiError> {
    let rid = rid_of(&req);
    let body = json_body(&state, req, Dialect::OpenAi).await?;
    openai::chat(state, rid, body).await
}

async fn route_messages(State(state): State<Arc<AppState>>, req: Request) -> Result<Response, ApiError> {
    let rid = rid_of(&req);
    let body = json_body(&state, req, Dialect::Anthropic).await?;
    anthropic::messages(state, rid, body).await.map_err(|e| e.dialect(Dialect::Anthropic))
}

async fn route_count(State(state): State<Arc<AppState>>, req: Request) -> Result<Response, ApiError> {
    let body = json_body(&state, req, Dialect::Anthropic).await?;
    anthropic::count_tokens(state, body).await.map_err(|e| e.dialect(Dialect::Anthropic))
}

async fn not_found(req: Request<Body>) -> Response {
    let d = if req.uri().path().starts_with("/v1/messages") { Dialect::Anthropic } else { Dialect::OpenAi };
    ApiError::new(StatusCode::NOT_FOUND, format!("no route {} {}", req.method(), req.uri().path())).dialect(d).into_response()
}

async fn wrong_method(req: Request<Body>) -> Response {
    let d = if req.uri().path().starts_with("/v1/messages") { Dialect::Anthropic } else { Dialect::OpenAi };
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, format!("{} does not take {}", req.uri().path(), req.method())).dialect(d).into_response()
}

/// The server's routes (the page's when `state.ui`).
pub fn router(state: Arc<AppState>) -> Router {
    let mut r = Router::new();
    if state.ui {
        r = r.route("/", get(page::index)).route("/ui/app.js", get(page::app_js)).route("/ui/app.css", get(page::app_css));
    }
    r.route("/health", get(health))
        .route("/status", get(page::status))
        .route("/metrics", get(metrics))
        .route("/v1/models", get(models))
        .route("/tokenize", post(tokenize))
        .route("/detokenize", post(detokenize))
        .route("/v1/completions", post(route_completions))
        .route("/v1/chat/completions", post(route_chat))
        .route("/v1/messages", post(route_messages))
        .route("/v1/messages/count_tokens", post(route_count))
        .fallback(not_found)
        .method_not_allowed_fallback(wrong_method)
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::constant_eq;

    #[test]
    fn keys_are_equal_only_when_every_byte_and_the_length_match() {
        let key = b"k3y-5ecr3t-0123456789";
        assert!(constant_eq(key, key));
        assert!(constant_eq(b"", b""));
        for other in [&key[..key.len() - 1], b"k3y-5ecr3t-0123456788", b"K3y-5ecr3t-0123456789", b"k3y-5ecr3t-01234567890", b""] {
            assert!(!constant_eq(other, key) && !constant_eq(key, other), "{}", String::from_utf8_lossy(other));
        }
    }
}
