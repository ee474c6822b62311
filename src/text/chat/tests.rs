//! Chat encoding tests: every expected prompt was produced by the official V4.1 encoding.py on the same conversation.
use super::*;
use serde_json::json;

const EXAMPLE: &str = "<｜begin▁of▁sentence｜><｜System｜>Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the reasoning)\n\nYou are a helpful assistant.<｜User｜>What is 2+2?<｜Assistant｜><think>";
const CHAT_HEADER: &str = "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜></think>";
const EFFORT_LOW_NO_SYSTEM: &str = "<｜begin▁of▁sentence｜><｜System｜>Reasoning Effort: 50 (range 1-100, the higher the value, the more thorough the reasoning)\n\n<｜User｜>Hi<｜Assistant｜><think>";
const EFFORT_INT: &str = "<｜begin▁of▁sentence｜><｜System｜>Reasoning Effort: 42 (range 1-100, the higher the value, the more thorough the reasoning)\n\n<｜User｜>Hi<｜Assistant｜><think>";
const MULTI_TURN_THINKING: &str = "<｜begin▁of▁sentence｜><｜System｜>Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the reasoning)\n\n<｜User｜>q1<｜Assistant｜></think>a1<｜end▁of▁sentence｜><｜User｜>q2<｜Assistant｜></think>a2<｜end▁of▁sentence｜><｜User｜>q3<｜Assistant｜><think>";
const MULTI_TURN_CHAT: &str = "<｜begin▁of▁sentence｜><｜System｜>sys<｜User｜>q1<｜Assistant｜></think>a1<｜end▁of▁sentence｜><｜User｜>q2<｜Assistant｜></think>";
const ENDS_WITH_ASSISTANT: &str = "<｜begin▁of▁sentence｜><｜System｜>Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the reasoning)\n\n<｜User｜>q1<｜Assistant｜><think>r1</think>a1<｜end▁of▁sentence｜>";
const MID_SYSTEM: &str = "<｜begin▁of▁sentence｜><｜System｜>Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the reasoning)\n\n<｜User｜>Hi<｜Assistant｜></think>Hello<｜end▁of▁sentence｜><｜System｜>Be formal.<｜Assistant｜><think>";
const IMAGE: &str = "<｜begin▁of▁sentence｜><｜User｜>What is in\n\n<｜deepseek_image｜>\n\n<｜deepseek_image｜>\n\nthese?<｜Assistant｜></think>";
// tool schema keys are given in sorted order so the expectation holds whatever serde_json map order is
const TOOLS: &str = "<｜begin▁of▁sentence｜><｜System｜>Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the reasoning)\n\nYou may use tools.\n\n## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke tools by writing a \"<｜DSML｜ calls>\" block like the following:\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"$TOOL_NAME\">\n<｜DSML｜ parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜ parameter>\n...\n</｜DSML｜ invoke>\n<｜DSML｜ invoke name=\"$TOOL_NAME2\">\n...\n</｜DSML｜ invoke>\n</｜DSML｜ calls>\n\nString parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\nIf thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside <think>...</think> BEFORE any tool calls or final response.\n\nOtherwise, output directly after </think> with tool calls or final response.\n\n### Available Tool Schemas\n\n{\"description\": \"Get weather\", \"name\": \"get_weather\", \"parameters\": {\"properties\": {\"city\": {\"type\": \"string\"}, \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"], \"type\": \"object\"}}\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n<｜User｜>Weather in Paris?<｜Assistant｜><think>need the tool</think>\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n<｜DSML｜ parameter name=\"city\" string=\"true\">Paris</｜DSML｜ parameter>\n<｜DSML｜ parameter name=\"days\" string=\"false\">3</｜DSML｜ parameter>\n<｜DSML｜ parameter name=\"metric\" string=\"false\">true</｜DSML｜ parameter>\n<｜DSML｜ parameter name=\"extra\" string=\"false\">{\"b\": 1.5, \"a\": [1, \"x\"]}</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n<｜DSML｜ invoke name=\"get_weather\">\n<｜DSML｜ parameter name=\"city\" string=\"true\">Rome</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls><｜end▁of▁sentence｜><｜User｜><tool_result>18C, cloudy</tool_result>\n\n<tool_result>24C</tool_result>\n\nAnd tomorrow?<｜Assistant｜><think>";
const TOOL_ARGS_NOT_JSON: &str = "<｜begin▁of▁sentence｜><｜User｜>go<｜Assistant｜></think>ok\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"arguments\" string=\"true\">not json</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n<｜DSML｜ invoke name=\"g\">\n\n</｜DSML｜ invoke>\n</｜DSML｜ calls><｜end▁of▁sentence｜><｜User｜><tool_result>done</tool_result><｜Assistant｜></think>";
const RESPONSE_FORMAT: &str = "<｜begin▁of▁sentence｜><｜System｜>sys\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n{\"type\": \"json_object\"}<｜User｜>Hi<｜Assistant｜></think>";
const LATEST_REMINDER: &str = "<｜begin▁of▁sentence｜><｜System｜>Reasoning Effort: 75 (range 1-100, the higher the value, the more thorough the reasoning)\n\n<｜User｜>q<｜Assistant｜><think><｜latest_reminder｜>be brief";

