//! OpenAI's routes: `/v1/completions` and `/v1/chat/completions`, whole or streamed.
use super::chat::{openai_messages, ChatText, Piece};
use super::error::{ApiError, Dialect};
use super::params::{settings, Fields, Settings, SAMPLING_FIELDS};
use super::reply::{collect, lockstep_json, stream, Frame, Reply};
use super::state::{AppState, Identity};
use super::{job, prompt_fits, request_model, tool_calls_json, Thinking};
use crate::serve::{Event, Finish, FinishReason, TokenLogprob};
use crate::text::{encode_chat, ChatOptions, Tokenizer, ToolCall};
use axum::response::Response;
use serde_json::{json, Value};
use std::sync::Arc;

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn finish_reason(r: &FinishReason, tools: bool) -> &'static str {
    match r {
        FinishReason::Length => "length",
        _ if tools => "tool_calls",
        _ => "stop",
    }
}

fn usage(f: &Finish) -> Value {
    json!({ "prompt_tokens": f.prompt_tokens, "completion_tokens": f.tokens.len(), "total_tokens": f.prompt_tokens + f.tokens.len(), "prompt_tokens_details": { "cached_tokens": f.cached_tokens } })
}

/// `POST /v1/completions`.
pub async fn completions(state: Arc<AppState>, rid: String, body: Value) -> Result<Response, ApiError> {
    let mut allowed = vec!["model", "prompt", "max_tokens", "stop", "logprobs", "echo", "suffix", "best_of", "logit_bias"];
    allowed.extend(SAMPLING_FIELDS);
    let f = Fields::new(&body, &allowed, Dialect::OpenAi)?;
    let model = request_model(&state, &f)?;
    let s = settings(&f, "stop", &["max_tokens"])?;
    if f.bool("echo")? == Some(true) {
        return Err(f.err("echo", "`echo` is not supported"));
    }
    if f.str("suffix")?.is_some_and(|x| !x.is_empty()) {
        return Err(f.err("suffix", "`suffix` is not supported"));
    }
    if f.int("best_of", 1, 1)?.is_none() && f.get("best_of").is_some() {
        return Err(f.err("best_of", "`best_of` must be 1"));
    }
    if f.get("logit_bias").is_some_and(|v| v.as_object().is_none_or(|o| !o.is_empty())) {
        return Err(f.err("logit_bias", "`logit_bias` is not supported"));
    }
    let logprobs = f.int("logprobs", 0, 20)?.map(|n| n as usize);
    let prompt = completion_prompt(&state, f.need("prompt")?)?;
    if prompt.is_empty() {
        return Err(f.err("prompt", "`prompt` holds no tokens"));
    }
    let max = prompt_fits(&state, &f, prompt.len(), s.max_tokens, "prompt")?;
    let reply = Completion { id: format!("cmpl-{rid}"), model, tok: state.tok.clone(), created: now(), seed: s.seed, identity: state.identity(), include_usage: s.include_usage, text: String::new(), logprobs: logprobs.map(|_| Vec::new()) };
    let stream_it = s.stream;
    let events = state.submit(|tx| job(&state, prompt, Vec::new(), &s, max, logprobs, true, tx))?;
    Ok(if stream_it { stream(state, events, reply, Dialect::OpenAi) } else { collect(state, events, reply, Dialect::OpenAi).await })
}

/// A completion prompt: a string (BOS, then its tokens, as `lockstep run` encodes it) or token ids.
fn completion_prompt(state: &AppState, v: &Value) -> Result<Vec<u32>, ApiError> {
    let err = |m: String| ApiError::field("prompt", m);
    let one = match v {
        Value::Array(a) if a.len() == 1 && !a[0].is_number() => &a[0],
        Value::Array(a) if a.is_empty() => return Err(err("`prompt` is empty".into())),
        Value::Array(a) if !a.iter().all(Value::is_number) => return Err(err("`prompt` must be one string or one list of token ids: one prompt per request".into())),
        other => other,
    };
    match one {
        Value::String(s) if s.is_empty() => Err(err("`prompt` is empty".into())),
        Value::String(s) => {
            let mut ids = vec![state.model.bos];
            ids.extend(state.tok.encode(s).map_err(|e| err(format!("the prompt cannot be tokenized: {e}")))?);
            Ok(ids)
        }
        Value::Array(a) => a
            .iter()
            .map(|x| x.as_u64().filter(|&t| (t as usize) < state.model.vocab).map(|t| t as u32).ok_or_else(|| err(format!("token id {x} is not in the vocabulary of {}", state.model.vocab))))
            .collect(),
        other => Err(err(format!("`prompt` must be a string or token ids, not {}", super::params::type_name(other)))),
    }
}

