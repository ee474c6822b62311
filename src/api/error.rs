//! Errors as each API shapes them: OpenAI's `{"error": {...}}` and Anthropic's `{"type": "error", "error": {...}}`.
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Which API a route belongs to (its error shape).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// OpenAI's routes and the server's own.
    OpenAi,
    /// `/v1/messages` and its token count.
    Anthropic,
}

/// A request that cannot be served, with its status.
#[derive(Clone, Debug)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What a client reads.
    pub message: String,
    /// The request field at fault.
    pub param: Option<String>,
    /// Seconds to wait before retrying (429 and 503).
    pub retry_after: Option<u64>,
    /// The shape of the body.
    pub dialect: Dialect,
}

impl ApiError {
    /// A 400 about field `param`.
    pub fn field(param: &str, message: impl Into<String>) -> Self {
        ApiError { param: Some(param.to_string()), ..ApiError::new(StatusCode::BAD_REQUEST, message) }
    }

    /// An error of any status.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), param: None, retry_after: None, dialect: Dialect::OpenAi }
    }

    /// A 400.
    pub fn bad(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    /// The same error in `d`'s shape.
    pub fn dialect(mut self, d: Dialect) -> Self {
        self.dialect = d;
        self
    }

    /// The error's type name in its API.
    fn kind(&self) -> &'static str {
        let s = self.status.as_u16();
        match (self.dialect, s) {
            (Dialect::OpenAi, 401) => "authentication_error",
            (Dialect::OpenAi, 404) => "not_found_error",
            (Dialect::OpenAi, 429) => "rate_limit_error",
            (Dialect::OpenAi, 504) => "timeout_error",
            (Dialect::OpenAi, 500..) => "server_error",
            (Dialect::OpenAi, _) => "invalid_request_error",
            (Dialect::Anthropic, 401) => "authentication_error",
            (Dialect::Anthropic, 403) => "permission_error",
            (Dialect::Anthropic, 404) => "not_found_error",
            (Dialect::Anthropic, 413) => "request_too_large",
            (Dialect::Anthropic, 429) => "rate_limit_error",
            (Dialect::Anthropic, 503) => "overloaded_error",
            (Dialect::Anthropic, 504) => "timeout_error",
            (Dialect::Anthropic, 500..) => "api_error",
            (Dialect::Anthropic, _) => "invalid_request_error",
        }
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        match self.dialect {
            Dialect::OpenAi => json!({ "error": { "message": self.message, "type": self.kind(), "param": self.param, "code": self.status.as_u16() } }),
            Dialect::Anthropic => json!({ "type": "error", "error": { "type": self.kind(), "message": self.message } }),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(self.body())).into_response();
        if let Some(s) = self.retry_after {
            r.headers_mut().insert("retry-after", HeaderValue::from(s));
        }
        r
    }
}
