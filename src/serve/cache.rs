//! The prompt cache: snapshots of sequence state keyed by their exact prefix (a trie over token ids and image positions), kept within a byte budget by least-recent use.
use super::job::JobImage;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// Set in every image position's key element and in no text token's.
pub const IMAGE_BIT: u64 = 1 << 63;

/// A prompt's cache key: text ids as they are; each image-span position the sha256 of its image's key and its offset, top bit set.
pub fn prompt_key(prompt: &[u32], images: &[JobImage]) -> Vec<u64> {
    let mut key: Vec<u64> = prompt.iter().map(|&t| u64::from(t)).collect();
    for img in images {
        for j in 0..img.len {
            if let Some(slot) = key.get_mut(img.at + j) {
                let mut h = Sha256::new();
                h.update(img.key);
                h.update((j as u64).to_le_bytes());
                let d = h.finalize();
                *slot = IMAGE_BIT | u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]]);
            }
        }
    }
    key
}

/// One cached snapshot.
pub struct Entry<S> {
    /// The token prefix the state has consumed.
    pub key: Vec<u64>,
    /// The state (a sequence of the engine, owned by the cache).
    pub seq: S,
    /// The logits of the prefix's last token.
    pub logits: Vec<f32>,
    /// Bytes the entry holds (state and logits).
    pub bytes: usize,
    used: u64,
}

#[derive(Default)]
struct Node {
    children: HashMap<u64, usize>,
    entry: Option<usize>,
    parent: Option<(usize, u64)>,
}

/// A budgeted trie of snapshots.
pub struct PromptCache<S> {
    budget: usize,
    nodes: Vec<Node>,
    free_nodes: Vec<usize>,
    entries: Vec<Option<Entry<S>>>,
    node_of: Vec<usize>,
    bytes: usize,
    clock: u64,
}

impl<S> PromptCache<S> {
    /// An empty cache of `budget` bytes (0 keeps nothing).
    pub fn new(budget: usize) -> Self {
        PromptCache { budget, nodes: vec![Node::default()], free_nodes: Vec::new(), entries: Vec::new(), node_of: Vec::new(), bytes: 0, clock: 0 }
    }

    /// The budget in bytes.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Bytes held now (never above the budget).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.entries.iter().flatten().count()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry of the longest cached prefix of `tokens` (at most `tokens.len()` long), marked as used.
    pub fn longest_prefix(&mut self, tokens: &[u64]) -> Option<&Entry<S>> {
        self.longest_prefix_where(tokens, |_| true)
    }

    /// The entry of the longest cached prefix of `tokens` whose length `ok` accepts, marked as used.
    pub fn longest_prefix_where(&mut self, tokens: &[u64], ok: impl Fn(usize) -> bool) -> Option<&Entry<S>> {
        let mut node = 0;
        let mut best = self.nodes[0].entry.filter(|_| ok(0));
        for (i, t) in tokens.iter().enumerate() {
            match self.nodes[node].children.get(t) {
                Some(&n) => node = n,
                None => break,
            }
            if let Some(e) = self.nodes[node].entry.filter(|_| ok(i + 1)) {
                best = Some(e);
            }
        }
        let e = best?;
        self.clock += 1;
        let entry = self.entries[e].as_mut()?;
        entry.used = self.clock;
        Some(entry)
    }

    /// Whether `key` is cached exactly.
    pub fn contains(&self, key: &[u64]) -> bool {
        self.find(key).and_then(|n| self.nodes[n].entry).is_some()
    }

    fn find(&self, key: &[u64]) -> Option<usize> {
        let mut node = 0;
        for t in key {
            node = *self.nodes[node].children.get(t)?;
        }
        Some(node)
    }

    /// Whether an entry of `bytes` can be kept at all.
    pub fn fits(&self, bytes: usize) -> bool {
        bytes <= self.budget
    }

    /// Inserts a snapshot, evicting least-recently-used entries to stay within budget; returns the evicted (and a refused) snapshots for the caller to free.
    pub fn insert(&mut self, key: Vec<u64>, seq: S, logits: Vec<f32>, bytes: usize) -> Vec<S> {
        let mut out = Vec::new();
        if !self.fits(bytes) {
            out.push(seq);
            return out;
        }
        if let Some(old) = self.remove_key(&key) {
            out.push(old);
        }
        while self.bytes + bytes > self.budget {
            match self.lru() {
                Some(e) => out.extend(self.remove_entry(e)),
                None => break,
            }
        }
        let mut node = 0;
        for &t in &key {
            node = match self.nodes[node].children.get(&t) {
                Some(&n) => n,
                None => {
                    let fresh = Node { parent: Some((node, t)), ..Node::default() };
                    let n = match self.free_nodes.pop() {
                        Some(n) => {
                            self.nodes[n] = fresh;
                            n
                        }
                        None => {
                            self.nodes.push(fresh);
                            self.nodes.len() - 1
                        }
                    };
                    self.nodes[node].children.insert(t, n);
                    n
                }
            };
        }
        self.clock += 1;
        let slot = self.entries.iter().position(Option::is_none).unwrap_or(self.entries.len());
        let entry = Entry { key, seq, logits, bytes, used: self.clock };
        if slot == self.entries.len() {
            self.entries.push(Some(entry));
            self.node_of.push(node);
        } else {
            self.entries[slot] = Some(entry);
            self.node_of[slot] = node;
        }
        self.nodes[node].entry = Some(slot);
        self.bytes += bytes;
        out
    }

