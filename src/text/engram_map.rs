//! The engram compressed token map: token ids that normalize alike share one class, bit-identical to the reference `build_compressed_token_map`.
use tokenizers::normalizers::{Lowercase, Replace, Sequence, Strip, StripAccents, NFD, NFKC};
use tokenizers::{NormalizedString, Normalizer, NormalizerWrapper};

use super::tokenizer::{Tokenizer, TokenizerError};

/// Number of classes the release tokenizer folds into (`engram_compressed_vocab_size`).
pub const RELEASE_CLASSES: usize = 99_092;

/// Private-use sentinel that keeps a lone space from being stripped to nothing.
const SENTINEL: &str = "\u{E000}";

/// What failed while building the token map.
#[derive(Debug, thiserror::Error)]
pub enum EngramMapError {
    /// Decoding a token failed.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// The normalizer could not be built or run.
    #[error("normalizer failed: {0}")]
    Normalize(String),
    /// An id has neither text nor a vocabulary string.
    #[error("token id {0} has no vocabulary string")]
    NoToken(u32),
    /// The number of classes differs from the configured compressed vocabulary.
    #[error("token map has {got} classes, the config expects {expected}")]
    ClassCount { got: usize, expected: usize },
}

/// Token id → compressed class id, with the number of classes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenMap {
    /// Class of each token id (one entry per vocabulary id).
    pub classes_of: Vec<u32>,
    /// Number of distinct classes (`max + 1`).
    pub classes: usize,
}

impl TokenMap {
    /// Builds the map from the tokenizer exactly as the reference does.
    pub fn build(tok: &Tokenizer) -> Result<Self, EngramMapError> {
        let normalizer = key_normalizer()?;
        let mut seen: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
        let mut classes_of = Vec::with_capacity(tok.vocab_size());
        for id in 0..tok.vocab_size() as u32 {
            let key = token_key(tok, &normalizer, id)?;
            let next = seen.len() as u32;
            classes_of.push(*seen.entry(key).or_insert(next));
        }
        Ok(Self { classes_of, classes: seen.len() })
    }

    /// The synthetic map `c(id) = id mod modulus` used by tiny test configs.
    pub fn synthetic(vocab: usize, modulus: u32) -> Self {
        let modulus = modulus.max(1);
        let classes_of: Vec<u32> = (0..vocab as u32).map(|id| id % modulus).collect();
        let classes = (modulus as usize).min(vocab);
        Self { classes_of, classes }
    }

    /// Fails unless the map has exactly `expected` classes (the multipliers depend on it).
    pub fn check_classes(&self, expected: usize) -> Result<(), EngramMapError> {
        if self.classes == expected {
            Ok(())
        } else {
            Err(EngramMapError::ClassCount { got: self.classes, expected })
        }
    }

    /// The class of one token id, if the id is in the vocabulary.
    pub fn class(&self, id: u32) -> Option<u32> {
        self.classes_of.get(id as usize).copied()
    }
}

/// The key of one id: its raw string if its text is a partial UTF-8 sequence, else the normalized text.
fn token_key(tok: &Tokenizer, normalizer: &Sequence, id: u32) -> Result<String, EngramMapError> {
    let text = tok.decode(&[id], false)?;
    if text.contains('\u{FFFD}') {
        return tok.id_to_token(id).ok_or(EngramMapError::NoToken(id));
    }
    let normalized = normalize_key(normalizer, &text)?;
    Ok(if normalized.is_empty() { text } else { normalized })
}

/// Runs the key normalizer over one string.
fn normalize_key(normalizer: &Sequence, text: &str) -> Result<String, EngramMapError> {
    let mut s = NormalizedString::from(text);
    normalizer.normalize(&mut s).map_err(|e| EngramMapError::Normalize(e.to_string()))?;
    Ok(s.get().to_string())
}

/// NFKC, NFD, strip accents, lowercase, collapse [ \t\r\n]+, protect a lone space, strip, unprotect.
fn key_normalizer() -> Result<Sequence, EngramMapError> {
    let err = |e: tokenizers::Error| EngramMapError::Normalize(e.to_string());
    let regex = |p: &str| tokenizers::normalizers::replace::ReplacePattern::Regex(p.to_string());
    let steps: Vec<NormalizerWrapper> = vec![
        NFKC.into(),
        NFD.into(),
        StripAccents.into(),
        Lowercase.into(),
        Replace::new(regex(r"[ \t\r\n]+"), " ").map_err(err)?.into(),
        Replace::new(regex(r"^ $"), SENTINEL).map_err(err)?.into(),
        Strip::new(true, true).into(),
        Replace::new(SENTINEL, " ").map_err(err)?.into(),
    ];
    Ok(Sequence::new(steps))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(s: &str) -> String {
        normalize_key(&key_normalizer().unwrap(), s).unwrap()
    }

    #[test]
    fn normalizer_folds_case_accents_width_and_whitespace() {
        assert_eq!(norm(" The"), "the");
        assert_eq!(norm("ÉCOLE"), "ecole");
        assert_eq!(norm("ｆｕｌｌ"), "full");
        assert_eq!(norm("\t\n  a \r\n b  "), "a b");
        assert_eq!(norm("İ"), "i");
        assert_eq!(norm("ǅ"), "dz");
    }

    #[test]
    fn normalizer_turns_whitespace_only_text_into_one_space_or_nothing() {
        assert_eq!(norm(" "), " ");
        assert_eq!(norm("\n"), " ");
        assert_eq!(norm("\t\t"), " ");
        assert_eq!(norm("\u{3000}"), " ");
        assert_eq!(norm(" \u{2028}"), "");
        assert_eq!(norm("\u{0301}"), "");
    }

    #[test]
    fn synthetic_map_is_id_mod_64() {
        let m = TokenMap::synthetic(129_280, 64);
        assert_eq!(m.classes, 64);
        assert_eq!(m.class(0), Some(0));
        assert_eq!(m.class(129_279), Some(129_279 % 64));
        assert_eq!(m.class(12_345), Some(12_345 % 64));
        assert_eq!(m.class(129_280), None);
    }

    #[test]
    fn class_count_check_rejects_a_mismatch() {
        let m = TokenMap::synthetic(1000, 64);
        assert!(m.check_classes(64).is_ok());
        assert!(matches!(m.check_classes(99_092), Err(EngramMapError::ClassCount { got: 64, .. })));
    }
}
