//! DSML tests: parses compared with the official encoding.py parser, render/parse round trips, and malformed output that must fail cleanly.
use super::*;

const EOS_TEXT: &str = "<｜end▁of▁sentence｜>";

const THINKING_CALLS: &str = concat!(
    "Let me check.</think>Sure.\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n",
    "<｜DSML｜ parameter name=\"city\" string=\"true\">Paris \"centre\"</｜DSML｜ parameter>\n",
    "<｜DSML｜ parameter name=\"days\" string=\"false\">3</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n",
    "<｜DSML｜ invoke name=\"noop\">\n\n</｜DSML｜ invoke>\n</｜DSML｜ calls><｜end▁of▁sentence｜>",
);

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall { id: None, name: name.into(), arguments: arguments.into() }
}

#[test]
fn parse_matches_the_reference_parser_on_reasoning_content_and_calls() {
    let got = parse_completion(THINKING_CALLS, true).unwrap();
    assert_eq!(got.reasoning_content, "Let me check.");
    assert_eq!(got.content, "Sure.");
    // arguments exactly as encoding.py's decode_dsml_to_arguments writes them
    assert_eq!(
        got.tool_calls,
        vec![call("get_weather", r#"{"city": "Paris \"centre\"", "days": 3}"#), call("noop", "{}")]
    );
}

#[test]
fn plain_answers_parse_with_or_without_eos() {
    let want = ParsedCompletion { content: "Just text.".into(), ..Default::default() };
    assert_eq!(parse_completion("Just text.<｜end▁of▁sentence｜>", false).unwrap(), want);
    assert_eq!(parse_completion("Just text.", false).unwrap(), want);
}

#[test]
fn output_cut_off_inside_reasoning_is_all_reasoning() {
    let got = parse_completion("still thinking about", true).unwrap();
    assert_eq!(got.reasoning_content, "still thinking about");
    assert_eq!((got.content.as_str(), got.tool_calls.len()), ("", 0));
}

#[test]
fn rendered_calls_parse_back_to_the_same_names_and_arguments() {
    let calls = vec![
        call("get_weather", r#"{"city": "Paris", "days": 3, "units": {"t": "C", "w": [1.5, null]}, "ok": false}"#),
        call("search", r#"{"query": "multi\nline <tag> \"quoted\""}"#),
        call("noop", "{}"),
    ];
    let text = format!("Answer first.{}{EOS_TEXT}", render_tool_calls(&calls));
    let got = parse_completion(&text, false).unwrap();
    assert_eq!(got.content, "Answer first.");
    assert_eq!(got.tool_calls, calls);
}

#[test]
fn double_encoded_arguments_render_like_the_object() {
    let once = r#"{"a": 1}"#;
    let twice = serde_json::to_string(once).unwrap();
    assert_eq!(render_tool_calls(&[call("f", &twice)]), render_tool_calls(&[call("f", once)]));
}

#[test]
fn malformed_tool_calls_are_errors_like_the_reference() {
    let wrap = |body: &str| format!("x\n\n<｜DSML｜ calls>\n{body}</｜DSML｜ calls><｜end▁of▁sentence｜>");
    let bad_name = wrap("<｜DSML｜ invoke nam=\"f\">\n</｜DSML｜ invoke>\n");
    assert!(matches!(parse_completion(&bad_name, false), Err(DsmlError::Name(_))));
    let bad_flag = wrap(
        "<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"a\" string=\"maybe\">1</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n",
    );
    assert!(matches!(parse_completion(&bad_flag, false), Err(DsmlError::Parameter(_))));
    let dup = wrap(concat!(
        "<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"a\" string=\"true\">1</｜DSML｜ parameter>\n",
        "<｜DSML｜ parameter name=\"a\" string=\"true\">2</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n",
    ));
    assert_eq!(parse_completion(&dup, false), Err(DsmlError::DuplicateParameter("a".into())));
    let trailing = "x\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n</｜DSML｜ invoke>\n</｜DSML｜ calls>tail<｜end▁of▁sentence｜>";
    assert_eq!(parse_completion(trailing, false), Err(DsmlError::TrailingText("tail".into())));
    assert_eq!(
        parse_completion("x\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n", false),
        Err(DsmlError::Unclosed)
    );
}

#[test]
fn every_truncation_and_byte_corruption_of_valid_output_returns_without_panicking() {
    let text = THINKING_CALLS;
    let mut outcomes = (0, 0);
    for (cut, _) in text.char_indices() {
        match parse_completion(&text[..cut], true) {
            Ok(_) => outcomes.0 += 1,
            Err(_) => outcomes.1 += 1,
        }
    }
    assert!(outcomes.0 > 0 && outcomes.1 > 0, "{outcomes:?}");
    // deterministic corruption: overwrite one char with a DSML-significant one
    let chars: Vec<char> = text.chars().collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..2000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut c = chars.clone();
        let at = (state % c.len() as u64) as usize;
        c[at] = ['<', '>', '"', '\n', '/', '｜', 'x'][(state >> 32) as usize % 7];
        let s: String = c.into_iter().collect();
        let _ = parse_completion(&s, state & 1 == 0);
    }
}
