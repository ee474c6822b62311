//! Every route's request parsing, in-process through the server's router, over a host that answers each job with a short reply (plain, thinking, or a tool call).
use super::{error_label, split_line, Target};
use crate::api::images::{Vision, VisionLimits};
use crate::api::state::{AppState, ModelInfo};
use crate::serve::{token_sha, Command, Event, Finish, FinishReason, Speculative, Status};
use crate::text::{Detokenizer, Tokenizer};
use axum::body::Body;
use axum::http::Request;
use serde_json::{json, Value};
use std::sync::{mpsc, Arc, Mutex};
use tower::ServiceExt;

/// The router over a stand-in host, driven on a single-threaded runtime.
pub struct Http {
    router: axum::Router,
    rt: tokio::runtime::Runtime,
}

/// The replies the stand-in host gives, by prompt length.
const REPLIES: &[&str] = &[
    "Hello there.",
    "Let me think.</think>Sure: 42.<｜end▁of▁sentence｜>",
    "</think>\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n<｜DSML｜ parameter name=\"city\" string=\"true\">Paris</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls><｜end▁of▁sentence｜>",
];

/// Answers every job with one of [`REPLIES`] as its tokens, then a finish.
fn host(rx: mpsc::Receiver<Command>, tok: Arc<Tokenizer>) {
    for c in rx {
        let Command::Submit(job) = c else { continue };
        let reply = REPLIES[job.prompt.len() % REPLIES.len()];
        let ids: Vec<u32> = tok.encode_rendered(reply).unwrap_or_default().into_iter().take(job.max_tokens.max(1)).collect();
        let _ = job.events.send(Event::Started { cached_tokens: 0 });
        let mut detok = Detokenizer::new(job.skip_special);
        for &id in &ids {
            let text = detok.push(&tok, id).unwrap_or_default();
            let logprob = job.logprobs.map(|n| crate::serve::TokenLogprob { logprob: -0.5, top: (0..n as u32).map(|i| (i, -1.0 - i as f32)).collect() });
            let _ = job.events.send(Event::Token { id, text, logprob });
        }
        let tail = detok.finish(&tok).unwrap_or_default();
        if !tail.is_empty() {
            let _ = job.events.send(Event::Text(tail));
        }
        let reason = if ids.len() >= job.max_tokens { FinishReason::Length } else { FinishReason::Stop };
        let finish = Finish {
            reason,
            token_sha: token_sha(&ids),
            tokens: ids,
            logits_sha: job.logits_sha.then(|| "0".repeat(64)),
            prompt_tokens: job.prompt.len(),
            cached_tokens: 0,
            prefilled_tokens: job.prompt.len(),
            queue_s: 0.0,
            ttft_s: 0.0,
            prefill_s: 0.0,
            decode_tok_s: 0.0,
            speculative: Speculative::default(),
            token_ids: job.token_ids,
        };
        let _ = job.events.send(Event::Done(finish));
    }
}

impl Http {
    /// The target over the tokenizer `LOCKSTEP_TOKENIZER` (or the repository's) names, taking images.
    pub fn new() -> Result<Http, String> {
        let path = crate::text::find_tokenizer_json(std::path::Path::new(".")).ok_or("no tokenizer.json: set LOCKSTEP_TOKENIZER or run scripts/fetch_tokenizer.sh")?;
        let tok = Arc::new(Tokenizer::from_file(&path).map_err(|e| format!("{}: {e}", path.display()))?);
        let (tx, rx) = mpsc::channel();
        let host_tok = tok.clone();
        std::thread::Builder::new().name("fuzz-host".into()).spawn(move || host(rx, host_tok)).map_err(|e| e.to_string())?;
        let status = Arc::new(Mutex::new(Status { ready: true, ..Status::default() }));
        let model = ModelInfo { id: "m".into(), context: 4096, max_tokens: 16, bos: 0, stop_ids: vec![1], vocab: tok.vocab_size() };
        let settings = crate::vision::Settings { min_pixels: 56 * 56, max_pixels: 1 << 16, max_image_tokens: 64, ..crate::vision::Settings::release() };
        settings.check().map_err(|e| e.to_string())?;
        let limits = VisionLimits { settings, max_images: 2, max_image_bytes: 1 << 16, max_image_tokens: 128, image_token: tok.token_to_id("<｜deepseek_image｜>").unwrap_or(2) };
        let state = AppState::new(tx, tok, status, model, None, 8, 2).with_vision(Some(Vision::new(limits, 1))).with_ui(false);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        Ok(Http { router: crate::api::router(Arc::new(state)), rt })
    }
}

fn png_data_url() -> String {
    let img = image::RgbImage::from_fn(8, 6, |x, y| image::Rgb([(x * 30) as u8, (y * 40) as u8, 99]));
    let mut out = std::io::Cursor::new(Vec::new());
    let _ = image::DynamicImage::ImageRgb8(img).write_to(&mut out, image::ImageFormat::Png);
    format!("data:image/png;base64,{}", base64(&out.into_inner()))
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            out.push(if i <= c.len() { A[(n >> (18 - 6 * i)) as usize & 63] as char } else { '=' });
        }
    }
    out
}

