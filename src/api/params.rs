//! Request fields read with their types and ranges checked (a wrong one is a 400 naming it), and the sampling settings every generation route shares.
use super::error::{ApiError, Dialect};
use crate::engine::{Filters, Sampler, Sampling};
use serde_json::{Map, Value};
use std::sync::atomic::{AtomicU64, Ordering};

/// A request body's top-level fields, unknown ones refused.
pub struct Fields<'a> {
    map: &'a Map<String, Value>,
    dialect: Dialect,
}

/// The name JSON gives a value's type.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

impl<'a> Fields<'a> {
    /// The fields of `body`, which must be an object holding only `allowed` names.
    pub fn new(body: &'a Value, allowed: &[&str], dialect: Dialect) -> Result<Self, ApiError> {
        let Value::Object(map) = body else { return Err(ApiError::bad(format!("the request body must be a JSON object, not {}", type_name(body))).dialect(dialect)) };
        if let Some(k) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(ApiError::field(k, format!("unrecognized request field `{k}` (this route takes: {})", allowed.join(", "))).dialect(dialect));
        }
        Ok(Fields { map, dialect })
    }

    /// The fields of a nested object `v` named `name`.
    pub fn nested(v: &'a Value, name: &str, allowed: &[&str], dialect: Dialect) -> Result<Self, ApiError> {
        let Value::Object(map) = v else { return Err(ApiError::field(name, format!("`{name}` must be an object, not {}", type_name(v))).dialect(dialect)) };
        if let Some(k) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(ApiError::field(&format!("{name}.{k}"), format!("unrecognized field `{name}.{k}` (it takes: {})", allowed.join(", "))).dialect(dialect));
        }
        Ok(Fields { map, dialect })
    }

    /// The dialect errors are shaped in.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// A 400 about `name` in this body's shape.
    pub fn err(&self, name: &str, msg: impl Into<String>) -> ApiError {
        ApiError::field(name, msg).dialect(self.dialect)
    }

    /// The value of `name`; `null` counts as absent.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    /// A required value.
    pub fn need(&self, name: &str) -> Result<&'a Value, ApiError> {
        self.get(name).ok_or_else(|| self.err(name, format!("`{name}` is required")))
    }

    /// A number in `[lo, hi]`.
    pub fn num(&self, name: &str, lo: f64, hi: f64) -> Result<Option<f64>, ApiError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        let x = v.as_f64().ok_or_else(|| self.err(name, format!("`{name}` must be a number, not {}", type_name(v))))?;
        if !(x.is_finite() && x >= lo && x <= hi) {
            return Err(self.err(name, format!("`{name}` is {x}; it must be in [{lo}, {hi}]")));
        }
        Ok(Some(x))
    }

    /// An integer in `[lo, hi]`.
    pub fn int(&self, name: &str, lo: i64, hi: i64) -> Result<Option<i64>, ApiError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        let x = v.as_i64().ok_or_else(|| self.err(name, format!("`{name}` must be an integer, not {}", if v.is_number() { "a fraction or a huge number" } else { type_name(v) })))?;
        if x < lo || x > hi {
            return Err(self.err(name, format!("`{name}` is {x}; it must be in [{lo}, {hi}]")));
        }
        Ok(Some(x))
    }

    /// A boolean.
    pub fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        v.as_bool().map(Some).ok_or_else(|| self.err(name, format!("`{name}` must be a boolean, not {}", type_name(v))))
    }

    /// A string.
    pub fn str(&self, name: &str) -> Result<Option<&'a str>, ApiError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        v.as_str().map(Some).ok_or_else(|| self.err(name, format!("`{name}` must be a string, not {}", type_name(v))))
    }

    /// A string or a list of strings (at most `most`, none empty).
    pub fn strings(&self, name: &str, most: usize) -> Result<Vec<String>, ApiError> {
        let list = match self.get(name) {
            None => Vec::new(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Array(a)) => a.iter().map(|x| x.as_str().map(str::to_string).ok_or_else(|| self.err(name, format!("`{name}` must hold strings, not {}", type_name(x))))).collect::<Result<_, _>>()?,
            Some(v) => return Err(self.err(name, format!("`{name}` must be a string or a list of strings, not {}", type_name(v)))),
        };
        if list.len() > most {
            return Err(self.err(name, format!("`{name}` has {} entries; at most {most}", list.len())));
        }
        if list.iter().any(String::is_empty) {
            return Err(self.err(name, format!("`{name}` holds an empty string")));
        }
        Ok(list)
    }
}

/// The sampling settings of a request.
pub struct Settings {
    /// The sampler.
    pub sampler: Sampler,
    /// The seed used (drawn when the request has none).
    pub seed: u64,
    /// The reply budget the request asked for.
    pub max_tokens: Option<usize>,
    /// Stop texts.
    pub stop: Vec<String>,
    /// Keep generating past the end-of-sentence token.
    pub ignore_eos: bool,
    /// Hash every step's logits.
    pub logits_sha: bool,
    /// Return the generated token ids.
    pub token_ids: bool,
    /// Stream with SSE.
    pub stream: bool,
    /// Send usage as the last streamed event.
    pub include_usage: bool,
    /// Whether this stream may draft (`"draft": false` runs it one token a round).
    pub draft: bool,
    /// Benchmark hook: drafts taken from this expected reply instead of the draft head, right for this fraction of each block.
    pub forced: Option<crate::serve::Forced>,
}

