//! Text: tokenizer, V4.1 chat encoding, engram token map and n-gram hash ids.
pub mod detok;
pub mod engram_hash;
pub mod engram_map;
pub mod numpy_rng;
pub mod tokenizer;

pub use detok::Detokenizer;
pub use engram_hash::{hash_multipliers, prime_offsets, EngramHashError, EngramHistory, LayerHash, NgramHasher, DEAD};
pub use engram_map::{EngramMapError, TokenMap};
pub use tokenizer::{find_tokenizer_json, SpecialTokens, Tokenizer, TokenizerError};
