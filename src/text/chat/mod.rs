//! The V4.1 chat prompt: messages, tools and reasoning effort rendered to a string exactly as the official `encoding/encoding.py` does.
use super::dsml::{render_tool_calls, ToolCall};
use super::pyjson::Json;
use super::tokenizer::names::{ASSISTANT, BOS, EOS, IMAGE, LATEST_REMINDER, SYSTEM, THINK_END, THINK_START, USER};

/// Who speaks a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Instructions; at index 0 it carries tools, later it acts like a user turn.
    System,
    /// A user turn.
    User,
    /// A model turn, finished (rendered with EOS).
    Assistant,
    /// A tool result; merged into the surrounding user turn.
    Tool,
    /// A `<｜latest_reminder｜>` turn.
    LatestReminder,
}

/// One piece of message content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContentBlock {
    /// Plain text.
    Text(String),
    /// An image (its URL or data URI); the prompt gets one `<｜deepseek_image｜>` placeholder.
    Image(String),
    /// A tool result inside a user turn.
    ToolResult {
        /// Id of the call it answers (orders results like the calls).
        tool_use_id: String,
        /// Result content.
        content: Vec<ContentBlock>,
    },
}

/// One chat message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Speaker.
    pub role: Role,
    /// Content blocks, joined with a blank line.
    pub content: Vec<ContentBlock>,
    /// Assistant reasoning (kept only after the last user turn, or always when tools are present).
    pub reasoning_content: Option<String>,
    /// Assistant tool calls.
    pub tool_calls: Vec<ToolCall>,
    /// For a tool message, the id of the call it answers.
    pub tool_call_id: Option<String>,
}

impl Message {
    /// A message of one text block.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            content: vec![ContentBlock::Text(text.into())],
            reasoning_content: None,
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }

    /// A tool result answering call `id`.
    pub fn tool(id: impl Into<String>, text: impl Into<String>) -> Self {
        Self { tool_call_id: Some(id.into()), ..Self::text(Role::Tool, text) }
    }
}

/// What made a conversation impossible to encode.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ChatError {
    /// Text carries the image placeholder; images must come as image blocks.
    #[error("text contains the image placeholder {IMAGE}; pass images as image blocks")]
    PlaceholderInText,
    /// Reasoning effort outside 1..=100 and not low/high/max.
    #[error("invalid reasoning effort {0:?}: an integer in 1..=100 or low/high/max")]
    Effort(String),
    /// A tool in OpenAI format without its `function` object.
    #[error("tool {0} has no \"function\" object")]
    Tool(usize),
}

/// Reasoning budget 1..=100 rendered in thinking mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReasoningEffort(u8);

impl ReasoningEffort {
    /// An explicit budget in 1..=100.
    pub fn budget(n: i64) -> Result<Self, ChatError> {
        match u8::try_from(n) {
            Ok(b) if (1..=100).contains(&b) => Ok(Self(b)),
            _ => Err(ChatError::Effort(n.to_string())),
        }
    }

    /// `low` (50), `high` (75) or `max` (100).
    pub fn named(name: &str) -> Result<Self, ChatError> {
        match name {
            "low" => Ok(Self(50)),
            "high" => Ok(Self(75)),
            "max" => Ok(Self(100)),
            _ => Err(ChatError::Effort(name.to_string())),
        }
    }

    /// The budget value.
    pub fn value(self) -> u8 {
        self.0
    }
}

impl Default for ReasoningEffort {
    fn default() -> Self {
        Self(75)
    }
}

/// How to render a conversation.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatOptions {
    /// Thinking mode (`<think>` header) or chat mode (`</think>` header).
    pub thinking: bool,
    /// Budget shown at the start in thinking mode.
    pub reasoning_effort: ReasoningEffort,
    /// Tools in OpenAI format (`{"type":"function","function":{…}}`), rendered in the leading system turn.
    pub tools: Vec<serde_json::Value>,
    /// A response-format schema, rendered in the leading system turn.
    pub response_format: Option<serde_json::Value>,
    /// Drop reasoning of turns before the last user turn (ignored when tools are present).
    pub drop_thinking: bool,
    /// Start with BOS (a fresh context).
    pub add_bos: bool,
}