/// The fields [`settings`] reads, for the routes' allowed lists.
pub const SAMPLING_FIELDS: &[&str] = &["temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "seed", "ignore_eos", "stream", "stream_options", "lockstep", "draft", "n", "user", "metadata", "repetition_penalty"];

/// A seed for a request without one: the clock and a counter through splitmix64.
pub fn draw_seed() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    crate::engine::sampler::splitmix64(t ^ COUNTER.fetch_add(1, Ordering::Relaxed).rotate_left(32)) >> 11
}

/// Reads the sampling settings; `stop_name` and `max_name` are the route's names for the stop texts and the budget.
pub fn settings(f: &Fields<'_>, stop_name: &str, max_names: &[&str]) -> Result<Settings, ApiError> {
    let temperature = f.num("temperature", 0.0, 2.0)?.unwrap_or(1.0) as f32;
    let top_p = f.num("top_p", 0.0, 1.0)?.unwrap_or(1.0) as f32;
    if top_p == 0.0 {
        return Err(f.err("top_p", "`top_p` must be greater than 0"));
    }
    let top_k = f.int("top_k", -1, 1 << 20)?.unwrap_or(0).max(0) as usize;
    let min_p = f.num("min_p", 0.0, 1.0)?.unwrap_or(0.0) as f32;
    let presence_penalty = f.num("presence_penalty", -2.0, 2.0)?.unwrap_or(0.0) as f32;
    let frequency_penalty = f.num("frequency_penalty", -2.0, 2.0)?.unwrap_or(0.0) as f32;
    if f.num("repetition_penalty", 1.0, 1.0).is_err() {
        return Err(f.err("repetition_penalty", "`repetition_penalty` other than 1 is not supported; use presence_penalty or frequency_penalty"));
    }
    let seed = match f.get("seed") {
        None => draw_seed(),
        Some(v) => v.as_u64().or_else(|| v.as_i64().map(|i| i as u64)).ok_or_else(|| f.err("seed", format!("`seed` must be an integer, not {}", type_name(v))))?,
    };
    if let Some(n) = f.int("n", 1, i64::MAX).map_err(|_| f.err("n", "`n` must be 1: one reply per request (send the request again with another seed)"))? {
        if n != 1 {
            return Err(f.err("n", "`n` must be 1"));
        }
    }
    let mut max_tokens = None;
    for name in max_names {
        if let Some(n) = f.int(name, 1, 1 << 24)? {
            max_tokens = Some(n as usize);
        }
    }
    let stop = f.strings(stop_name, 16)?;
    let ignore_eos = f.bool("ignore_eos")?.unwrap_or(false);
    let stream = f.bool("stream")?.unwrap_or(false);
    let mut include_usage = false;
    if let Some(v) = f.get("stream_options") {
        let o = Fields::nested(v, "stream_options", &["include_usage", "continuous_usage_stats"], f.dialect())?;
        include_usage = o.bool("include_usage")?.unwrap_or(false);
    }
    let (mut logits_sha, mut token_ids, mut forced) = (false, false, None);
    if let Some(v) = f.get("lockstep") {
        let o = Fields::nested(v, "lockstep", &["logits_sha", "token_ids", "forced_drafts", "forced_acceptance"], f.dialect())?;
        logits_sha = o.bool("logits_sha")?.unwrap_or(false);
        token_ids = o.bool("token_ids")?.unwrap_or(false);
        if let Some(list) = o.get("forced_drafts") {
            let bad = || f.err("lockstep", "`lockstep.forced_drafts` must be a list of token ids");
            let reply = list.as_array().ok_or_else(bad)?.iter().map(|t| t.as_u64().filter(|&t| t <= u64::from(u32::MAX)).map(|t| t as u32).ok_or_else(bad)).collect::<Result<Vec<_>, _>>()?;
            let acceptance = o.num("forced_acceptance", 0.0, 1.0)?.unwrap_or(1.0);
            forced = Some(crate::serve::Forced { reply, acceptance });
        }
    }
    let draft = f.bool("draft")?.unwrap_or(true);
    f.str("user")?;
    if f.get("metadata").is_some_and(|m| !m.is_object()) {
        return Err(f.err("metadata", "`metadata` must be an object"));
    }
    let filters = Filters { top_k, min_p, presence_penalty, frequency_penalty };
    let sampler = Sampler::with_filters(Sampling::Random { temperature, top_p, seed }, filters).map_err(|e| f.err("temperature", e.to_string()))?;
    Ok(Settings { sampler, seed, max_tokens, stop, ignore_eos, logits_sha, token_ids, stream, include_usage, draft, forced })
}
