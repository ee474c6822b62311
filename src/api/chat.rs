//! Chat on both APIs: their message JSON read into the model's messages, and the model's output split live into reasoning, content and tool calls.
use super::error::{ApiError, Dialect};
use super::images::{ImageInput, Source};
use super::params::type_name;
use crate::text::dsml::{parse_completion, ToolCall, CALLS_START};
use crate::text::{ContentBlock, Message, Role};
use serde_json::Value;

const THINK_END: &str = "</think>";

/// A 400 about a message field.
fn bad(d: Dialect, at: &str, msg: impl Into<String>) -> ApiError {
    ApiError::field(at, msg).dialect(d)
}

/// Text of a content value: a string, or a list of text parts (images are taken in user messages only).
pub fn content_text(v: &Value, at: &str, d: Dialect) -> Result<String, ApiError> {
    match v {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut out = Vec::new();
            for (i, p) in parts.iter().enumerate() {
                let kind = p.get("type").and_then(Value::as_str).ok_or_else(|| bad(d, &format!("{at}[{i}].type"), "every content part needs a string `type`"))?;
                match kind {
                    "text" | "input_text" => out.push(p.get("text").and_then(Value::as_str).ok_or_else(|| bad(d, &format!("{at}[{i}].text"), "a text part needs a string `text`"))?.to_string()),
                    "image_url" | "image" | "input_image" => return Err(bad(d, &format!("{at}[{i}]"), "images are taken only in the content of user messages")),
                    other => return Err(bad(d, &format!("{at}[{i}].type"), format!("unknown content part type `{other}`"))),
                }
            }
            Ok(out.join("\n\n"))
        }
        other => Err(bad(d, at, format!("content must be a string or a list of parts, not {}", type_name(other)))),
    }
}

/// A user message's OpenAI content: text parts and images (`image_url` parts, or `input_image`), each image's input added to `images`.
fn openai_user_content(v: &Value, at: &str, images: &mut Vec<ImageInput>) -> Result<Vec<ContentBlock>, ApiError> {
    let d = Dialect::OpenAi;
    let Value::Array(parts) = v else { return Ok(vec![ContentBlock::Text(content_text(v, at, d)?)]) };
    let mut out = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        let pat = format!("{at}[{i}]");
        match p.get("type").and_then(Value::as_str) {
            Some("image_url") | Some("input_image") => {
                let u = p.get("image_url").ok_or_else(|| bad(d, &format!("{pat}.image_url"), "an image part needs `image_url`"))?;
                let url = match u {
                    Value::String(s) => s.as_str(),
                    Value::Object(o) => o.get("url").and_then(Value::as_str).ok_or_else(|| bad(d, &format!("{pat}.image_url.url"), "`image_url` needs a string `url`"))?,
                    _ => return Err(bad(d, &format!("{pat}.image_url"), "`image_url` must be an object with a `url`")),
                };
                if let Some(detail) = u.get("detail").filter(|x| !x.is_null()) {
                    if !matches!(detail.as_str(), Some("auto" | "low" | "high")) {
                        return Err(bad(d, &format!("{pat}.image_url.detail"), "`detail` must be auto, low or high"));
                    }
                }
                images.push(ImageInput::from_url(format!("{pat}.image_url"), url).map_err(|e| e.dialect(d))?);
                out.push(ContentBlock::Image(pat));
            }
            _ => out.push(ContentBlock::Text(content_text(&Value::Array(vec![p.clone()]), at, d).map_err(|e| reindex(e, at, i))?)),
        }
    }
    Ok(out)
}

/// An error about part 0 of a one-part list, moved to part `i` of `at`.
fn reindex(mut e: ApiError, at: &str, i: usize) -> ApiError {
    if let Some(p) = &e.param {
        e.param = Some(p.replacen(&format!("{at}[0]"), &format!("{at}[{i}]"), 1));
    }
    e
}

