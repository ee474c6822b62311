//! Anthropic's routes: `/v1/messages` (whole or streamed as its named events) and `/v1/messages/count_tokens`.
use super::chat::{anthropic_messages, ChatText, Piece};
use super::error::{ApiError, Dialect};
use super::params::{settings, Fields, SAMPLING_FIELDS};
use super::reply::{collect, lockstep_json, stream, Frame, Reply};
use super::state::{AppState, Identity};
use super::{job, prompt_fits, request_model, tool_choice};
use super::images::prepare;
use crate::serve::{Event, Finish, FinishReason, JobImage};
use crate::text::{encode_chat, ChatOptions, ReasoningEffort, ToolCall};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::sync::Arc;

const FIELDS: &[&str] = &["model", "messages", "system", "max_tokens", "stop_sequences", "tools", "tool_choice", "thinking", "anthropic_version", "service_tier"];

/// Anthropic tools (`name`, `description`, `input_schema`) in the OpenAI form the chat encoding renders.
fn tools(f: &Fields<'_>) -> Result<Vec<Value>, ApiError> {
    let Some(v) = f.get("tools") else { return Ok(Vec::new()) };
    let list = v.as_array().ok_or_else(|| f.err("tools", "`tools` must be a list"))?;
    list.iter()
        .enumerate()
        .map(|(i, t)| {
            let name = t.get("name").and_then(Value::as_str).filter(|n| !n.is_empty() && !n.contains('"') && !n.contains('<')).ok_or_else(|| f.err(&format!("tools[{i}].name"), "every tool needs a `name` without quotes or angle brackets"))?;
            let schema = t.get("input_schema").filter(|s| s.is_object()).ok_or_else(|| f.err(&format!("tools[{i}].input_schema"), "every tool needs an object `input_schema`"))?;
            if t.get("description").is_some_and(|d| !d.is_string() && !d.is_null()) {
                return Err(f.err(&format!("tools[{i}].description"), "a tool's description must be a string"));
            }
            Ok(json!({ "type": "function", "function": { "name": name, "description": t.get("description").cloned().unwrap_or(json!("")), "parameters": schema } }))
        })
        .collect()
}

/// Thinking from `thinking: {type: enabled|disabled, budget_tokens}`.
fn thinking(f: &Fields<'_>) -> Result<bool, ApiError> {
    let Some(t) = f.get("thinking") else { return Ok(false) };
    let o = Fields::nested(t, "thinking", &["type", "budget_tokens"], Dialect::Anthropic)?;
    o.int("budget_tokens", 1, 1 << 24)?;
    match o.str("type")? {
        Some("enabled") => Ok(true),
        Some("disabled") => Ok(false),
        _ => Err(o.err("thinking.type", "`thinking.type` must be `enabled` or `disabled`")),
    }
}

/// The prompt of a messages request (its images' spans expanded), with its images, thinking mode, whether tools render, and the forced output opening.
async fn prompt(state: &AppState, f: &Fields<'_>) -> Result<(Vec<u32>, Vec<JobImage>, bool, bool, String), ApiError> {
    let (msgs, inputs) = anthropic_messages(f.get("system"), f.need("messages")?)?;
    let on = thinking(f)?;
    let tools = tools(f)?;
    let (render, forced) = tool_choice(f, f.get("tool_choice"), &tools, on, |v| {
        let kind = v.get("type").and_then(Value::as_str).ok_or(())?;
        match kind {
            "auto" | "any" | "none" => Ok(kind.to_string()),
            "tool" => v.get("name").and_then(Value::as_str).map(|n| format!("name:{n}")).ok_or(()),
            _ => Err(()),
        }
    })?;
    let opts = ChatOptions { thinking: on, reasoning_effort: ReasoningEffort::default(), tools: if render { tools } else { Vec::new() }, ..ChatOptions::default() };
    let mut text = encode_chat(&msgs, &opts).map_err(|e| f.err("messages", e.to_string()))?;
    text.push_str(&forced);
    let ids = state.tok.encode_rendered(&text).map_err(|e| f.err("messages", format!("the conversation cannot be tokenized: {e}")))?;
    let (ids, images) = prepare(state.vision.as_ref(), Dialect::Anthropic, ids, inputs).await?;
    Ok((ids, images, on, render, forced))
}

