//! The DeepSeek-V4.1 byte-level BPE tokenizer: a thin wrapper over the `tokenizers` crate with the special-token ids looked up by name, each needed only by what uses it.
use std::path::{Path, PathBuf};

/// What failed while loading or running the tokenizer.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// The tokenizer.json could not be read or parsed.
    #[error("cannot load tokenizer from {path}: {message}")]
    Load { path: PathBuf, message: String },
    /// A special token the V4.1 chat format needs here is not in the vocabulary.
    #[error("this needs the token {0:?}, which the tokenizer lacks (the V4.1 tokenizer.json has it)")]
    MissingToken(&'static str),
    /// Encoding a string failed inside the tokenizers crate.
    #[error("encode failed: {0}")]
    Encode(String),
    /// Decoding ids failed inside the tokenizers crate.
    #[error("decode failed: {0}")]
    Decode(String),
    /// A token id at or beyond the vocabulary size.
    #[error("token id {id} is outside the vocabulary of {vocab} ids")]
    UnknownId { id: u32, vocab: usize },
}

/// Token strings of the V4.1 chat format and engram front end.
pub mod names {
    /// Beginning of sentence, once at the start of a context.
    pub const BOS: &str = "<｜begin▁of▁sentence｜>";
    /// End of sentence; ends every assistant turn.
    pub const EOS: &str = "<｜end▁of▁sentence｜>";
    /// Padding; its compressed id pads engram n-grams.
    pub const PAD: &str = "<｜▁pad▁｜>";
    /// Starts a system turn (V4.1); also the DSpark noise token.
    pub const SYSTEM: &str = "<｜System｜>";
    /// Starts a user turn.
    pub const USER: &str = "<｜User｜>";
    /// Starts an assistant turn.
    pub const ASSISTANT: &str = "<｜Assistant｜>";
    /// Opens reasoning.
    pub const THINK_START: &str = "<think>";
    /// Closes reasoning.
    pub const THINK_END: &str = "</think>";
    /// One image-span position; a regular added token that survives skip_special_tokens.
    pub const IMAGE: &str = "<｜deepseek_image｜>";
    /// The DSML marker inside tool-call tags such as `<｜DSML｜ invoke`.
    pub const DSML: &str = "｜DSML｜";
    /// Starts a latest-reminder turn.
    pub const LATEST_REMINDER: &str = "<｜latest_reminder｜>";
    /// Task tokens of the quick-instruction tasks, in encoding.py's order.
    pub const TASKS: [&str; 6] =
        ["<｜action｜>", "<｜query｜>", "<｜authority｜>", "<｜domain｜>", "<｜title｜>", "<｜read_url｜>"];
    /// Every special token above.
    pub const ALL: [&str; 17] = [
        BOS, EOS, PAD, SYSTEM, USER, ASSISTANT, THINK_START, THINK_END, IMAGE, DSML, LATEST_REMINDER,
        TASKS[0], TASKS[1], TASKS[2], TASKS[3], TASKS[4], TASKS[5],
    ];
}

/// Ids of the special tokens, looked up by string in the loaded vocabulary; `None` where it lacks one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecialTokens {
    /// `<｜begin▁of▁sentence｜>`.
    pub bos: Option<u32>,
    /// `<｜end▁of▁sentence｜>`.
    pub eos: Option<u32>,
    /// `<｜▁pad▁｜>`.
    pub pad: Option<u32>,
    /// `<｜System｜>` (also the DSpark noise token).
    pub system: Option<u32>,
    /// `<｜User｜>`.
    pub user: Option<u32>,
    /// `<｜Assistant｜>`.
    pub assistant: Option<u32>,
    /// `<think>`.
    pub think_start: Option<u32>,
    /// `</think>`.
    pub think_end: Option<u32>,
    /// `<｜deepseek_image｜>`.
    pub image: Option<u32>,
    /// `｜DSML｜`.
    pub dsml: Option<u32>,
    /// `<｜latest_reminder｜>`.
    pub latest_reminder: Option<u32>,
    /// Task tokens in the order of [`names::TASKS`].
    pub tasks: [Option<u32>; 6],
}

impl SpecialTokens {
    /// Looks every special token up in `tok`; a missing one is refused only where it is needed.
    fn lookup(tok: &tokenizers::Tokenizer) -> Self {
        let id = |name: &str| tok.token_to_id(name);
        Self {
            bos: id(names::BOS),
            eos: id(names::EOS),
            pad: id(names::PAD),
            system: id(names::SYSTEM),
            user: id(names::USER),
            assistant: id(names::ASSISTANT),
            think_start: id(names::THINK_START),
            think_end: id(names::THINK_END),
            image: id(names::IMAGE),
            dsml: id(names::DSML),
            latest_reminder: id(names::LATEST_REMINDER),
            tasks: names::TASKS.map(id),
        }
    }

