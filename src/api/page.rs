//! The server's own page (a dashboard and a chat, static files embedded in the binary) and `/status`, the JSON it reads.
use super::metrics::SAMPLE_S;
use super::state::AppState;
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const INDEX: &str = include_str!("../../web/index.html");
const APP_JS: &str = include_str!("../../web/app.js");
const APP_CSS: &str = include_str!("../../web/app.css");

/// Nothing but the server's own scripts, styles and API; no inline code, no frames, no other origin.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Samples the host's token counters every `SAMPLE_S` for as long as the server runs.
pub async fn sample(state: Arc<AppState>) {
    let mut tick = tokio::time::interval(Duration::from_secs(SAMPLE_S));
    loop {
        tick.tick().await;
        let (p, g) = {
            let st = state.status.lock().unwrap_or_else(|p| p.into_inner());
            (st.prefilled_total, st.generated_total)
        };
        state.rates.sample(p, g);
    }
}

fn asset(kind: &'static str, body: &'static str) -> Response {
    let headers = [
        (CONTENT_TYPE, kind),
        (CONTENT_SECURITY_POLICY, CSP),
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (X_FRAME_OPTIONS, "DENY"),
        (REFERRER_POLICY, "no-referrer"),
        (CACHE_CONTROL, "no-cache"),
    ];
    (headers, body).into_response()
}

/// `GET /`: the page.
pub async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

/// `GET /ui/app.js`.
pub async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

/// `GET /ui/app.css`.
pub async fn app_css() -> Response {
    asset("text/css; charset=utf-8", APP_CSS)
}

/// `GET /status`: lanes, queue, prompt cache, token totals and rates, the model and the bits' identity.
pub async fn status(State(state): State<Arc<AppState>>) -> Response {
    let st = state.status.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let lanes: Vec<Value> = st
        .lanes
        .iter()
        .map(|l| {
            let elapsed = l.since.elapsed().as_secs_f64();
            json!({ "id": l.id, "phase": if l.prefilling { "prefill" } else { "decode" }, "position": l.position, "prompt_tokens": l.prompt_tokens, "generated": l.generated, "elapsed_s": elapsed, "tok_s": if elapsed > 0.0 { l.generated as f64 / elapsed } else { 0.0 } })
        })
        .collect();
    let m = &state.model;
    let body = json!({
        "status": if st.failure.is_some() { "failed" } else if st.ready { "ok" } else { "loading" },
        "reason": st.failure,
        "identity": state.identity().map(|i| i.json()),
        "model": { "id": m.id, "context": m.context, "max_tokens": m.max_tokens },
        "parallel": state.parallel,
        "max_queue": state.max_queue,
        "lanes": lanes,
        "waiting": st.waiting,
        "cache": { "bytes": st.cache_bytes, "budget": st.cache_budget, "entries": st.cache_entries, "queries": st.cache_queries, "hits": st.cache_hits },
        "totals": { "prefilled_tokens": st.prefilled_total, "generated_tokens": st.generated_total },
        "rates": state.rates.series(),
        "sample_s": SAMPLE_S,
        "vision": state.vision.is_some(),
        "heap_bytes": crate::serve::heap::live_bytes(),
    });
    ([(CACHE_CONTROL, "no-store")], axum::Json(body)).into_response()
}
