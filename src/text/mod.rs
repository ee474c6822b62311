//! Text: tokenizer, V4.1 chat encoding, DSML tool calls, engram token map and n-gram hash ids.
pub mod chat;
pub mod detok;
pub mod dsml;
pub mod engram_hash;
pub mod engram_map;
pub mod numpy_rng;
pub mod pyjson;
pub mod tokenizer;

pub use chat::{encode_chat, image_sources, ChatError, ChatOptions, ContentBlock, Message, ReasoningEffort, Role};
pub use detok::Detokenizer;
pub use dsml::{parse_completion, render_tool_calls, DsmlError, ParsedCompletion, ToolCall};
pub use engram_hash::{hash_multipliers, prime_offsets, EngramHashError, EngramHistory, LayerHash, NgramHasher, DEAD};
pub use engram_map::{EngramMapError, TokenMap};
pub use tokenizer::{find_tokenizer_json, SpecialTokens, Tokenizer, TokenizerError};
