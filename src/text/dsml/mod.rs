//! DSML tool calls of the V4.1 format: rendering calls into a prompt and parsing them (with reasoning and content) out of model output, as encoding.py does.
use super::pyjson::{write_string, Json};

/// The DSML marker token.
pub const DSML: &str = "｜DSML｜";
/// End of sentence, as text.
const EOS: &str = "<｜end▁of▁sentence｜>";
/// Closes reasoning.
const THINK_END: &str = "</think>";
/// What precedes a tool-call block in assistant output.
pub const CALLS_START: &str = "\n\n<｜DSML｜ calls";
const CALLS_END: &str = "</｜DSML｜ calls>";
const INVOKE_START: &str = "<｜DSML｜ invoke";
const INVOKE_END: &str = "</｜DSML｜ invoke";
const PARAM_START: &str = "<｜DSML｜ parameter";
const PARAM_END: &str = "/｜DSML｜ parameter";

/// One tool call: a function name and its arguments as JSON text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    /// Call id used to order tool results (OpenAI `id`); not rendered.
    pub id: Option<String>,
    /// Function name.
    pub name: String,
    /// Arguments as JSON text (an object), or any text the caller supplied.
    pub arguments: String,
}

/// What was malformed in model output.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DsmlError {
    /// Unexpected text where a DSML tag had to continue.
    #[error("tool call format error at byte {at}: expected {expected:?}, found {found:?}")]
    Format { at: usize, expected: &'static str, found: String },
    /// The block ended before its closing tag.
    #[error("tool call block is not closed")]
    Unclosed,
    /// An invoke tag without a well-formed `name="…"`.
    #[error("tool name format error: {0:?}")]
    Name(String),
    /// A parameter tag without well-formed `name` and `string` attributes.
    #[error("parameter format error: {0:?}")]
    Parameter(String),
    /// The same parameter twice in one call.
    #[error("duplicate parameter {0:?}")]
    DuplicateParameter(String),
    /// Text between the closed tool-call block and the end of the message.
    #[error("unexpected text after tool calls: {0:?}")]
    TrailingText(String),
}

/// An assistant message parsed from model output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParsedCompletion {
    /// Reasoning before `</think>` (thinking mode).
    pub reasoning_content: String,
    /// Visible answer text.
    pub content: String,
    /// Tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
}

/// `\n\n<｜DSML｜ calls>…</｜DSML｜ calls>` for the given calls (empty for none).
pub fn render_tool_calls(calls: &[ToolCall]) -> String {
    if calls.is_empty() {
        return String::new();
    }
    let invokes: Vec<String> = calls
        .iter()
        .map(|c| format!("<{DSML} invoke name=\"{}\">\n{}\n</{DSML} invoke>", c.name, render_arguments(&c.arguments)))
        .collect();
    format!("\n\n<{DSML} calls>\n{}\n</{DSML} calls>", invokes.join("\n"))
}

/// The parameter lines of one call: strings verbatim (`string="true"`), everything else as JSON.
fn render_arguments(arguments: &str) -> String {
    // a JSON object, possibly encoded twice; anything else becomes one string parameter "arguments"
    let mut parsed = Json::String(arguments.to_string());
    for _ in 0..2 {
        match &parsed {
            Json::String(s) => match Json::parse(s) {
                Ok(v) => parsed = v,
                Err(_) => break,
            },
            _ => break,
        }
    }
    let entries = match parsed {
        Json::Object(entries) => entries,
        _ => vec![("arguments".to_string(), Json::String(arguments.to_string()))],
    };
    let params: Vec<String> = entries
        .iter()
        .map(|(k, v)| {
            let (is_str, value) = match v {
                Json::String(s) => ("true", s.clone()),
                other => ("false", other.dumps()),
            };
            format!("<{DSML} parameter name=\"{k}\" string=\"{is_str}\">{value}</{DSML} parameter>")
        })
        .collect();
    params.join("\n")
}

/// Text from `at` to the earliest of `stops`: (index after the stop, text before it, which stop).
fn read_until<'a>(text: &'a str, at: usize, stops: &[&'static str]) -> (usize, &'a str, Option<&'static str>) {
    let rest = text.get(at..).unwrap_or("");
    let hit = stops.iter().filter_map(|s| rest.find(s).map(|p| (p, *s))).min_by_key(|&(p, _)| p);
    match hit {
        Some((p, s)) => (at + p + s.len(), &rest[..p], Some(s)),
        None => (text.len(), rest, None),
    }
}