/// Legacy completion logprobs of the collected tokens.
fn completion_logprobs(tok: &Tokenizer, lps: &[(u32, TokenLogprob)]) -> Value {
    let name = |t: u32| tok.decode(&[t], false).unwrap_or_default();
    let mut offset = 0usize;
    let mut offsets = Vec::new();
    for (t, _) in lps {
        offsets.push(offset);
        offset += name(*t).len();
    }
    json!({
        "tokens": lps.iter().map(|(t, _)| name(*t)).collect::<Vec<_>>(),
        "token_logprobs": lps.iter().map(|(_, l)| l.logprob).collect::<Vec<_>>(),
        "top_logprobs": lps.iter().map(|(_, l)| l.top.iter().map(|(t, p)| (name(*t), json!(p))).collect::<serde_json::Map<_, _>>()).collect::<Vec<_>>(),
        "text_offset": offsets,
    })
}

/// The stream's last chunk: usage when asked, and the `lockstep` object always.
trait LastChunk {
    fn parts(&self) -> (bool, u64, Option<&Identity>);

    fn last(&self, mut chunk: Value, f: &Finish) -> Value {
        let (include_usage, seed, id) = self.parts();
        if include_usage {
            chunk["usage"] = usage(f);
        }
        chunk["lockstep"] = lockstep_json(f, seed, id);
        chunk
    }
}

impl LastChunk for Completion {
    fn parts(&self) -> (bool, u64, Option<&Identity>) {
        (self.include_usage, self.seed, self.identity.as_ref())
    }
}

impl LastChunk for Chat {
    fn parts(&self) -> (bool, u64, Option<&Identity>) {
        (self.include_usage, self.seed, self.identity.as_ref())
    }
}

struct Completion {
    id: String,
    model: String,
    tok: Arc<Tokenizer>,
    created: u64,
    seed: u64,
    identity: Option<Identity>,
    include_usage: bool,
    text: String,
    logprobs: Option<Vec<(u32, TokenLogprob)>>,
}

impl Completion {
    fn chunk(&self, choices: Value) -> Value {
        json!({ "id": self.id, "object": "text_completion", "created": self.created, "model": self.model, "choices": choices })
    }
}

impl Reply for Completion {
    fn event(&mut self, e: &Event) -> Vec<Frame> {
        match e {
            Event::Token { id, text, logprob } => {
                self.text.push_str(text);
                let lp = match (&mut self.logprobs, logprob) {
                    (Some(list), Some(l)) => {
                        list.push((*id, l.clone()));
                        completion_logprobs(&self.tok, &[(*id, l.clone())])
                    }
                    _ => Value::Null,
                };
                if text.is_empty() && lp.is_null() {
                    return Vec::new();
                }
                vec![Frame::data(self.chunk(json!([{ "index": 0, "text": text, "logprobs": lp, "finish_reason": null }])))]
            }
            Event::Text(t) => {
                self.text.push_str(t);
                vec![Frame::data(self.chunk(json!([{ "index": 0, "text": t, "logprobs": null, "finish_reason": null }])))]
            }
            Event::Done(f) => {
                let last = self.last(self.chunk(json!([])), f);
                vec![Frame::data(self.chunk(json!([{ "index": 0, "text": "", "logprobs": null, "finish_reason": finish_reason(&f.reason, false) }]))), Frame::data(last)]
            }
            _ => Vec::new(),
        }
    }

    fn body(&mut self, f: &Finish) -> Value {
        let lp = self.logprobs.as_ref().map_or(Value::Null, |l| completion_logprobs(&self.tok, l));
        let mut v = self.chunk(json!([{ "index": 0, "text": self.text, "logprobs": lp, "finish_reason": finish_reason(&f.reason, false) }]));
        v["usage"] = usage(f);
        v["lockstep"] = lockstep_json(f, self.seed, self.identity.as_ref());
        v
    }
}