    fn lru(&self) -> Option<usize> {
        self.entries.iter().enumerate().filter_map(|(i, e)| e.as_ref().map(|e| (e.used, i))).min().map(|(_, i)| i)
    }

    fn remove_key(&mut self, key: &[u64]) -> Option<S> {
        let node = self.find(key)?;
        let e = self.nodes[node].entry?;
        self.remove_entry(e)
    }

    fn remove_entry(&mut self, e: usize) -> Option<S> {
        let entry = self.entries[e].take()?;
        self.bytes -= entry.bytes;
        let mut node = self.node_of[e];
        self.nodes[node].entry = None;
        // prune the branch that now leads to no entry
        while node != 0 && self.nodes[node].entry.is_none() && self.nodes[node].children.is_empty() {
            let Some((parent, t)) = self.nodes[node].parent else { break };
            self.nodes[parent].children.remove(&t);
            self.free_nodes.push(node);
            node = parent;
        }
        Some(entry.seq)
    }

    /// Removes every entry; returns their snapshots.
    pub fn clear(&mut self) -> Vec<S> {
        let all: Vec<usize> = (0..self.entries.len()).filter(|&i| self.entries[i].is_some()).collect();
        all.into_iter().filter_map(|e| self.remove_entry(e)).collect()
    }

    /// Every entry, in no particular order.
    pub fn entries(&self) -> impl Iterator<Item = &Entry<S>> {
        self.entries.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(at: usize, len: usize, tag: u8) -> JobImage {
        JobImage { at, len, grid_h: 1, grid_w: 1, llm_h: 1, llm_w: len - 3, patches: vec![0.0], key: [tag; 32] }
    }

    #[test]
    fn image_positions_key_by_identity_and_offset_and_never_equal_a_token() {
        let prompt: Vec<u32> = vec![0, 1, 129_264, 129_264, 129_264, 129_264, 7];
        let a = prompt_key(&prompt, &[image(2, 4, 1)]);
        assert_eq!(a, prompt_key(&prompt, &[image(2, 4, 1)]));
        assert_eq!((&a[..2], a[6]), (&[0u64, 1][..], 7));
        assert!(a[2..6].iter().all(|&k| k & IMAGE_BIT != 0 && k > u64::from(u32::MAX)));
        let distinct: std::collections::HashSet<u64> = a[2..6].iter().copied().collect();
        assert_eq!(distinct.len(), 4, "each offset its own element");
        let b = prompt_key(&prompt, &[image(2, 4, 2)]);
        assert!((2..6).all(|i| a[i] != b[i]), "another image differs at every span position");
        let mut cache = PromptCache::new(100);
        cache.insert(a.clone(), "a", vec![], 1);
        assert!(cache.longest_prefix(&b).is_none());
        assert_eq!(cache.longest_prefix(&a).map(|e| e.seq), Some("a"));
        cache.insert(a[..4].to_vec(), "inside", vec![], 1);
        assert_eq!(cache.longest_prefix_where(&a[..5], |n| n <= 2 || n >= 6).map(|e| e.seq), None, "no prefix ending inside the span");
    }

    #[test]
    fn the_longest_prefix_wins_and_the_budget_holds_by_evicting_the_least_recent() {
        let mut c = PromptCache::new(100);
        assert!(c.insert(vec![1, 2, 3], "a", vec![], 40).is_empty());
        assert!(c.insert(vec![1, 2], "b", vec![], 40).is_empty());
        assert_eq!(c.longest_prefix(&[1, 2, 3, 4]).map(|e| e.seq), Some("a"));
        assert_eq!(c.longest_prefix(&[1, 2, 9]).map(|e| e.seq), Some("b"));
        assert!(c.longest_prefix(&[2]).is_none());
        // "a" was used before "b": it goes first
        assert_eq!(c.insert(vec![7], "c", vec![], 40), vec!["a"]);
        assert!(c.bytes() <= c.budget());
        assert_eq!(c.insert(vec![8], "huge", vec![], 101), vec!["huge"]);
        assert_eq!(c.insert(vec![1, 2], "b2", vec![], 10), vec!["b"]);
        assert_eq!(c.len(), 2);
        assert_eq!(c.bytes(), 50);
        let mut all = c.clear();
        all.sort();
        assert_eq!(all, vec!["b2", "c"]);
        assert_eq!((c.bytes(), c.len(), c.nodes.len() - c.free_nodes.len()), (0, 0, 1));
    }
}
