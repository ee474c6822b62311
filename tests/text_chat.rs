//! Integration tests of V4.1 chat prompts through the real tokenizer: ids equal to Python `tokenizers` on the reference prompt.
mod text_support;

use lockstep::text::{
    encode_chat, parse_completion, render_tool_calls, ChatOptions, ContentBlock, Detokenizer, Message, Role, ToolCall,
};
use text_support::tokenizer;

fn chat_mode() -> ChatOptions {
    ChatOptions { thinking: false, ..ChatOptions::default() }
}

#[test]
fn spec_example_prompt_tokenizes_to_the_python_reference_ids() {
    let msgs = [Message::text(Role::System, "You are a helpful assistant."), Message::text(Role::User, "What is 2+2?")];
    let ids = tokenizer().encode(&encode_chat(&msgs, &ChatOptions::default()).unwrap()).unwrap();
    let want: Vec<u32> = vec![
        0, 128799, 77666, 288, 9504, 482, 28, 223, 2402, 343, 16801, 223, 19, 15, 1457, 14, 270, 4077, 270, 1990, 14,
        270, 850, 15146, 270, 22805, 868, 3476, 477, 260, 11502, 22896, 16, 128803, 3085, 344, 223, 20, 13, 20, 33,
        128804, 128821,
    ];
    assert_eq!(ids, want);
}

#[test]
fn image_placeholder_is_one_image_token_and_chat_header_ends_with_think_end() {
    let msg = Message {
        content: vec![ContentBlock::Text("Describe".into()), ContentBlock::Image("a.png".into())],
        ..Message::text(Role::User, "")
    };
    let ids = tokenizer().encode(&encode_chat(&[msg], &chat_mode()).unwrap()).unwrap();
    assert_eq!(ids, vec![0, 128803, 72188, 271, 129264, 128804, 128822]);
}

#[test]
fn dsml_tool_call_turn_tokenizes_to_the_python_reference_ids() {
    let call = ToolCall { id: Some("x".into()), name: "f".into(), arguments: r#"{"a": "b c", "n": 2}"#.into() };
    let msgs = [
        Message::text(Role::User, "go"),
        Message { tool_calls: vec![call], ..Message::text(Role::Assistant, "") },
        Message::tool("x", "ok"),
    ];
    let ids = tokenizer().encode(&encode_chat(&msgs, &chat_mode()).unwrap()).unwrap();
    let want: Vec<u32> = vec![
        0, 128803, 2710, 128804, 128822, 271, 30, 128825, 10699, 1018, 30, 128825, 34756, 2329, 1281, 72, 3816, 30,
        128825, 10767, 2329, 1281, 67, 4, 3418, 1281, 11476, 3320, 68, 274, 1718, 128825, 10767, 1018, 30, 128825,
        10767, 2329, 1281, 80, 4, 3418, 1281, 19836, 3320, 20, 1718, 128825, 10767, 1018, 1718, 128825, 34756, 1018,
        1718, 128825, 10699, 32, 1, 128803, 30, 72461, 46148, 32, 633, 1718, 72461, 46148, 32, 128804, 128822,
    ];
    assert_eq!(ids, want);
}

#[test]
fn streamed_model_output_with_a_tool_call_parses_back_to_the_call() {
    let tok = tokenizer();
    let calls = vec![ToolCall {
        id: None,
        name: "get_weather".into(),
        arguments: r#"{"city": "Zürich", "days": 2, "when": "明天"}"#.into(),
    }];
    let completion = format!("Checking 🌦 now.</think>Let me look.{}", render_tool_calls(&calls));
    let mut ids = tok.encode(&completion).unwrap();
    ids.push(tok.special().eos.unwrap());
    // decode as a server would: one id at a time, special tokens kept so EOS is seen
    let mut d = Detokenizer::new(false);
    let mut text = String::new();
    for &id in &ids {
        text.push_str(&d.push(tok, id).unwrap());
    }
    text.push_str(&d.finish(tok).unwrap());
    let parsed = parse_completion(&text, true).unwrap();
    assert_eq!(parsed.reasoning_content, "Checking 🌦 now.");
    assert_eq!(parsed.content, "Let me look.");
    assert_eq!(parsed.tool_calls, calls);
}
