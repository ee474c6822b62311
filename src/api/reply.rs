//! A job's events turned into a reply: collected into one JSON body, or streamed as Server-Sent Events in the route's own shapes.
use super::error::ApiError;
use super::state::{AppState, Identity, JobEvents};
use crate::serve::{Event, Finish, JobError};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;

/// One SSE event: its name (Anthropic names them) and data.
pub struct Frame {
    /// The `event:` line.
    pub name: Option<&'static str>,
    /// The `data:` line.
    pub data: String,
}

impl Frame {
    /// An unnamed frame of JSON.
    pub fn data(v: Value) -> Frame {
        Frame { name: None, data: v.to_string() }
    }

    /// A named frame of JSON.
    pub fn named(name: &'static str, v: Value) -> Frame {
        Frame { name: Some(name), data: v.to_string() }
    }
}

/// A route's reply shape.
pub trait Reply: Send + 'static {
    /// Frames for one event (ignored when not streaming).
    fn event(&mut self, e: &Event) -> Vec<Frame>;
    /// The frames that close a stream after the finish (OpenAI's `[DONE]`).
    fn close(&mut self) -> Vec<Frame> {
        vec![Frame { name: None, data: "[DONE]".into() }]
    }
    /// The error frame of a failed stream.
    fn error_frame(&mut self, e: &ApiError) -> Frame {
        Frame::data(e.body())
    }
    /// The whole reply as one body.
    fn body(&mut self, finish: &Finish) -> Value;
}

/// The status a job error gets.
pub fn job_error(e: &JobError) -> ApiError {
    match e {
        JobError::Invalid(m) => ApiError::bad(m.clone()),
        JobError::Unavailable(m) => ApiError { retry_after: Some(1), ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, m.clone()) },
        JobError::Engine(m) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, m.clone()),
        JobError::TimedOut(m) => ApiError::new(StatusCode::GATEWAY_TIMEOUT, m.clone()),
    }
}

/// The `lockstep` object every reply carries.
pub fn lockstep_json(f: &Finish, seed: u64, id: Option<&Identity>) -> Value {
    let mut v = json!({
        "token_sha": f.token_sha,
        "seed": seed,
        "prefilled_tokens": f.prefilled_tokens,
        "cached_tokens": f.cached_tokens,
        "ttft_s": f.ttft_s,
        "prefill_s": f.prefill_s,
        "decode_tok_s": f.decode_tok_s,
        "queue_s": f.queue_s,
        "speculative": { "rounds": f.speculative.rounds, "drafted": f.speculative.drafted, "accepted": f.speculative.accepted },
    });
    if let Some(h) = &f.logits_sha {
        v["logits_sha"] = json!(h);
    }
    if f.token_ids {
        v["token_ids"] = json!(f.tokens);
    }
    if let Some(id) = id {
        v["identity"] = id.json();
    }
    v
}

/// Waits for the job's end and answers with `reply`'s body, or the job's error in the route's shape.
pub async fn collect<R: Reply>(state: Arc<AppState>, mut events: JobEvents, mut reply: R, dialect: super::error::Dialect) -> Response {
    loop {
        match events.next().await {
            Some(Event::Done(f)) => {
                reply.event(&Event::Done(f.clone()));
                state.metrics.finished(&f);
                return axum::Json(reply.body(&f)).into_response();
            }
            Some(Event::Error(e)) => {
                state.metrics.failed();
                return job_error(&e).dialect(dialect).into_response();
            }
            Some(e) => {
                reply.event(&e);
            }
            None => {
                state.metrics.failed();
                return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "the engine dropped the request").dialect(dialect).into_response();
            }
        }
    }
}

struct Streaming<R> {
    events: JobEvents,
    reply: R,
    state: Arc<AppState>,
    out: VecDeque<Frame>,
    ended: bool,
    dialect: super::error::Dialect,
}

/// Streams `reply`'s frames as SSE until the finish (or an error frame); a dropped client drops the job.
pub fn stream<R: Reply>(state: Arc<AppState>, events: JobEvents, reply: R, dialect: super::error::Dialect) -> Response {
    let s = Streaming { events, reply, state, out: VecDeque::new(), ended: false, dialect };
    let body = futures_util::stream::unfold(s, |mut s| async move {
        loop {
            if let Some(f) = s.out.pop_front() {
                let mut ev = SseEvent::default();
                if let Some(n) = f.name {
                    ev = ev.event(n);
                }
                let ev = ev.data(f.data);
                return Some((Ok::<_, Infallible>(ev), s));
            }
            if s.ended {
                return None;
            }
            match s.events.next().await {
                Some(Event::Done(f)) => {
                    s.state.metrics.finished(&f);
                    let frames = s.reply.event(&Event::Done(f));
                    s.out.extend(frames);
                    s.out.extend(s.reply.close());
                    s.ended = true;
                }
                Some(Event::Error(e)) => {
                    s.state.metrics.failed();
                    let err = job_error(&e).dialect(s.dialect);
                    let f = s.reply.error_frame(&err);
                    s.out.push_back(f);
                    s.ended = true;
                }
                Some(e) => {
                    let frames = s.reply.event(&e);
                    s.out.extend(frames);
                }
                None => {
                    s.state.metrics.failed();
                    let err = ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "the engine dropped the request").dialect(s.dialect);
                    let f = s.reply.error_frame(&err);
                    s.out.push_back(f);
                    s.ended = true;
                }
            }
        }
    });
    Sse::new(body).keep_alive(KeepAlive::default()).into_response()
}