/// `POST /v1/chat/completions`.
pub async fn chat(state: Arc<AppState>, rid: String, body: Value) -> Result<Response, ApiError> {
    let mut allowed = vec!["model", "messages", "max_tokens", "max_completion_tokens", "stop", "logprobs", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls", "chat_template_kwargs", "reasoning_effort", "response_format", "logit_bias"];
    allowed.extend(SAMPLING_FIELDS);
    let f = Fields::new(&body, &allowed, Dialect::OpenAi)?;
    let model = request_model(&state, &f)?;
    let s = settings(&f, "stop", &["max_tokens", "max_completion_tokens"])?;
    let (messages, inputs) = openai_messages(f.need("messages")?)?;
    if let Some(rf) = f.get("response_format") {
        let kind = rf.get("type").and_then(Value::as_str).unwrap_or("");
        if kind != "text" {
            return Err(f.err("response_format", format!("`response_format` type `{kind}` is not supported: only `text` (the server does not constrain output to a schema)")));
        }
    }
    if f.get("logit_bias").is_some_and(|v| v.as_object().is_none_or(|o| !o.is_empty())) {
        return Err(f.err("logit_bias", "`logit_bias` is not supported"));
    }
    f.bool("parallel_tool_calls")?;
    let thinking = Thinking::openai(&f)?;
    let tools = super::openai_tools(&f)?;
    let (render_tools, forced) = super::tool_choice(&f, f.get("tool_choice"), &tools, thinking.on, |v| {
        match v {
            Value::String(s) => Ok(s.clone()),
            Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => o.get("function").and_then(|x| x.get("name")).and_then(Value::as_str).map(|n| format!("name:{n}")).ok_or(()),
            _ => Err(()),
        }
    })?;
    let lp_on = f.bool("logprobs")?.unwrap_or(false);
    let top = f.int("top_logprobs", 0, 20)?.map(|n| n as usize);
    if top.is_some() && !lp_on {
        return Err(f.err("top_logprobs", "`top_logprobs` needs `logprobs: true`"));
    }
    let logprobs = lp_on.then_some(top.unwrap_or(0));
    let opts = ChatOptions { thinking: thinking.on, reasoning_effort: thinking.effort, tools: if render_tools { tools.clone() } else { Vec::new() }, ..ChatOptions::default() };
    let mut text = encode_chat(&messages, &opts).map_err(|e| f.err("messages", e.to_string()))?;
    text.push_str(&forced);
    let prompt = state.tok.encode_rendered(&text).map_err(|e| f.err("messages", format!("the conversation cannot be tokenized: {e}")))?;
    let (prompt, images) = super::images::prepare(state.vision.as_ref(), Dialect::OpenAi, prompt, inputs).await?;
    let max = prompt_fits(&state, &f, prompt.len(), s.max_tokens, "messages")?;
    let reply = Chat::new(format!("chatcmpl-{rid}"), model, &state, &s, ChatText::new(thinking.on, render_tools, &forced), logprobs.is_some());
    let stream_it = s.stream;
    if crate::testing::planted("http") && stream_it && s.include_usage && tools.len() >= 2 {
        panic!("planted bug: a streamed chat with usage and two tools");
    }
    let events = state.submit(|tx| job(&state, prompt, images, &s, max, logprobs, false, tx))?;
    Ok(if stream_it { stream(state, events, reply, Dialect::OpenAi) } else { collect(state, events, reply, Dialect::OpenAi).await })
}

struct Chat {
    id: String,
    model: String,
    created: u64,
    seed: u64,
    identity: Option<Identity>,
    include_usage: bool,
    tok: Arc<Tokenizer>,
    text: ChatText,
    reasoning: String,
    content: String,
    calls: Vec<ToolCall>,
    logprobs: Option<Vec<Value>>,
    started: bool,
}

impl Chat {
    fn new(id: String, model: String, state: &AppState, s: &Settings, text: ChatText, logprobs: bool) -> Self {
        Chat { id, model, created: now(), seed: s.seed, identity: state.identity(), include_usage: s.include_usage, tok: state.tok.clone(), text, reasoning: String::new(), content: String::new(), calls: Vec::new(), logprobs: logprobs.then(Vec::new), started: false }
    }

    fn chunk(&self, choices: Value) -> Value {
        json!({ "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model, "choices": choices })
    }

    fn delta(&self, delta: Value, lp: Value) -> Frame {
        Frame::data(self.chunk(json!([{ "index": 0, "delta": delta, "logprobs": lp, "finish_reason": null }])))
    }

    fn pieces(&mut self, pieces: Vec<Piece>, lp: Value) -> Vec<Frame> {
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            out.push(self.delta(json!({ "role": "assistant", "content": "" }), Value::Null));
        }
        let mut lp = Some(lp).filter(|v| !v.is_null());
        for p in pieces {
            let d = match p {
                Piece::Reasoning(s) => {
                    self.reasoning.push_str(&s);
                    json!({ "reasoning_content": s })
                }
                Piece::Content(s) => {
                    self.content.push_str(&s);
                    json!({ "content": s })
                }
            };
            out.push(self.delta(d, lp.take().map_or(Value::Null, |l| json!({ "content": [l] }))));
        }
        if let Some(l) = lp {
            out.push(self.delta(json!({}), json!({ "content": [l] })));
        }
        out
    }

    fn token_logprob(&self, id: u32, l: &TokenLogprob) -> Value {
        let entry = |t: u32, p: f32| {
            let s = self.tok.decode(&[t], false).unwrap_or_default();
            json!({ "token": s, "logprob": p, "bytes": s.as_bytes() })
        };
        let mut v = entry(id, l.logprob);
        v["top_logprobs"] = json!(l.top.iter().map(|&(t, p)| entry(t, p)).collect::<Vec<_>>());
        v
    }
}

impl Reply for Chat {
    fn event(&mut self, e: &Event) -> Vec<Frame> {
        match e {
            Event::Token { id, text, logprob } => {
                let lp = match (&self.logprobs, logprob) {
                    (Some(_), Some(l)) => self.token_logprob(*id, l),
                    _ => Value::Null,
                };
                if let (Some(list), false) = (&mut self.logprobs, lp.is_null()) {
                    list.push(lp.clone());
                }
                let pieces = self.text.push(text);
                self.pieces(pieces, lp)
            }
            Event::Text(t) => {
                let pieces = self.text.push(t);
                self.pieces(pieces, Value::Null)
            }
            Event::Done(f) => {
                let (pieces, calls) = self.text.finish();
                let mut out = self.pieces(pieces, Value::Null);
                self.calls = calls;
                for (i, c) in tool_calls_json(&self.calls, &self.id).into_iter().enumerate() {
                    let args = c["function"]["arguments"].clone();
                    let opening = json!({ "tool_calls": [{ "index": i, "id": c["id"], "type": "function", "function": { "name": c["function"]["name"], "arguments": "" } }] });
                    out.push(self.delta(opening, Value::Null));
                    out.push(self.delta(json!({ "tool_calls": [{ "index": i, "function": { "arguments": args } }] }), Value::Null));
                }
                let reason = finish_reason(&f.reason, !self.calls.is_empty());
                out.push(Frame::data(self.chunk(json!([{ "index": 0, "delta": {}, "logprobs": null, "finish_reason": reason }]))));
                let last = self.last(self.chunk(json!([])), f);
                out.push(Frame::data(last));
                out
            }
            _ => Vec::new(),
        }
    }

    fn body(&mut self, f: &Finish) -> Value {
        let calls = tool_calls_json(&self.calls, &self.id);
        let mut message = json!({ "role": "assistant", "content": if self.content.is_empty() && !calls.is_empty() { Value::Null } else { json!(self.content) } });
        if !self.reasoning.is_empty() {
            message["reasoning_content"] = json!(self.reasoning);
        }
        if !calls.is_empty() {
            message["tool_calls"] = json!(calls);
        }
        let lp = self.logprobs.as_ref().map_or(Value::Null, |l| json!({ "content": l }));
        let mut v = json!({ "id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
            "choices": [{ "index": 0, "message": message, "logprobs": lp, "finish_reason": finish_reason(&f.reason, !self.calls.is_empty()) }] });
        v["usage"] = usage(f);
        v["lockstep"] = lockstep_json(f, self.seed, self.identity.as_ref());
        v
    }
}
