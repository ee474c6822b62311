//! Mutators: byte-level edits, dictionary insertions, splices, number swaps, and edits of the JSON tree after an input's first line.
use serde_json::Value;

/// A seeded generator (splitmix64): the same seed gives the same run.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    /// True with probability 1/`n`.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

const BYTES: &[u8] = &[0, 1, 0x7f, 0x80, 0xff, b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', b'\n', b'\r', b' ', b'<', b'>', b'/', b'0', b'-', b'e', b'.'];
const NUMBERS: &[&str] = &["0", "-1", "1", "2", "3", "7", "255", "256", "65535", "65536", "2147483647", "4294967296", "9223372036854775807", "18446744073709551616", "-9223372036854775808", "1e308", "1e-320", "0.5", "-0", "NaN", "99999999999999999999999"];
const CHARS: &[&str] = &["é", "中", "｜", "▁", "\u{200b}", "\u{fffd}", "😀", "𝔘", "\u{0}", "\u{7f}", "\u{2028}", "\u{3000}", "\r\n", "\t"];

/// Mutates `input` in place with one to four edits; `corpus` feeds splices, `dict` insertions, `json` the tree edits.
pub fn mutate(rng: &mut Rng, input: &mut Vec<u8>, corpus: &[Vec<u8>], dict: &[Vec<u8>], json: bool) {
    let edits = 1 + rng.below(4);
    for _ in 0..edits {
        if json && rng.one_in(2) && mutate_json(rng, input, corpus, dict) {
            continue;
        }
        mutate_bytes(rng, input, corpus, dict);
    }
    input.truncate(1 << 20);
}

fn mutate_bytes(rng: &mut Rng, b: &mut Vec<u8>, corpus: &[Vec<u8>], dict: &[Vec<u8>]) {
    let len = b.len();
    match rng.below(11) {
        0 if len > 0 => {
            let i = rng.below(len);
            b[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            b[i] = BYTES[rng.below(BYTES.len())];
        }
        2 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(16));
            b.drain(at..at + n);
        }
        3 if len > 0 => {
            let at = rng.below(len);
            let n = 1 + rng.below((len - at).min(64));
            let piece = b[at..at + n].to_vec();
            let to = rng.below(len + 1);
            b.splice(to..to, piece);
        }
        4 | 5 if !dict.is_empty() => {
            let w = &dict[rng.below(dict.len())];
            let to = rng.below(len + 1);
            if rng.one_in(2) && len > 0 {
                let end = (to + rng.below(8)).min(len);
                b.splice(to..end, w.iter().copied());
            } else {
                b.splice(to..to, w.iter().copied());
            }
        }
        6 if !corpus.is_empty() => {
            let other = &corpus[rng.below(corpus.len())];
            let cut = rng.below(len + 1);
            let from = rng.below(other.len() + 1);
            b.truncate(cut);
            b.extend_from_slice(&other[from..]);
        }
        7 => {
            if let Some((s, e)) = number_at(b, rng) {
                let n = NUMBERS[rng.below(NUMBERS.len())];
                b.splice(s..e, n.bytes());
            }
        }
        8 => {
            let c = CHARS[rng.below(CHARS.len())];
            let to = char_boundary(b, rng.below(len + 1));
            b.splice(to..to, c.bytes());
        }
        9 => {
            let n = 1 + rng.below(8);
            let to = rng.below(len + 1);
            let fresh: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            b.splice(to..to, fresh);
        }
        _ if len > 1 => {
            let (i, j) = (rng.below(len), rng.below(len));
            b.swap(i, j);
        }
        _ => b.push(BYTES[rng.below(BYTES.len())]),
    }
}

/// The start of the UTF-8 character at or after `at` (so a char insertion keeps the rest valid).
fn char_boundary(b: &[u8], mut at: usize) -> usize {
    while at < b.len() && (b[at] & 0xc0) == 0x80 {
        at += 1;
    }
    at
}

/// A run of ASCII digits (with a leading minus) somewhere in `b`.
fn number_at(b: &[u8], rng: &mut Rng) -> Option<(usize, usize)> {
    let starts: Vec<usize> = (0..b.len()).filter(|&i| b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit())).collect();
    let &s = starts.get(rng.below(starts.len().max(1)))?;
    let e = (s..b.len()).find(|&i| !b[i].is_ascii_digit() && b[i] != b'.' && b[i] != b'e').unwrap_or(b.len());
    let s = if s > 0 && b[s - 1] == b'-' { s - 1 } else { s };
    Some((s, e))
}