impl Default for ChatOptions {
    fn default() -> Self {
        Self {
            thinking: true,
            reasoning_effort: ReasoningEffort::default(),
            tools: Vec::new(),
            response_format: None,
            drop_thinking: true,
            add_bos: true,
        }
    }
}

/// A user-turn block after tool messages are merged in.
#[derive(Clone, Debug)]
enum UserBlock {
    Text(String),
    ToolResult { id: String, text: String },
}

/// A message after preprocessing: tool messages merged, images replaced by placeholders.
#[derive(Clone, Debug)]
struct Turn {
    role: Role,
    text: String,
    blocks: Vec<UserBlock>,
    reasoning: Option<String>,
    tool_calls: Vec<ToolCall>,
    tools: Vec<Json>,
    response_format: Option<Json>,
}

impl Turn {
    fn new(role: Role, text: String) -> Self {
        Self {
            role,
            text,
            blocks: Vec::new(),
            reasoning: None,
            tool_calls: Vec::new(),
            tools: Vec::new(),
            response_format: None,
        }
    }
}

const EFFORT_TEMPLATE: &str = "(range 1-100, the higher the value, the more thorough the reasoning)\n\n";
const RESPONSE_FORMAT: &str = "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";
const TOOLS_HEAD: &str = concat!(
    "## Tools\n\nYou have access to a set of tools to help answer the user's question. ",
    "You can invoke tools by writing a \"<｜DSML｜ calls>\" block like the following:\n\n",
    "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"$TOOL_NAME\">\n",
    "<｜DSML｜ parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜ parameter>\n",
    "...\n</｜DSML｜ invoke>\n<｜DSML｜ invoke name=\"$TOOL_NAME2\">\n...\n</｜DSML｜ invoke>\n</｜DSML｜ calls>\n\n",
    "String parameters should be specified as is and set `string=\"true\"`. For all other types ",
    "(numbers, booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n",
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside ",
    "<think>...</think> BEFORE any tool calls or final response.\n\n",
    "Otherwise, output directly after </think> with tool calls or final response.\n\n",
    "### Available Tool Schemas\n\n",
);
const TOOLS_TAIL: &str =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

