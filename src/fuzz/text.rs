//! Text targets: DSML tool calls out of model output and back, the chat renderer, the tokenizer.
use super::{error_label, split_line, Target};
use crate::text::{encode_chat, image_sources, parse_completion, render_tool_calls, ChatOptions, ContentBlock, Message, ReasoningEffort, Role, Tokenizer, ToolCall};
use serde_json::{json, Value};

fn words(list: &[&str]) -> Vec<Vec<u8>> {
    list.iter().map(|w| w.as_bytes().to_vec()).collect()
}

/// Model output parsed into reasoning, content and calls; parsed calls rendered and parsed again must be the same calls.
pub struct Dsml;

const DSML_WORDS: &[&str] = &["<｜DSML｜ calls>", "</｜DSML｜ calls>", "<｜DSML｜ invoke name=\"", "</｜DSML｜ invoke>", "<｜DSML｜ parameter name=\"", "\" string=\"true\">", "\" string=\"false\">", "</｜DSML｜ parameter>", "</think>", "<｜end▁of▁sentence｜>", "\n\n", ">\n", "{\"a\": [1, 2]}"];

impl Target for Dsml {
    fn name(&self) -> &'static str {
        "dsml"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let calls = [ToolCall { id: None, name: "get_weather".into(), arguments: r#"{"city": "Paris", "days": 3, "units": {"t": "C"}}"#.into() }, ToolCall { id: None, name: "now".into(), arguments: "{}".into() }];
        let one = render_tool_calls(&calls[..1]);
        let two = render_tool_calls(&calls);
        [format!("t\nLet me check.</think>Sure.{one}<｜end▁of▁sentence｜>"), format!("\nHere.{two}<｜end▁of▁sentence｜>"), "t\nthinking cut off".into(), "\nplain answer<｜end▁of▁sentence｜>".into()].into_iter().map(String::into_bytes).collect()
    }

    fn dictionary(&self) -> Vec<Vec<u8>> {
        words(DSML_WORDS)
    }

    fn run(&mut self, input: &[u8]) -> Result<String, String> {
        let (flags, body) = split_line(input);
        let Ok(text) = std::str::from_utf8(body) else { return Ok("utf8".into()) };
        let thinking = flags.contains(&b't');
        let p = match parse_completion(text, thinking) {
            Ok(p) => p,
            Err(e) => return Ok(format!("err:{}", format!("{e:?}").split([' ', '(']).next().unwrap_or(""))),
        };
        let plain = |s: &str| !s.contains(['"', '<', '>', '｜', '\\']) && !s.ends_with('\n');
        let simple = p.tool_calls.iter().all(|c| {
            plain(&c.name) && serde_json::from_str::<Value>(&c.arguments).ok().and_then(|v| v.as_object().cloned()).is_some_and(|o| o.iter().all(|(k, v)| plain(k) && v.as_str().is_none_or(plain)))
        });
        if simple && !p.tool_calls.is_empty() {
            let again = parse_completion(&format!("{}<｜end▁of▁sentence｜>", render_tool_calls(&p.tool_calls)), false).map_err(|e| format!("rendered calls do not parse: {e}"))?;
            let same = again.tool_calls.len() == p.tool_calls.len()
                && again.tool_calls.iter().zip(&p.tool_calls).all(|(a, b)| a.name == b.name && serde_json::from_str::<Value>(&a.arguments).ok() == serde_json::from_str::<Value>(&b.arguments).ok());
            if !same {
                return Err(format!("calls changed through render and parse: {:?} became {:?}", p.tool_calls, again.tool_calls));
            }
        }
        Ok(format!("ok:r{}:c{}:calls{}:simple{simple}", !p.reasoning_content.is_empty(), !p.content.is_empty(), p.tool_calls.len().min(3)))
    }
}

/// The chat renderer on conversations built from JSON: one placeholder per image, the same text twice.
pub struct Chat;

fn role(s: &str) -> Option<Role> {
    Some(match s {
        "system" => Role::System,
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "tool" => Role::Tool,
        "latest_reminder" => Role::LatestReminder,
        _ => return None,
    })
}

fn blocks(v: &Value) -> Option<Vec<ContentBlock>> {
    match v {
        Value::String(s) => Some(vec![ContentBlock::Text(s.clone())]),
        Value::Array(a) => a
            .iter()
            .map(|b| match b.get("type")?.as_str()? {
                "text" => Some(ContentBlock::Text(b.get("text")?.as_str()?.to_string())),
                "image" => Some(ContentBlock::Image(b.get("url")?.as_str()?.to_string())),
                "tool_result" => Some(ContentBlock::ToolResult { tool_use_id: b.get("tool_use_id")?.as_str()?.to_string(), content: blocks(b.get("content")?)? }),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

fn message(v: &Value) -> Option<Message> {
    let calls = v.get("tool_calls").and_then(Value::as_array).map(|a| {
        a.iter()
            .filter_map(|c| Some(ToolCall { id: c.get("id").and_then(Value::as_str).map(str::to_string), name: c.get("name")?.as_str()?.to_string(), arguments: c.get("arguments")?.as_str()?.to_string() }))
            .collect()
    });
    Some(Message {
        role: role(v.get("role")?.as_str()?)?,
        content: blocks(v.get("content")?)?,
        reasoning_content: v.get("reasoning_content").and_then(Value::as_str).map(str::to_string),
        tool_calls: calls.unwrap_or_default(),
        tool_call_id: v.get("tool_call_id").and_then(Value::as_str).map(str::to_string),
    })
}

impl Target for Chat {
    fn name(&self) -> &'static str {
        "chat"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        let tool = json!({"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}});
        let a = json!({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "", "reasoning_content": "Call the tool.", "tool_calls": [{"id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}]}, {"role": "tool", "tool_call_id": "c1", "content": "18 C"}, {"role": "user", "content": [{"type": "text", "text": "And this?"}, {"type": "image", "url": "data:image/png;base64,AA"}]}], "tools": [tool]});
        let b = json!({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello", "reasoning_content": "greet"}, {"role": "latest_reminder", "content": "be nice"}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "42"}]}], "effort": "high", "response_format": {"type": "json_object"}});
        [format!("tb\n{a}"), format!("d\n{b}"), "b\n{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}".into()].into_iter().map(String::into_bytes).collect()
    }

    fn dictionary(&self) -> Vec<Vec<u8>> {
        words(&["system", "user", "assistant", "tool", "latest_reminder", "text", "image", "tool_result", "tool_calls", "tool_call_id", "reasoning_content", "content", "<｜deepseek_image｜>", "</think>", "<｜DSML｜ calls>", "low", "max", "high", "function"])
    }

    fn json(&self) -> bool {
        true
    }

    fn run(&mut self, input: &[u8]) -> Result<String, String> {
        let (flags, body) = split_line(input);
        let Ok(v) = serde_json::from_slice::<Value>(body) else { return Ok("json".into()) };
        let Some(messages) = v.get("messages").and_then(Value::as_array).and_then(|a| a.iter().map(message).collect::<Option<Vec<_>>>()) else { return Ok("shape".into()) };
        let effort = match v.get("effort") {
            None => Ok(ReasoningEffort::default()),
            Some(Value::String(s)) => ReasoningEffort::named(s),
            Some(e) => ReasoningEffort::budget(e.as_i64().unwrap_or(-1)),
        };
        let Ok(reasoning_effort) = effort else { return Ok("effort".into()) };
        let tools = v.get("tools").and_then(Value::as_array).cloned().unwrap_or_default();
        let opts = ChatOptions { thinking: flags.contains(&b't'), reasoning_effort, tools, response_format: v.get("response_format").cloned(), drop_thinking: flags.contains(&b'd'), add_bos: flags.contains(&b'b') };
        let text = match encode_chat(&messages, &opts) {
            Ok(t) => t,
            Err(e) => return Ok(error_label("err", &e.to_string())),
        };
        if encode_chat(&messages, &opts).as_ref() != Ok(&text) {
            return Err("the same conversation rendered twice differs".into());
        }
        let (images, placeholders) = (image_sources(&messages).len(), text.matches("<｜deepseek_image｜>").count());
        if images != placeholders {
            return Err(format!("{images} images but {placeholders} placeholders"));
        }
        let roles: String = messages.iter().take(4).map(|m| format!("{:?}", m.role).chars().next().unwrap_or('?')).collect();
        Ok(format!("ok:{roles}:t{}:tools{}:img{}", opts.thinking, opts.tools.len().min(2), images.min(2)))
    }
}

/// The tokenizer entry: ids inside the vocabulary, text back unchanged, the same ids twice.
pub struct Tokens {
    tok: Tokenizer,
}

impl Tokens {
    /// The target over the tokenizer `LOCKSTEP_TOKENIZER` (or the repository's) names.
    pub fn new() -> Result<Tokens, String> {
        let path = crate::text::find_tokenizer_json(std::path::Path::new(".")).ok_or("no tokenizer.json: set LOCKSTEP_TOKENIZER or run scripts/fetch_tokenizer.sh")?;
        Ok(Tokens { tok: Tokenizer::from_file(&path).map_err(|e| format!("{}: {e}", path.display()))? })
    }
}

impl Target for Tokens {
    fn name(&self) -> &'static str {
        "tokenizer"
    }

    fn seeds(&self) -> Vec<Vec<u8>> {
        ["Hello, world!", "def f(x):\n    return x * 2  # 中文 ☃", "<｜begin▁of▁sentence｜>user text<｜end▁of▁sentence｜>", "   \t\n\n  trailing ", "émoji ☃ ｜▁｜"].iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn dictionary(&self) -> Vec<Vec<u8>> {
        words(&["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "<｜deepseek_image｜>", "▁", "\u{fffd}", "  ", "'s", "1234567"])
    }

    fn run(&mut self, input: &[u8]) -> Result<String, String> {
        let Ok(text) = std::str::from_utf8(input) else { return Ok("utf8".into()) };
        let ids = self.tok.encode(text).map_err(|e| format!("encode failed: {e}"))?;
        if let Some(&bad) = ids.iter().find(|&&i| i as usize >= self.tok.vocab_size()) {
            return Err(format!("id {bad} outside the vocabulary"));
        }
        if self.tok.encode(text).ok().as_ref() != Some(&ids) {
            return Err("the same text encoded twice differs".into());
        }
        let back = self.tok.decode(&ids, false).map_err(|e| format!("decode failed: {e}"))?;
        if back != text {
            return Err(format!("decode(encode(text)) differs: {text:?} became {back:?}"));
        }
        let special = self.tok.decode(&ids, true).map_err(|e| format!("decode failed: {e}"))? != back;
        Ok(format!("ok:n{}:special{special}:ascii{}", (ids.len() + 1).ilog2(), text.is_ascii()))
    }
}