/// Splits model output into reasoning, content and tool calls; lenient about a missing EOS or `</think>`.
pub fn parse_completion(text: &str, thinking: bool) -> Result<ParsedCompletion, DsmlError> {
    let mut out = ParsedCompletion::default();
    let mut at = 0;
    if thinking {
        // output cut off before `</think>` is all reasoning
        let (next, reasoning, stop) = read_until(text, 0, &[THINK_END, EOS]);
        out.reasoning_content = reasoning.to_string();
        if stop != Some(THINK_END) {
            return Ok(out);
        }
        at = next;
    }
    let (next, content, stop) = read_until(text, at, &[EOS, CALLS_START]);
    out.content = content.to_string();
    if stop == Some(CALLS_START) {
        let (next, calls) = parse_tool_calls(text, next)?;
        out.tool_calls = calls;
        let (_, trailing, _) = read_until(text, next, &[EOS]);
        if !trailing.is_empty() {
            return Err(DsmlError::TrailingText(trailing.to_string()));
        }
    }
    Ok(out)
}

/// Parses the calls after `\n\n<｜DSML｜ calls` up to and including `</｜DSML｜ calls>`.
pub fn parse_tool_calls(text: &str, mut at: usize) -> Result<(usize, Vec<ToolCall>), DsmlError> {
    let mut calls = Vec::new();
    loop {
        let (next, between, stop) = read_until(text, at, &[INVOKE_START, CALLS_END]);
        if between != ">\n" {
            return Err(DsmlError::Format { at, expected: ">\\n", found: between.to_string() });
        }
        match stop {
            Some(CALLS_END) => return Ok((next, calls)),
            None => return Err(DsmlError::Unclosed),
            Some(_) => {}
        }
        let (next, name_part, mut stop) = read_until(text, next, &[PARAM_START, INVOKE_END]);
        if stop.is_none() {
            return Err(DsmlError::Unclosed);
        }
        let name = parse_invoke_name(name_part)?;
        at = next;
        let mut params: Vec<(String, String, bool)> = Vec::new();
        while stop == Some(PARAM_START) {
            let (next, param_part, end) = read_until(text, at, &[PARAM_END]);
            if end.is_none() {
                return Err(DsmlError::Unclosed);
            }
            let (key, value, is_str) = parse_parameter(param_part)?;
            if crate::testing::planted("dsml") && is_str && value.contains('<') {
                panic!("planted bug: a string parameter holding '<'");
            }
            if params.iter().any(|(k, _, _)| *k == key) {
                return Err(DsmlError::DuplicateParameter(key));
            }
            params.push((key, value, is_str));
            let (next, between, s) = read_until(text, next, &[PARAM_START, INVOKE_END]);
            if between != ">\n" {
                return Err(DsmlError::Format { at: next, expected: ">\\n", found: between.to_string() });
            }
            if s.is_none() {
                return Err(DsmlError::Unclosed);
            }
            stop = s;
            at = next;
        }
        calls.push(ToolCall { id: None, name, arguments: arguments_json(&params) });
    }
}

/// `^\s*name="(.*?)">\n$` of encoding.py (Python's `$` also matches before one final newline).
fn parse_invoke_name(part: &str) -> Result<String, DsmlError> {
    let bad = || DsmlError::Name(part.to_string());
    let rest = part.trim_start().strip_prefix("name=\"").ok_or_else(bad)?;
    let name = rest.strip_suffix("\">\n\n").or_else(|| rest.strip_suffix("\">\n")).ok_or_else(bad)?;
    Ok(name.to_string())
}

/// `^ name="(.*?)" string="(true|false)">(.*?)<$` of encoding.py: (name, value, is_string).
fn parse_parameter(part: &str) -> Result<(String, String, bool), DsmlError> {
    let bad = || DsmlError::Parameter(part.to_string());
    let rest = part.strip_prefix(" name=\"").ok_or_else(bad)?;
    let body = rest.strip_suffix('<').or_else(|| rest.strip_suffix("<\n")).ok_or_else(bad)?;
    // the shortest name whose remainder has the string attribute
    let hit = [("\" string=\"true\">", true), ("\" string=\"false\">", false)]
        .iter()
        .filter_map(|&(tag, is_str)| body.find(tag).map(|p| (p, tag.len(), is_str)))
        .min_by_key(|&(p, _, _)| p);
    let (p, len, is_str) = hit.ok_or_else(bad)?;
    Ok((body[..p].to_string(), body[p + len..].to_string(), is_str))
}

/// `{"k": v, …}` with string values JSON-quoted and the others inserted verbatim, as encoding.py does.
fn arguments_json(params: &[(String, String, bool)]) -> String {
    let mut out = String::from("{");
    for (i, (k, v, is_str)) in params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_string(k, &mut out);
        out.push_str(": ");
        if *is_str {
            write_string(v, &mut out);
        } else {
            out.push_str(v);
        }
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests;