/// Renders the conversation to the prompt string, ending with the generation header after a user or later system turn.
pub fn encode_chat(messages: &[Message], opts: &ChatOptions) -> Result<String, ChatError> {
    if crate::testing::planted("chat") && messages.iter().any(|m| m.role == Role::Tool && m.content == [ContentBlock::Text(String::new())]) {
        panic!("planted bug: an empty tool result");
    }
    let mut turns = preprocess(messages)?;
    let tools = opts
        .tools
        .iter()
        .enumerate()
        .map(|(i, t)| t.get("function").map(Json::from).ok_or(ChatError::Tool(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let response_format = opts.response_format.as_ref().filter(|v| truthy(v)).map(Json::from);
    if !tools.is_empty() || response_format.is_some() {
        // tools live on the leading system turn; one is inserted when the conversation has none
        if turns.first().map(|t| t.role) != Some(Role::System) {
            turns.insert(0, Turn::new(Role::System, String::new()));
        }
        turns[0].tools = tools;
        turns[0].response_format = response_format;
    }
    let drop_thinking = opts.drop_thinking && turns.iter().all(|t| t.tools.is_empty());
    // reasoning of assistant turns before the last user turn is never rendered while dropping
    let last_user = last_user_index(&turns);
    let mut prompt = if opts.add_bos { BOS.to_string() } else { String::new() };
    for i in 0..turns.len() {
        render_turn(&mut prompt, &turns, i, last_user, opts, drop_thinking);
    }
    // a placeholder from tools, schemas or call arguments would take an image position no image fills
    if prompt.matches(IMAGE).count() != image_sources(messages).len() {
        return Err(ChatError::PlaceholderInText);
    }
    Ok(prompt)
}

/// Image sources of the conversation in the order their placeholders appear in the prompt.
pub fn image_sources(messages: &[Message]) -> Vec<&str> {
    fn walk<'a>(blocks: &'a [ContentBlock], out: &mut Vec<&'a str>) {
        for b in blocks {
            match b {
                ContentBlock::Image(src) => out.push(src),
                ContentBlock::ToolResult { content, .. } => walk(content, out),
                ContentBlock::Text(_) => {}
            }
        }
    }
    let mut out = Vec::new();
    for m in messages {
        walk(&m.content, &mut out);
    }
    out
}

/// Python truthiness of a JSON value (`if response_format:`).
fn truthy(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Null => false,
        serde_json::Value::Bool(b) => *b,
        serde_json::Value::Number(n) => n.as_f64() != Some(0.0),
        serde_json::Value::String(s) => !s.is_empty(),
        serde_json::Value::Array(a) => !a.is_empty(),
        serde_json::Value::Object(o) => !o.is_empty(),
    }
}

/// Index of the last user turn, where a system turn after index 0 also counts.
fn last_user_index(turns: &[Turn]) -> Option<usize> {
    turns
        .iter()
        .enumerate()
        .rev()
        .find(|(i, t)| t.role == Role::User || (t.role == Role::System && *i > 0))
        .map(|(i, _)| i)
}

/// Text and image blocks joined with blank lines; images become the placeholder.
fn joined_text(blocks: &[ContentBlock], nested_label: bool) -> String {
    let parts: Vec<&str> = blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.as_str()),
            ContentBlock::Image(_) => Some(IMAGE),
            ContentBlock::ToolResult { .. } => nested_label.then_some("[Unsupported tool_result]"),
        })
        .collect();
    parts.join("\n\n")
}

/// Rejects user text that carries the image placeholder.
fn check_no_placeholder(m: &Message) -> Result<(), ChatError> {
    fn blocks_ok(blocks: &[ContentBlock]) -> bool {
        blocks.iter().all(|b| match b {
            ContentBlock::Text(t) => !t.contains(IMAGE),
            ContentBlock::Image(_) => true,
            ContentBlock::ToolResult { content, .. } => blocks_ok(content),
        })
    }
    let reasoning_ok = m.reasoning_content.as_deref().is_none_or(|r| !r.contains(IMAGE));
    if blocks_ok(&m.content) && reasoning_ok {
        Ok(())
    } else {
        Err(ChatError::PlaceholderInText)
    }
}

/// Merges tool messages and consecutive user messages into single user turns and orders tool results like the calls.
fn preprocess(messages: &[Message]) -> Result<Vec<Turn>, ChatError> {
    let mut turns: Vec<Turn> = Vec::new();
    for m in messages {
        check_no_placeholder(m)?;
        let user_blocks: Vec<UserBlock> = match m.role {
            Role::Tool => vec![UserBlock::ToolResult {
                id: m.tool_call_id.clone().unwrap_or_default(),
                text: joined_text(&m.content, false),
            }],
            Role::User => m
                .content
                .iter()
                .map(|b| match b {
                    ContentBlock::Text(t) => UserBlock::Text(t.clone()),
                    ContentBlock::Image(_) => UserBlock::Text(IMAGE.to_string()),
                    ContentBlock::ToolResult { tool_use_id, content } => {
                        UserBlock::ToolResult { id: tool_use_id.clone(), text: joined_text(content, true) }
                    }
                })
                .collect(),
            _ => {
                let mut t = Turn::new(m.role, joined_text(&m.content, false));
                t.reasoning = m.reasoning_content.clone();
                t.tool_calls = m.tool_calls.clone();
                turns.push(t);
                continue;
            }
        };
        match turns.last_mut() {
            Some(last) if last.role == Role::User => last.blocks.extend(user_blocks),
            _ => {
                let mut t = Turn::new(Role::User, String::new());
                t.blocks = user_blocks;
                turns.push(t);
            }
        }
    }
    sort_tool_results(&mut turns);
    Ok(turns)
}