    /// Whether `id` ends a generated turn: EOS, or defensively a new user or assistant header.
    pub fn is_stop(&self, id: u32) -> bool {
        [self.eos, self.user, self.assistant].contains(&Some(id))
    }
}

/// A loaded tokenizer with its special-token ids.
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    special: SpecialTokens,
    vocab: usize,
}

impl Tokenizer {
    /// Loads a tokenizer.json and looks up the V4.1 special tokens (a missing one fails only what needs it).
    pub fn from_file(path: &Path) -> Result<Self, TokenizerError> {
        let inner = tokenizers::Tokenizer::from_file(path)
            .map_err(|e| TokenizerError::Load { path: path.to_path_buf(), message: e.to_string() })?;
        Self::from_inner(inner)
    }

    /// Parses tokenizer.json bytes and looks up the V4.1 special tokens.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, TokenizerError> {
        let inner = tokenizers::Tokenizer::from_bytes(bytes)
            .map_err(|e| TokenizerError::Load { path: PathBuf::from("<bytes>"), message: e.to_string() })?;
        Self::from_inner(inner)
    }

    fn from_inner(inner: tokenizers::Tokenizer) -> Result<Self, TokenizerError> {
        let special = SpecialTokens::lookup(&inner);
        let vocab = inner.get_vocab_size(true);
        Ok(Self { inner, special, vocab })
    }

    /// Special-token ids of this vocabulary.
    pub fn special(&self) -> &SpecialTokens {
        &self.special
    }

    /// The id of the special token `name` (one of [`names`]), or an error naming it when this vocabulary lacks it.
    pub fn require(&self, name: &'static str) -> Result<u32, TokenizerError> {
        self.inner.token_to_id(name).ok_or(TokenizerError::MissingToken(name))
    }

    /// Encodes a rendered chat prompt, refused when it writes a special token this vocabulary lacks (its ids would not be the V4.1 ones).
    pub fn encode_rendered(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        if let Some(&name) = names::ALL.iter().find(|&&n| text.contains(n) && self.inner.token_to_id(n).is_none()) {
            return Err(TokenizerError::MissingToken(name));
        }
        self.encode(text)
    }

    /// Number of ids, added tokens included (129,280 for V4.1).
    pub fn vocab_size(&self) -> usize {
        self.vocab
    }

    /// Encodes text with added tokens matched atomically and no BOS added.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        let enc = self.inner.encode(text, false).map_err(|e| TokenizerError::Encode(e.to_string()))?;
        if crate::testing::planted("tokenizer") && enc.get_ids().len() >= 4 && text.chars().any(|c| c as u32 >= 0x10000) {
            panic!("planted bug: an astral character among four or more tokens");
        }
        Ok(enc.get_ids().to_vec())
    }

    /// Decodes ids; with `skip_special_tokens` the tokens flagged special are dropped.
    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Result<String, TokenizerError> {
        self.check_ids(ids)?;
        self.inner.decode(ids, skip_special_tokens).map_err(|e| TokenizerError::Decode(e.to_string()))
    }

    /// The vocabulary string of one id (byte-level form for regular tokens).
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// The id of one vocabulary string.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The wrapped `tokenizers` tokenizer.
    pub fn inner(&self) -> &tokenizers::Tokenizer {
        &self.inner
    }

    fn check_ids(&self, ids: &[u32]) -> Result<(), TokenizerError> {
        match ids.iter().find(|&&id| id as usize >= self.vocab) {
            Some(&id) => Err(TokenizerError::UnknownId { id, vocab: self.vocab }),
            None => Ok(()),
        }
    }
}

/// Environment variable naming a tokenizer.json (or a directory holding one).
pub const TOKENIZER_ENV: &str = "LOCKSTEP_TOKENIZER";

/// Where `scripts/fetch_tokenizer.sh` caches tokenizer.json, relative to the repository root.
pub const TOKENIZER_CACHE: &str = ".cache/tokenizer/tokenizer.json";

/// The tokenizer.json named by `LOCKSTEP_TOKENIZER`, else the cache under `repo_root`, if it exists.
pub fn find_tokenizer_json(repo_root: &Path) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(TOKENIZER_ENV) {
        let p = PathBuf::from(p);
        let file = if p.is_dir() { p.join("tokenizer.json") } else { p };
        return file.is_file().then_some(file);
    }
    let cached = repo_root.join(TOKENIZER_CACHE);
    cached.is_file().then_some(cached)
}
