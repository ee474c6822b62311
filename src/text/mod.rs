//! Text: tokenizer, V4.1 chat encoding, engram token map.
