//! The real tokenizer for the text integration tests, fetched with scripts/fetch_tokenizer.sh when absent.
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use lockstep::text::{find_tokenizer_json, Tokenizer};

/// The real tokenizer, fetched with scripts/fetch_tokenizer.sh when neither the env var nor the cache has it.
pub fn tokenizer() -> &'static Tokenizer {
    static TOK: OnceLock<Tokenizer> = OnceLock::new();
    TOK.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let path = find_tokenizer_json(root).unwrap_or_else(|| fetch(root));
        Tokenizer::from_file(&path).expect("load tokenizer.json")
    })
}

fn fetch(root: &Path) -> PathBuf {
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/fetch_tokenizer.sh"))
        .output()
        .expect("run scripts/fetch_tokenizer.sh");
    assert!(out.status.success(), "fetch_tokenizer.sh failed: {}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}