/// OpenAI `messages` as the model's messages and the images of their user turns, in order.
pub fn openai_messages(v: &Value) -> Result<(Vec<Message>, Vec<ImageInput>), ApiError> {
    let d = Dialect::OpenAi;
    let list = v.as_array().ok_or_else(|| bad(d, "messages", format!("`messages` must be a list, not {}", type_name(v))))?;
    if list.is_empty() {
        return Err(bad(d, "messages", "`messages` is empty"));
    }
    let mut out = Vec::with_capacity(list.len());
    let mut images = Vec::new();
    for (i, m) in list.iter().enumerate() {
        let at = format!("messages[{i}]");
        if !m.is_object() {
            return Err(bad(d, &at, format!("a message must be an object, not {}", type_name(m))));
        }
        let role = m.get("role").and_then(Value::as_str).ok_or_else(|| bad(d, &format!("{at}.role"), "every message needs a string `role`"))?;
        let content = m.get("content").unwrap_or(&Value::Null);
        if role == "user" {
            let blocks = openai_user_content(content, &format!("{at}.content"), &mut images)?;
            out.push(Message { content: blocks, ..Message::text(Role::User, "") });
            continue;
        }
        let text = content_text(content, &format!("{at}.content"), d)?;
        let msg = match role {
            "system" | "developer" => Message::text(Role::System, text),
            "assistant" => {
                let mut msg = Message::text(Role::Assistant, text);
                msg.reasoning_content = m.get("reasoning_content").and_then(Value::as_str).map(str::to_string);
                if let Some(calls) = m.get("tool_calls").filter(|c| !c.is_null()) {
                    let calls = calls.as_array().ok_or_else(|| bad(d, &format!("{at}.tool_calls"), "`tool_calls` must be a list"))?;
                    for (j, c) in calls.iter().enumerate() {
                        let f = c.get("function").ok_or_else(|| bad(d, &format!("{at}.tool_calls[{j}].function"), "a tool call needs a `function` object"))?;
                        let name = f.get("name").and_then(Value::as_str).ok_or_else(|| bad(d, &format!("{at}.tool_calls[{j}].function.name"), "a tool call needs a string name"))?;
                        let arguments = match f.get("arguments") {
                            Some(Value::String(s)) => s.clone(),
                            Some(Value::Object(_)) => f["arguments"].to_string(),
                            _ => return Err(bad(d, &format!("{at}.tool_calls[{j}].function.arguments"), "tool call arguments must be a JSON string")),
                        };
                        msg.tool_calls.push(ToolCall { id: c.get("id").and_then(Value::as_str).map(str::to_string), name: name.to_string(), arguments });
                    }
                }
                msg
            }
            "tool" => {
                let id = m.get("tool_call_id").and_then(Value::as_str).ok_or_else(|| bad(d, &format!("{at}.tool_call_id"), "a tool message needs a string `tool_call_id`"))?;
                Message::tool(id, text)
            }
            other => return Err(bad(d, &format!("{at}.role"), format!("unknown role `{other}` (system, developer, user, assistant, tool)"))),
        };
        out.push(msg);
    }
    Ok((out, images))
}

/// An Anthropic `image` block's input: a `base64` source with its media type, or a `url` source.
fn anthropic_image(b: &Value, at: &str) -> Result<ImageInput, ApiError> {
    let d = Dialect::Anthropic;
    let src = b.get("source").filter(|s| s.is_object()).ok_or_else(|| bad(d, &format!("{at}.source"), "an image block needs a `source` object"))?;
    let field = |k: &str| src.get(k).and_then(Value::as_str).ok_or_else(|| bad(d, &format!("{at}.source.{k}"), format!("an image source needs a string `{k}`")));
    let source = match field("type")? {
        "base64" => Source::Inline { data: field("data")?.to_string(), media_type: Some(field("media_type")?.to_string()) },
        "url" => Source::Url(field("url")?.to_string()),
        other => return Err(bad(d, &format!("{at}.source.type"), format!("image source type `{other}` is not taken (base64 or url)"))),
    };
    Ok(ImageInput { at: format!("{at}.source"), source })
}

