//! Incremental detokenization for streaming: ids in one at a time, complete UTF-8 text out, partial byte sequences held back.
use super::tokenizer::{Tokenizer, TokenizerError};

/// Streaming decoder state; holds the ids whose text is not yet emitted plus one id of left context.
#[derive(Clone, Debug, Default)]
pub struct Detokenizer {
    ids: Vec<u32>,
    // ids[..prefix_len] were already emitted and stay only as left context for the decoder
    prefix_len: usize,
    skip_special_tokens: bool,
}

impl Detokenizer {
    /// A fresh stream; `skip_special_tokens` as in [`Tokenizer::decode`].
    pub fn new(skip_special_tokens: bool) -> Self {
        Self { ids: Vec::new(), prefix_len: 0, skip_special_tokens }
    }

    /// Adds one id and returns the newly completed text (empty while a UTF-8 sequence is still open).
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> Result<String, TokenizerError> {
        if id as usize >= tok.vocab_size() {
            return Err(TokenizerError::UnknownId { id, vocab: tok.vocab_size() });
        }
        self.ids.push(id);
        let prefix = tok.decode(&self.ids[..self.prefix_len], self.skip_special_tokens)?;
        let full = tok.decode(&self.ids, self.skip_special_tokens)?;
        if full.ends_with('\u{FFFD}') || full.len() <= prefix.len() {
            return Ok(String::new());
        }
        let fresh = after_common_prefix(&prefix, &full).to_string();
        // keep the last emitted id as context so word-initial decoding stays correct
        let keep_from = self.ids.len() - 1;
        self.ids.drain(..keep_from);
        self.prefix_len = self.ids.len();
        Ok(fresh)
    }

    /// Flushes whatever is held back, replacing incomplete UTF-8 with U+FFFD, and resets the stream.
    pub fn finish(&mut self, tok: &Tokenizer) -> Result<String, TokenizerError> {
        let prefix = tok.decode(&self.ids[..self.prefix_len], self.skip_special_tokens)?;
        let full = tok.decode(&self.ids, self.skip_special_tokens)?;
        let rest = after_common_prefix(&prefix, &full).to_string();
        self.ids.clear();
        self.prefix_len = 0;
        Ok(rest)
    }

    /// Number of ids pushed but not yet turned into emitted text.
    pub fn pending(&self) -> usize {
        self.ids.len() - self.prefix_len
    }
}

/// The part of `full` after its longest common prefix with `prefix`, cut at a char boundary.
fn after_common_prefix<'a>(prefix: &str, full: &'a str) -> &'a str {
    let mut cut = 0;
    for ((i, a), b) in full.char_indices().zip(prefix.chars()) {
        if a != b {
            break;
        }
        cut = i + a.len_utf8();
    }
    &full[cut..]
}