fn user(t: &str) -> Message {
    Message::text(Role::User, t)
}

fn system(t: &str) -> Message {
    Message::text(Role::System, t)
}

fn assistant(t: &str, reasoning: Option<&str>) -> Message {
    Message { reasoning_content: reasoning.map(str::to_string), ..Message::text(Role::Assistant, t) }
}

fn thinking() -> ChatOptions {
    ChatOptions::default()
}

fn chat() -> ChatOptions {
    ChatOptions { thinking: false, ..ChatOptions::default() }
}

fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
    ToolCall { id: Some(id.into()), name: name.into(), arguments: arguments.into() }
}

#[test]
fn spec_example_with_system_prompt_and_default_effort() {
    let got = encode_chat(&[system("You are a helpful assistant."), user("What is 2+2?")], &thinking()).unwrap();
    assert_eq!(got, EXAMPLE);
}

#[test]
fn chat_mode_header_closes_thinking_and_renders_no_effort() {
    assert_eq!(encode_chat(&[user("Hi")], &chat()).unwrap(), CHAT_HEADER);
}

#[test]
fn effort_opens_a_system_turn_even_without_a_system_message() {
    let low = ChatOptions { reasoning_effort: ReasoningEffort::named("low").unwrap(), ..thinking() };
    assert_eq!(encode_chat(&[user("Hi")], &low).unwrap(), EFFORT_LOW_NO_SYSTEM);
    let n42 = ChatOptions { reasoning_effort: ReasoningEffort::budget(42).unwrap(), ..thinking() };
    assert_eq!(encode_chat(&[user("Hi")], &n42).unwrap(), EFFORT_INT);
}

#[test]
fn effort_outside_1_to_100_or_unknown_names_are_rejected() {
    assert!(ReasoningEffort::budget(0).is_err());
    assert!(ReasoningEffort::budget(101).is_err());
    assert!(ReasoningEffort::budget(-3).is_err());
    assert!(ReasoningEffort::named("medium").is_err());
    assert_eq!(ReasoningEffort::named("max").unwrap().value(), 100);
    assert_eq!(ReasoningEffort::default().value(), 75);
}

#[test]
fn reasoning_of_turns_before_the_last_user_turn_is_dropped() {
    let msgs = [user("q1"), assistant("a1", Some("r1")), user("q2"), assistant("a2", Some("r2")), user("q3")];
    assert_eq!(encode_chat(&msgs, &thinking()).unwrap(), MULTI_TURN_THINKING);
    let msgs = [system("sys"), user("q1"), assistant("a1", Some("r1")), user("q2")];
    assert_eq!(encode_chat(&msgs, &chat()).unwrap(), MULTI_TURN_CHAT);
}

#[test]
fn a_finished_last_assistant_turn_keeps_its_reasoning_and_gets_no_header() {
    let msgs = [user("q1"), assistant("a1", Some("r1"))];
    assert_eq!(encode_chat(&msgs, &thinking()).unwrap(), ENDS_WITH_ASSISTANT);
}

#[test]
fn a_mid_conversation_system_message_acts_as_a_user_turn() {
    let msgs = [user("Hi"), assistant("Hello", None), system("Be formal.")];
    assert_eq!(encode_chat(&msgs, &thinking()).unwrap(), MID_SYSTEM);
}

