//! Key lookup over a config's objects (`text_config` over the top level, `vision_config`, `rope_scaling`), remembering how the file spells each key so errors name it that way.
use super::ConfigError;
use serde_json::{Map, Value};
use std::cell::RefCell;

/// Where a key sits in the file: the nested object's path (`None` at the top level) and its name there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Spot {
    /// `text_config`, `vision_config`, `text_config.rope_scaling`, ...; `None` at the top level.
    pub section: Option<String>,
    /// The key's name inside that object.
    pub name: String,
}

/// How the file spells each key it holds, by the name validation uses (`hidden_size`, `vision_config.min_pixels`).
#[derive(Debug, Default)]
pub(crate) struct Spelling(RefCell<Vec<(String, Spot)>>);

impl Spelling {
    /// Records that `canonical` is spelled `spot` in the file.
    fn note(&self, canonical: &str, spot: &Spot) {
        let mut all = self.0.borrow_mut();
        match all.iter_mut().find(|(c, _)| c == canonical) {
            Some(entry) => entry.1 = spot.clone(),
            None => all.push((canonical.to_string(), spot.clone())),
        }
    }

    /// `e` with a key validation named by its HF name respelled as the file has it; other errors unchanged.
    pub fn respell(&self, e: ConfigError) -> ConfigError {
        match e {
            ConfigError::Invalid { section: None, key, problem } => {
                let all = self.0.borrow();
                match all.iter().find(|(c, _)| *c == key) {
                    Some((_, s)) => ConfigError::Invalid { section: s.section.clone(), key: s.name.clone(), problem },
                    None => ConfigError::Invalid { section: None, key, problem },
                }
            }
            other => other,
        }
    }
}

/// One looked-up value and where it was found.
pub(crate) type Found<'a> = Option<(Spot, &'a Value)>;

/// A group of objects searched in order for a key, first match wins.
pub(crate) struct Keys<'a> {
    scopes: Vec<(Option<String>, &'a Map<String, Value>)>,
    /// Prefix of the names validation uses for these keys (`rope_scaling.`, `vision_config.`).
    canon: &'static str,
    spelling: &'a Spelling,
}

impl<'a> Keys<'a> {
    /// Keys searched in `scopes` (path, object) in order; validation names them `canon` + the first alias.
    pub fn new(scopes: Vec<(Option<String>, &'a Map<String, Value>)>, canon: &'static str, spelling: &'a Spelling) -> Keys<'a> {
        Keys { scopes, canon, spelling }
    }

    /// The first of `names` present (non-null), scopes in order.
    pub fn find(&self, names: &[&str]) -> Found<'a> {
        let canonical = format!("{}{}", self.canon, names.first().copied().unwrap_or(""));
        self.find_as(&canonical, names)
    }

    /// [`Keys::find`], recorded under `canonical` (for keys whose flat and nested names differ).
    pub fn find_as(&self, canonical: &str, names: &[&str]) -> Found<'a> {
        for (section, scope) in &self.scopes {
            for &n in names {
                if let Some(v) = scope.get(n).filter(|v| !v.is_null()) {
                    let spot = Spot { section: section.clone(), name: n.to_string() };
                    self.spelling.note(canonical, &spot);
                    return Some((spot, v));
                }
            }
        }
        None
    }

    /// The error for required `names` none of which is present: named inside the first scope.
    pub fn missing(&self, names: &[&str]) -> ConfigError {
        match self.scopes.first().and_then(|s| s.0.clone()) {
            Some(section) => ConfigError::Missing { section: Some(section), key: names.first().copied().unwrap_or("").to_string() },
            None => ConfigError::Missing { section: None, key: names.join("` or `") },
        }
    }
}

/// A type error for the key at `spot`.
fn wrong(spot: Spot, expected: &'static str) -> ConfigError {
    ConfigError::Type { section: spot.section, key: spot.name, expected }
}

/// Converts a found value to usize.
pub(crate) fn to_usize(f: Found) -> Result<Option<usize>, ConfigError> {
    match f {
        None => Ok(None),
        Some((s, v)) => v.as_u64().and_then(|x| usize::try_from(x).ok()).map(Some).ok_or_else(|| wrong(s, "a non-negative integer")),
    }
}

/// Converts a found value to f64.
pub(crate) fn to_f64(f: Found) -> Result<Option<f64>, ConfigError> {
    match f {
        None => Ok(None),
        Some((s, v)) => v.as_f64().map(Some).ok_or_else(|| wrong(s, "a number")),
    }
}

/// Converts a found value to a list of usize.
pub(crate) fn to_list(f: Found) -> Result<Option<Vec<usize>>, ConfigError> {
    let Some((s, v)) = f else { return Ok(None) };
    let parse = |v: &Value| -> Option<Vec<usize>> { v.as_array()?.iter().map(|e| e.as_u64().and_then(|x| usize::try_from(x).ok())).collect() };
    parse(v).map(Some).ok_or_else(|| wrong(s, "a list of non-negative integers"))
}

/// Converts a found value to a string.
pub(crate) fn to_str(f: Found<'_>) -> Result<Option<&str>, ConfigError> {
    match f {
        None => Ok(None),
        Some((s, v)) => v.as_str().map(Some).ok_or_else(|| wrong(s, "a string")),
    }
}

/// Converts a found value to bool.
pub(crate) fn to_bool(f: Found) -> Result<Option<bool>, ConfigError> {
    match f {
        None => Ok(None),
        Some((s, v)) => v.as_bool().map(Some).ok_or_else(|| wrong(s, "true or false")),
    }
}

/// Converts a found value to a JSON object.
pub(crate) fn to_object<'a>(f: &Found<'a>) -> Result<Option<&'a Map<String, Value>>, ConfigError> {
    match f {
        None => Ok(None),
        Some((s, v)) => v.as_object().map(Some).ok_or_else(|| wrong(s.clone(), "an object")),
    }
}

/// A key path as written in a message: `section.key`, or `key` at the top level.
pub(crate) fn spelled(section: &Option<String>, key: &str) -> String {
    match section {
        Some(s) => format!("{s}.{key}"),
        None => key.to_string(),
    }
}