/// Anthropic `system` and `messages` as the model's messages and the images of their user turns, in order.
pub fn anthropic_messages(system: Option<&Value>, v: &Value) -> Result<(Vec<Message>, Vec<ImageInput>), ApiError> {
    let d = Dialect::Anthropic;
    let mut out = Vec::new();
    let mut images = Vec::new();
    if let Some(s) = system {
        out.push(Message::text(Role::System, content_text(s, "system", d)?));
    }
    let list = v.as_array().ok_or_else(|| bad(d, "messages", format!("`messages` must be a list, not {}", type_name(v))))?;
    if list.is_empty() {
        return Err(bad(d, "messages", "`messages` is empty"));
    }
    for (i, m) in list.iter().enumerate() {
        let at = format!("messages[{i}]");
        let role = m.get("role").and_then(Value::as_str).ok_or_else(|| bad(d, &format!("{at}.role"), "every message needs a string `role`"))?;
        let role = match role {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            other => return Err(bad(d, &format!("{at}.role"), format!("unknown role `{other}` (user, assistant)"))),
        };
        let content = m.get("content").ok_or_else(|| bad(d, &format!("{at}.content"), "every message needs `content`"))?;
        let blocks: Vec<Value> = match content {
            Value::String(s) => vec![serde_json::json!({"type": "text", "text": s})],
            Value::Array(a) => a.clone(),
            other => return Err(bad(d, &format!("{at}.content"), format!("content must be a string or a list of blocks, not {}", type_name(other)))),
        };
        let mut msg = Message { content: Vec::new(), ..Message::text(role, "") };
        let mut results = Vec::new();
        for (j, b) in blocks.iter().enumerate() {
            let bat = format!("{at}.content[{j}]");
            let kind = b.get("type").and_then(Value::as_str).ok_or_else(|| bad(d, &format!("{bat}.type"), "every block needs a string `type`"))?;
            match (kind, role) {
                ("text", _) => msg.content.push(ContentBlock::Text(b.get("text").and_then(Value::as_str).ok_or_else(|| bad(d, &format!("{bat}.text"), "a text block needs a string `text`"))?.to_string())),
                ("thinking", Role::Assistant) => msg.reasoning_content = b.get("thinking").and_then(Value::as_str).map(str::to_string),
                ("redacted_thinking", Role::Assistant) => {}
                ("tool_use", Role::Assistant) => {
                    let name = b.get("name").and_then(Value::as_str).ok_or_else(|| bad(d, &format!("{bat}.name"), "a tool_use block needs a string `name`"))?;
                    let input = b.get("input").filter(|x| x.is_object()).ok_or_else(|| bad(d, &format!("{bat}.input"), "a tool_use block needs an object `input`"))?;
                    msg.tool_calls.push(ToolCall { id: b.get("id").and_then(Value::as_str).map(str::to_string), name: name.to_string(), arguments: input.to_string() });
                }
                ("tool_result", Role::User) => {
                    let id = b.get("tool_use_id").and_then(Value::as_str).ok_or_else(|| bad(d, &format!("{bat}.tool_use_id"), "a tool_result block needs a string `tool_use_id`"))?;
                    let text = content_text(b.get("content").unwrap_or(&Value::Null), &format!("{bat}.content"), d)?;
                    results.push(Message::tool(id, text));
                }
                ("image", Role::User) => {
                    images.push(anthropic_image(b, &bat)?);
                    msg.content.push(ContentBlock::Image(bat.clone()));
                }
                ("image", _) => return Err(bad(d, &bat, "images are taken only in user messages")),
                ("document", _) => return Err(bad(d, &bat, "document blocks are not taken: send the document's text")),
                (k, _) => return Err(bad(d, &format!("{bat}.type"), format!("block type `{k}` cannot appear in {} message", if role == Role::User { "a user" } else { "an assistant" }))),
            }
        }
        // tool results answer the previous assistant turn; other user text follows them
        out.extend(results);
        if !msg.content.is_empty() || !msg.tool_calls.is_empty() || msg.reasoning_content.is_some() || role == Role::Assistant {
            if msg.content.is_empty() {
                msg.content.push(ContentBlock::Text(String::new()));
            }
            out.push(msg);
        }
    }
    Ok((out, images))
}

/// A piece of a reply, as it streams.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Reasoning text.
    Reasoning(String),
    /// Answer text.
    Content(String),
}