impl Target for Http {
    fn name(&self) -> &'static str {
        "http"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let tool = json!({"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}});
        let img = png_data_url();
        let chat = json!({"model": "m", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}], "tools": [tool], "tool_choice": "auto", "stream": true, "stream_options": {"include_usage": true}, "temperature": 0.7, "seed": 3, "max_tokens": 12});
        let chat_image = json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": img}}]}], "max_completion_tokens": 8, "logprobs": true, "top_logprobs": 2});
        let chat_tools_back = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}, {"role": "tool", "tool_call_id": "c1", "content": "18 C"}], "reasoning_effort": "high", "stop": ["\n"], "n": 1});
        let completion = json!({"model": "m", "prompt": "Once upon a time", "max_tokens": 8, "stream": false, "logprobs": 2, "echo": false, "stop": "x", "top_p": 0.9});
        let messages = json!({"model": "m", "max_tokens": 16, "system": "Be brief.", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": img.split(',').nth(1).unwrap_or("")}}]}], "tools": [{"name": "get_weather", "description": "w", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}], "thinking": {"type": "enabled", "budget_tokens": 1024}, "stream": true});
        let messages_tool = json!({"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "18 C"}]}], "tool_choice": {"type": "any"}, "stop_sequences": ["END"], "temperature": 0.0});
        let count = json!({"model": "m", "messages": [{"role": "user", "content": "count me"}], "system": [{"type": "text", "text": "sys"}]});
        let tokenize = json!({"model": "m", "prompt": "Hello world", "add_special_tokens": true});
        let detokenize = json!({"model": "m", "tokens": [1, 2, 3, 4000]});
        [
            ("/v1/chat/completions", chat),
            ("/v1/chat/completions", chat_image),
            ("/v1/chat/completions", chat_tools_back),
            ("/v1/completions", completion),
            ("/v1/messages", messages),
            ("/v1/messages", messages_tool),
            ("/v1/messages/count_tokens", count),
            ("/tokenize", tokenize),
            ("/detokenize", detokenize),
        ]
        .into_iter()
        .map(|(p, b)| format!("{p}\n{b}").into_bytes())
        .chain(["GET /v1/models\n", "GET /status\n", "GET /metrics\n", "GET /health\n"].into_iter().map(|s| s.as_bytes().to_vec()))
        .collect()
    }

    fn dictionary(&self) -> Vec<Vec<u8>> {
        let words = [
            "stream", "stream_options", "include_usage", "tools", "tool_choice", "required", "none", "auto", "function", "parameters", "messages", "role", "content",
            "system", "user", "assistant", "tool", "developer", "tool_calls", "tool_call_id", "image_url", "url", "detail", "image", "source", "base64", "media_type",
            "tool_use", "tool_result", "thinking", "budget_tokens", "reasoning_effort", "max_tokens", "max_completion_tokens", "temperature", "top_p", "top_k", "seed",
            "stop", "stop_sequences", "logprobs", "top_logprobs", "n", "echo", "prompt", "tokens", "response_format", "json_schema", "lockstep", "token_ids",
            "/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens", "/tokenize", "/detokenize", "GET ", "<｜DSML｜ calls>",
        ];
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    fn json(&self) -> bool {
        true
    }

    fn run(&mut self, input: &[u8]) -> Result<String, String> {
        let (line, body) = split_line(input);
        let line = String::from_utf8_lossy(line);
        let (method, path) = match line.split_once(' ') {
            Some((m, p)) if m.chars().all(|c| c.is_ascii_uppercase()) && !m.is_empty() => (m.to_string(), p.trim().to_string()),
            _ => ("POST".to_string(), line.trim().to_string()),
        };
        let Ok(req) = Request::builder().method(method.as_str()).uri(path.as_str()).header("content-type", "application/json").body(Body::from(body.to_vec())) else {
            return Ok("request".into());
        };
        let router = self.router.clone();
        let (status, bytes) = self.rt.block_on(async move {
            let resp = router.oneshot(req).await.map_err(|e| format!("router error: {e}"))?;
            let status = resp.status();
            let bytes = axum::body::to_bytes(resp.into_body(), 1 << 26).await.map_err(|e| format!("body error: {e}"))?;
            Ok::<_, String>((status, bytes))
        })?;
        let text = String::from_utf8_lossy(&bytes);
        if status.is_server_error() {
            return Err(format!("{status} for {method} {path}: {text}"));
        }
        const ROUTES: &[&str] = &["/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens", "/tokenize", "/detokenize", "/v1/models", "/status", "/metrics", "/health"];
        let route = ROUTES.iter().find(|r| path.split('?').next() == Some(**r)).copied().unwrap_or("other");
        if status.is_client_error() {
            let v: Value = serde_json::from_slice(&bytes).map_err(|_| format!("{status} for {route} is not JSON: {text}"))?;
            let msg = v["error"]["message"].as_str().ok_or_else(|| format!("{status} for {route} has no error.message: {text}"))?;
            if route == "other" || status.as_u16() == 404 {
                return Ok(format!("{route}:{}", status.as_u16()));
            }
            return Ok(error_label(&format!("{route}:{}", status.as_u16()), msg));
        }
        if text.starts_with("event:") || text.starts_with("data:") {
            for data in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
                if data != "[DONE]" && serde_json::from_str::<Value>(data).is_err() {
                    return Err(format!("a stream of {route} carries a data line that is not JSON: {data}"));
                }
            }
            return Ok(format!("{route}:stream:{}", text.contains("error")));
        }
        Ok(format!("{route}:{}", status.as_u16()))
    }
}