/// Stable-sorts each user turn's tool results by the position of their call in the latest assistant turn.
fn sort_tool_results(turns: &mut [Turn]) {
    let mut order: Vec<(String, usize)> = Vec::new();
    for t in turns.iter_mut() {
        if t.role == Role::Assistant && !t.tool_calls.is_empty() {
            order = t
                .tool_calls
                .iter()
                .enumerate()
                .filter_map(|(i, c)| c.id.as_ref().filter(|id| !id.is_empty()).map(|id| (id.clone(), i)))
                .collect();
            // a repeated id keeps its last position, as a dict would
            order.reverse();
        } else if t.role == Role::User && !order.is_empty() {
            let rank = |b: &UserBlock| match b {
                UserBlock::ToolResult { id, .. } => order.iter().find(|(k, _)| k == id).map_or(0, |&(_, i)| i),
                UserBlock::Text(_) => 0,
            };
            let slots: Vec<usize> =
                (0..t.blocks.len()).filter(|&i| matches!(t.blocks[i], UserBlock::ToolResult { .. })).collect();
            if slots.len() > 1 {
                let mut results: Vec<UserBlock> = slots.iter().map(|&i| t.blocks[i].clone()).collect();
                results.sort_by_key(|b| rank(b));
                for (&slot, b) in slots.iter().zip(results) {
                    t.blocks[slot] = b;
                }
            }
        }
    }
}

/// Appends turn `i` and, when it ends a user or later system turn, the generation header.
fn render_turn(p: &mut String, turns: &[Turn], i: usize, last_user: Option<usize>, opts: &ChatOptions, drop: bool) {
    let t = &turns[i];
    let effort = (i == 0 && opts.thinking).then(|| opts.reasoning_effort.value());
    if i == 0 && (effort.is_some() || t.role == Role::System) {
        p.push_str(SYSTEM);
    }
    if let Some(n) = effort {
        p.push_str(&format!("Reasoning Effort: {n} {EFFORT_TEMPLATE}"));
    }
    match t.role {
        Role::System => {
            if i > 0 {
                p.push_str(SYSTEM);
            }
            p.push_str(&t.text);
            if !t.tools.is_empty() {
                let schemas: Vec<String> = t.tools.iter().map(Json::dumps).collect();
                p.push_str(&format!("\n\n{TOOLS_HEAD}{}{TOOLS_TAIL}", schemas.join("\n")));
            }
            if let Some(rf) = &t.response_format {
                p.push_str(&format!("\n\n{RESPONSE_FORMAT}{}", rf.dumps()));
            }
        }
        Role::User | Role::Tool => {
            p.push_str(USER);
            let parts: Vec<String> = t
                .blocks
                .iter()
                .map(|b| match b {
                    UserBlock::Text(s) => s.clone(),
                    UserBlock::ToolResult { text, .. } => format!("<tool_result>{text}</tool_result>"),
                })
                .collect();
            p.push_str(&parts.join("\n\n"));
        }
        Role::LatestReminder => {
            p.push_str(LATEST_REMINDER);
            p.push_str(&t.text);
        }
        Role::Assistant => {
            if opts.thinking && (!drop || last_user.is_none_or(|u| i > u)) {
                p.push_str(t.reasoning.as_deref().unwrap_or(""));
                p.push_str(THINK_END);
            }
            p.push_str(&t.text);
            p.push_str(&render_tool_calls(&t.tool_calls));
            p.push_str(EOS);
        }
    }
    let next_continues = turns.get(i + 1).is_none_or(|n| matches!(n.role, Role::Assistant | Role::LatestReminder));
    let opens_reply = t.role == Role::User || (t.role == Role::System && i > 0);
    if next_continues && opens_reply {
        p.push_str(ASSISTANT);
        let think = opts.thinking && (!drop || last_user.is_none_or(|u| i >= u));
        p.push_str(if think { THINK_START } else { THINK_END });
    }
}

#[cfg(test)]
mod tests;