/// Splits the model's output as it arrives: reasoning until `</think>`, content until a tool-call block, which is held for the end.
pub struct ChatText {
    full: String,
    sent: usize,
    thinking: bool,
    tools: bool,
    in_reasoning: bool,
    in_calls: bool,
}

impl ChatText {
    /// A splitter; `forced` is output the prompt already holds (a forced tool-call opening).
    pub fn new(thinking: bool, tools: bool, forced: &str) -> Self {
        let mut c = ChatText { full: forced.to_string(), sent: 0, thinking, tools, in_reasoning: thinking, in_calls: false };
        if !forced.is_empty() {
            c.in_calls = true;
            c.sent = forced.len();
        }
        c
    }

    /// Adds text; returns the pieces that can be sent now.
    pub fn push(&mut self, text: &str) -> Vec<Piece> {
        self.full.push_str(text);
        let mut out = Vec::new();
        loop {
            if self.in_calls {
                return out;
            }
            let rest = &self.full[self.sent..];
            let marker = if self.in_reasoning { THINK_END } else if self.tools { CALLS_START } else { "" };
            if marker.is_empty() {
                if !rest.is_empty() {
                    out.push(Piece::Content(rest.to_string()));
                }
                self.sent = self.full.len();
                return out;
            }
            if let Some(p) = rest.find(marker) {
                if p > 0 {
                    let s = rest[..p].to_string();
                    out.push(if self.in_reasoning { Piece::Reasoning(s) } else { Piece::Content(s) });
                }
                if self.in_reasoning {
                    self.in_reasoning = false;
                    self.sent += p + marker.len();
                } else {
                    self.in_calls = true;
                    self.sent += p;
                }
                continue;
            }
            // hold back a tail that could begin the marker
            let hold = (1..marker.len()).rev().find(|&k| rest.len() >= k && rest.is_char_boundary(rest.len() - k) && marker.starts_with(&rest[rest.len() - k..])).unwrap_or(0);
            let cut = rest.len() - hold;
            if cut > 0 {
                let s = rest[..cut].to_string();
                out.push(if self.in_reasoning { Piece::Reasoning(s) } else { Piece::Content(s) });
                self.sent += cut;
            }
            return out;
        }
    }

    /// The end: held text, and the tool calls parsed from the output (a malformed block is returned as content).
    pub fn finish(&mut self) -> (Vec<Piece>, Vec<ToolCall>) {
        let rest = self.full[self.sent..].to_string();
        self.sent = self.full.len();
        if self.in_calls {
            let from = self.full.rfind(CALLS_START).unwrap_or(0);
            let text = format!("{}", &self.full[from..]);
            if let Ok(p) = parse_completion(&text, false) {
                if !p.tool_calls.is_empty() {
                    return (Vec::new(), p.tool_calls);
                }
            }
            return (vec![Piece::Content(rest)], Vec::new());
        }
        if rest.is_empty() {
            return (Vec::new(), Vec::new());
        }
        (vec![if self.in_reasoning && self.thinking { Piece::Reasoning(rest) } else { Piece::Content(rest) }], Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_content_and_a_tool_call_split_however_the_text_is_cut() {
        let out = "think hard</think>The answer\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"x\" string=\"false\">1</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>";
        for step in [1, 2, 3, 7, out.len()] {
            let mut c = ChatText::new(true, true, "");
            let mut pieces = Vec::new();
            let mut at = 0;
            while at < out.len() {
                let mut end = (at + step).min(out.len());
                while !out.is_char_boundary(end) {
                    end += 1;
                }
                pieces.extend(c.push(&out[at..end]));
                at = end;
            }
            let (tail, calls) = c.finish();
            pieces.extend(tail);
            let reasoning: String = pieces.iter().filter_map(|p| if let Piece::Reasoning(s) = p { Some(s.as_str()) } else { None }).collect();
            let content: String = pieces.iter().filter_map(|p| if let Piece::Content(s) = p { Some(s.as_str()) } else { None }).collect();
            assert_eq!((reasoning.as_str(), content.as_str()), ("think hard", "The answer"), "step {step}");
            assert_eq!(calls.len(), 1);
            assert_eq!(calls[0].name, "f");
            assert_eq!(calls[0].arguments, "{\"x\": 1}");
        }
    }
}
