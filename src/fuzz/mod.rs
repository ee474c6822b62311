//! Fuzzing what a user controls: a seeded, mutating, outcome-guided driver on the stable toolchain, and one target per input surface, each with a planted bug its run must find.
pub mod engine;
mod files;
mod http;
mod mutate;
mod text;

pub use engine::{fuzz, Budget, Report};

/// One input surface under fuzzing.
pub trait Target {
    /// The target's name (its corpus folder under `fuzz/`, its planted bug's switch).
    fn name(&self) -> &'static str;
    /// Inputs the run starts from, besides the committed corpus.
    fn seeds(&self) -> Vec<Vec<u8>>;
    /// Byte strings the mutators insert (keywords, markup, field names).
    fn dictionary(&self) -> Vec<Vec<u8>> {
        Vec::new()
    }
    /// Whether the input after its first line is JSON (the tree mutators apply there).
    fn json(&self) -> bool {
        false
    }
    /// Runs one input: `Ok(label)` names the path it took (new labels grow the corpus), `Err` is a broken property.
    fn run(&mut self, input: &[u8]) -> Result<String, String>;
}

/// Every target, in the order a full run takes them.
pub fn targets() -> Result<Vec<Box<dyn Target>>, String> {
    Ok(vec![
        Box::new(http::Http::new()?),
        Box::new(text::Dsml),
        Box::new(text::Chat),
        Box::new(text::Tokens::new()?),
        Box::new(files::SafeTensors::new()?),
        Box::new(files::ConfigFile),
        Box::new(files::SnapshotFile::new()),
        Box::new(files::Image),
    ])
}

/// The names of every target.
pub const NAMES: &[&str] = &["http", "dsml", "chat", "tokenizer", "safetensors", "config", "snapshot", "image"];

/// The first line of `input` (without its newline) and the rest.
pub fn split_line(input: &[u8]) -> (&[u8], &[u8]) {
    match input.iter().position(|&b| b == b'\n') {
        Some(i) => (&input[..i], &input[i + 1..]),
        None => (input, &[]),
    }
}

/// A short label of an error message: a `Debug` value's variant, else its first plain words, so one kind of error is one label.
pub fn error_label(kind: &str, msg: &str) -> String {
    let head: String = msg.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
    if head.starts_with(|c: char| c.is_ascii_uppercase()) && msg[head.len()..].starts_with([' ', '(', '{']) && !msg[head.len()..].starts_with("  ") {
        return format!("{kind}:{head}");
    }
    let plain = |w: &&str| (2..=12).contains(&w.len()) && w.chars().all(|c| c.is_ascii_lowercase());
    let words: Vec<&str> = msg.split_whitespace().filter(plain).take(3).collect();
    format!("{kind}:{}", words.join(" "))
}