/// `POST /v1/messages/count_tokens`.
pub async fn count_tokens(state: Arc<AppState>, body: Value) -> Result<Response, ApiError> {
    let f = Fields::new(&body, &["model", "messages", "system", "tools", "tool_choice", "thinking"], Dialect::Anthropic)?;
    request_model(&state, &f)?;
    let (ids, ..) = prompt(&state, &f).await?;
    Ok(axum::Json(json!({ "input_tokens": ids.len() })).into_response())
}

/// `POST /v1/messages`.
pub async fn messages(state: Arc<AppState>, rid: String, body: Value) -> Result<Response, ApiError> {
    let mut allowed = FIELDS.to_vec();
    allowed.extend(SAMPLING_FIELDS);
    let f = Fields::new(&body, &allowed, Dialect::Anthropic)?;
    let model = request_model(&state, &f)?;
    f.need("max_tokens")?;
    f.str("anthropic_version")?;
    f.str("service_tier")?;
    let s = settings(&f, "stop_sequences", &["max_tokens"])?;
    let (ids, images, on, render, forced) = prompt(&state, &f).await?;
    let max = prompt_fits(&state, &f, ids.len(), s.max_tokens, "messages")?;
    let reply = Message { id: format!("msg_{rid}"), model, seed: s.seed, identity: state.identity(), text: ChatText::new(on, render, &forced), blocks: Vec::new(), open: None, calls: Vec::new(), input_tokens: ids.len() };
    let stream_it = s.stream;
    let events = state.submit(|tx| job(&state, ids, images, &s, max, None, false, tx))?;
    Ok(if stream_it { stream(state, events, reply, Dialect::Anthropic) } else { collect(state, events, reply, Dialect::Anthropic).await })
}

struct Message {
    id: String,
    model: String,
    seed: u64,
    identity: Option<Identity>,
    text: ChatText,
    blocks: Vec<(&'static str, String)>,
    open: Option<&'static str>,
    calls: Vec<ToolCall>,
    input_tokens: usize,
}

impl Message {
    /// Frames for new pieces: a block opens when the kind changes.
    fn pieces(&mut self, pieces: Vec<Piece>) -> Vec<Frame> {
        let mut out = Vec::new();
        for p in pieces {
            let (kind, s) = match p {
                Piece::Reasoning(s) => ("thinking", s),
                Piece::Content(s) => ("text", s),
            };
            if self.open != Some(kind) {
                out.extend(self.close_block());
                let index = self.blocks.len();
                let start = if kind == "thinking" { json!({ "type": "thinking", "thinking": "", "signature": "" }) } else { json!({ "type": "text", "text": "" }) };
                out.push(Frame::named("content_block_start", json!({ "type": "content_block_start", "index": index, "content_block": start })));
                self.blocks.push((kind, String::new()));
                self.open = Some(kind);
            }
            let index = self.blocks.len() - 1;
            self.blocks[index].1.push_str(&s);
            let delta = if kind == "thinking" { json!({ "type": "thinking_delta", "thinking": s }) } else { json!({ "type": "text_delta", "text": s }) };
            out.push(Frame::named("content_block_delta", json!({ "type": "content_block_delta", "index": index, "delta": delta })));
        }
        out
    }

    fn close_block(&mut self) -> Vec<Frame> {
        match self.open.take() {
            Some(_) => vec![Frame::named("content_block_stop", json!({ "type": "content_block_stop", "index": self.blocks.len() - 1 }))],
            None => Vec::new(),
        }
    }