/// Edits the JSON after the first line; false when that is not JSON.
fn mutate_json(rng: &mut Rng, input: &mut Vec<u8>, corpus: &[Vec<u8>], dict: &[Vec<u8>]) -> bool {
    let (head, body) = super::split_line(input);
    let Ok(mut v) = serde_json::from_slice::<Value>(body) else { return false };
    let donor = corpus.get(rng.below(corpus.len().max(1))).and_then(|c| serde_json::from_slice::<Value>(super::split_line(c).1).ok());
    let count = nodes(&v);
    let target = rng.below(count);
    let mut seen = 0;
    edit(rng, &mut v, target, &mut seen, donor.as_ref(), dict);
    let text = if rng.one_in(4) { serde_json::to_vec_pretty(&v) } else { serde_json::to_vec(&v) };
    let Ok(text) = text else { return false };
    let mut out = head.to_vec();
    out.push(b'\n');
    out.extend(text);
    *input = out;
    true
}

fn nodes(v: &Value) -> usize {
    1 + match v {
        Value::Array(a) => a.iter().map(nodes).sum(),
        Value::Object(o) => o.values().map(nodes).sum(),
        _ => 0,
    }
}

/// A random subtree of `v`.
fn pick<'a>(rng: &mut Rng, v: &'a Value) -> &'a Value {
    let target = rng.below(nodes(v));
    fn walk<'a>(v: &'a Value, target: usize, seen: &mut usize) -> Option<&'a Value> {
        if *seen == target {
            return Some(v);
        }
        *seen += 1;
        match v {
            Value::Array(a) => a.iter().find_map(|c| walk(c, target, seen)),
            Value::Object(o) => o.values().find_map(|c| walk(c, target, seen)),
            _ => None,
        }
    }
    walk(v, target, &mut 0).unwrap_or(v)
}

fn scalar(rng: &mut Rng, dict: &[Vec<u8>]) -> Value {
    match rng.below(7) {
        0 => Value::Null,
        1 => Value::Bool(rng.one_in(2)),
        2 => serde_json::from_str(NUMBERS[rng.below(NUMBERS.len())]).unwrap_or(Value::Null),
        3 => Value::String(String::new()),
        4 => Value::Array(Vec::new()),
        5 => Value::Object(Default::default()),
        _ => dict.get(rng.below(dict.len().max(1))).map(|w| Value::String(String::from_utf8_lossy(w).into_owned())).unwrap_or(Value::Null),
    }
}

/// Applies one edit at the `target`-th node in preorder.
fn edit(rng: &mut Rng, v: &mut Value, target: usize, seen: &mut usize, donor: Option<&Value>, dict: &[Vec<u8>]) -> bool {
    if *seen == target {
        match rng.below(6) {
            0 => *v = scalar(rng, dict),
            1 => {
                if let Some(d) = donor {
                    *v = pick(rng, d).clone();
                }
            }
            2 => match v {
                Value::Array(a) if !a.is_empty() => {
                    let i = rng.below(a.len());
                    if rng.one_in(2) {
                        a.remove(i);
                    } else {
                        let c = a[i].clone();
                        a.insert(i, c);
                    }
                }
                Value::Object(o) if !o.is_empty() => {
                    let k = o.keys().nth(rng.below(o.len())).cloned().unwrap_or_default();
                    o.remove(&k);
                }
                _ => *v = Value::Array(vec![v.clone()]),
            },
            3 => {
                if let Value::Object(o) = v {
                    let key = dict.get(rng.below(dict.len().max(1))).map(|w| String::from_utf8_lossy(w).into_owned()).unwrap_or_else(|| "x".into());
                    let val = match (rng.one_in(2), donor) {
                        (true, Some(d)) => pick(rng, d).clone(),
                        _ => scalar(rng, dict),
                    };
                    o.insert(key, val);
                } else if let Value::Array(a) = v {
                    let val = scalar(rng, dict);
                    a.push(val);
                }
            }
            4 => {
                if let Value::String(s) = v {
                    let mut b = std::mem::take(s).into_bytes();
                    mutate_bytes(rng, &mut b, &[], dict);
                    *s = String::from_utf8_lossy(&b).into_owned();
                }
            }
            _ => {
                if let Value::Number(n) = v {
                    let f = n.as_f64().unwrap_or(0.0);
                    let g = [f + 1.0, f - 1.0, f * 2.0, -f, f / 2.0][rng.below(5)];
                    *v = serde_json::Number::from_f64(g).map(Value::Number).unwrap_or(Value::Null);
                    if g.fract() == 0.0 && g.abs() < 9e15 {
                        *v = Value::from(g as i64);
                    }
                } else {
                    *v = scalar(rng, dict);
                }
            }
        }
        return true;
    }
    *seen += 1;
    match v {
        Value::Array(a) => a.iter_mut().any(|c| edit(rng, c, target, seen, donor, dict)),
        Value::Object(o) => o.values_mut().any(|c| edit(rng, c, target, seen, donor, dict)),
        _ => false,
    }
}