#[test]
fn image_blocks_become_placeholders_joined_with_text() {
    let m = Message {
        content: vec![
            ContentBlock::Text("What is in".into()),
            ContentBlock::Image("a.png".into()),
            ContentBlock::Image("b.png".into()),
            ContentBlock::Text("these?".into()),
        ],
        ..user("")
    };
    assert_eq!(encode_chat(std::slice::from_ref(&m), &chat()).unwrap(), IMAGE);
    assert_eq!(image_sources(&[m]), vec!["a.png", "b.png"]);
}

#[test]
fn placeholder_typed_into_text_is_rejected() {
    let err = encode_chat(&[user("see <｜deepseek_image｜> here")], &chat());
    assert_eq!(err, Err(ChatError::PlaceholderInText));
    let err = encode_chat(&[user("q"), assistant("a", Some("<｜deepseek_image｜>"))], &chat());
    assert_eq!(err, Err(ChatError::PlaceholderInText));
}

#[test]
fn tools_keep_reasoning_render_dsml_calls_and_order_results_by_call() {
    let tool = json!({"type": "function", "function": {"description": "Get weather", "name": "get_weather",
        "parameters": {"properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                       "required": ["city"], "type": "object"}}});
    let args = r#"{"city": "Paris", "days": 3, "metric": true, "extra": {"b": 1.5, "a": [1, "x"]}}"#;
    let msgs = [
        system("You may use tools."),
        user("Weather in Paris?"),
        Message {
            tool_calls: vec![call("c1", "get_weather", args), call("c2", "get_weather", r#"{"city": "Rome"}"#)],
            ..assistant("", Some("need the tool"))
        },
        Message::tool("c2", "24C"),
        Message::tool("c1", "18C, cloudy"),
        user("And tomorrow?"),
    ];
    let opts = ChatOptions { tools: vec![tool], ..thinking() };
    assert_eq!(encode_chat(&msgs, &opts).unwrap(), TOOLS);
}

#[test]
fn non_object_arguments_become_one_string_parameter_and_empty_ones_no_parameter() {
    let msgs = [
        user("go"),
        Message { tool_calls: vec![call("x", "f", "not json"), call("y", "g", "{}")], ..assistant("ok", None) },
        Message::tool("x", "done"),
    ];
    assert_eq!(encode_chat(&msgs, &chat()).unwrap(), TOOL_ARGS_NOT_JSON);
}

#[test]
fn response_format_is_appended_to_the_system_turn() {
    let opts = ChatOptions { response_format: Some(json!({"type": "json_object"})), ..chat() };
    assert_eq!(encode_chat(&[system("sys"), user("Hi")], &opts).unwrap(), RESPONSE_FORMAT);
    let empty = ChatOptions { response_format: Some(json!({})), ..chat() };
    assert_eq!(
        encode_chat(&[system("sys"), user("Hi")], &empty).unwrap(),
        encode_chat(&[system("sys"), user("Hi")], &chat()).unwrap()
    );
}

#[test]
fn latest_reminder_follows_the_generation_header() {
    let msgs = [user("q"), Message::text(Role::LatestReminder, "be brief")];
    assert_eq!(encode_chat(&msgs, &thinking()).unwrap(), LATEST_REMINDER);
}

#[test]
fn tools_without_a_system_message_get_an_empty_leading_system_turn() {
    let tool = json!({"type": "function", "function": {"name": "f"}});
    let got = encode_chat(&[user("Hi")], &ChatOptions { tools: vec![tool], ..chat() }).unwrap();
    assert!(got.starts_with("<｜begin▁of▁sentence｜><｜System｜>\n\n## Tools\n\n"), "{got}");
    assert!(got.contains("### Available Tool Schemas\n\n{\"name\": \"f\"}\n\nYou MUST"), "{got}");
    assert!(got.ends_with("<｜User｜>Hi<｜Assistant｜></think>"), "{got}");
    let bad = ChatOptions { tools: vec![json!({"type": "function"})], ..chat() };
    assert_eq!(encode_chat(&[user("Hi")], &bad), Err(ChatError::Tool(0)));
}

#[test]
fn without_bos_the_prompt_starts_at_the_first_turn() {
    let opts = ChatOptions { add_bos: false, ..chat() };
    assert_eq!(encode_chat(&[user("Hi")], &opts).unwrap(), "<｜User｜>Hi<｜Assistant｜></think>");
}