    fn stop_reason(&self, f: &Finish) -> (&'static str, Value) {
        match &f.reason {
            FinishReason::Length => ("max_tokens", Value::Null),
            FinishReason::StopString(s) => ("stop_sequence", json!(s)),
            FinishReason::Stop if !self.calls.is_empty() => ("tool_use", Value::Null),
            FinishReason::Stop => ("end_turn", Value::Null),
        }
    }

    fn usage(&self, f: &Finish) -> Value {
        json!({ "input_tokens": f.prompt_tokens - f.cached_tokens, "output_tokens": f.tokens.len(), "cache_read_input_tokens": f.cached_tokens, "cache_creation_input_tokens": 0 })
    }

    fn tool_id(&self, i: usize) -> String {
        format!("toolu_{}_{i}", self.id.trim_start_matches("msg_"))
    }

    fn input(c: &ToolCall) -> Value {
        serde_json::from_str::<Value>(&c.arguments).ok().filter(Value::is_object).unwrap_or_else(|| json!({ "arguments": c.arguments }))
    }
}

impl Reply for Message {
    fn event(&mut self, e: &Event) -> Vec<Frame> {
        match e {
            Event::Started { cached_tokens } => vec![
                Frame::named("message_start", json!({ "type": "message_start", "message": { "id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [], "stop_reason": null, "stop_sequence": null, "usage": { "input_tokens": self.input_tokens - cached_tokens, "output_tokens": 0, "cache_read_input_tokens": cached_tokens, "cache_creation_input_tokens": 0 } } })),
                Frame::named("ping", json!({ "type": "ping" })),
            ],
            Event::Token { text, .. } | Event::Text(text) => {
                let p = self.text.push(text);
                self.pieces(p)
            }
            Event::Done(f) => {
                let (pieces, calls) = self.text.finish();
                let mut out = self.pieces(pieces);
                out.extend(self.close_block());
                self.calls = calls;
                for (i, c) in self.calls.clone().iter().enumerate() {
                    let index = self.blocks.len();
                    self.blocks.push(("tool_use", String::new()));
                    out.push(Frame::named("content_block_start", json!({ "type": "content_block_start", "index": index, "content_block": { "type": "tool_use", "id": self.tool_id(i), "name": c.name, "input": {} } })));
                    out.push(Frame::named("content_block_delta", json!({ "type": "content_block_delta", "index": index, "delta": { "type": "input_json_delta", "partial_json": Message::input(c).to_string() } })));
                    out.push(Frame::named("content_block_stop", json!({ "type": "content_block_stop", "index": index })));
                }
                let (reason, seq) = self.stop_reason(f);
                out.push(Frame::named("message_delta", json!({ "type": "message_delta", "delta": { "stop_reason": reason, "stop_sequence": seq }, "usage": self.usage(f), "lockstep": lockstep_json(f, self.seed, self.identity.as_ref()) })));
                out.push(Frame::named("message_stop", json!({ "type": "message_stop" })));
                out
            }
            _ => Vec::new(),
        }
    }

    fn close(&mut self) -> Vec<Frame> {
        Vec::new()
    }

    fn error_frame(&mut self, e: &ApiError) -> Frame {
        Frame::named("error", e.clone().dialect(Dialect::Anthropic).body())
    }

    fn body(&mut self, f: &Finish) -> Value {
        let mut content: Vec<Value> = self
            .blocks
            .iter()
            .filter(|(k, _)| *k != "tool_use")
            .map(|(k, s)| if *k == "thinking" { json!({ "type": "thinking", "thinking": s, "signature": "" }) } else { json!({ "type": "text", "text": s }) })
            .collect();
        for (i, c) in self.calls.iter().enumerate() {
            content.push(json!({ "type": "tool_use", "id": self.tool_id(i), "name": c.name, "input": Message::input(c) }));
        }
        let (reason, seq) = self.stop_reason(f);
        json!({ "id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content, "stop_reason": reason, "stop_sequence": seq, "usage": self.usage(f), "lockstep": lockstep_json(f, self.seed, self.identity.as_ref()) })
    }
}
