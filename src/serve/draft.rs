//! Prompt-lookup drafts: the tokens that followed the latest earlier occurrence of a stream's last few tokens (the DSpark head takes this place once it runs).

/// Longest and shortest suffix matched.
const LONGEST: usize = 4;
const SHORTEST: usize = 2;

/// Up to `max` tokens proposed to follow `history`: after the most recent earlier match of its last 4, 3 or 2 tokens, longest first.
pub fn lookup(history: &[u32], max: usize) -> Vec<u32> {
    let n = history.len();
    if max == 0 {
        return Vec::new();
    }
    for len in (SHORTEST..=LONGEST.min(n.saturating_sub(1))).rev() {
        let tail = &history[n - len..];
        if let Some(start) = (0..n - len).rev().find(|&s| &history[s..s + len] == tail) {
            let from = start + len;
            return history[from..(from + max).min(n)].to_vec();
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_longest_match_proposes_what_followed_it() {
        assert_eq!(lookup(&[1, 2, 3, 9, 1, 2, 3, 7, 8, 1, 2, 3], 3), vec![7, 8, 1]);
        assert_eq!(lookup(&[5, 6, 1, 2, 4, 1, 2], 5), vec![4, 1, 2]);
        assert_eq!(lookup(&[1, 2, 3, 4], 3), Vec::<u32>::new());
        assert_eq!(lookup(&[7, 7, 7], 2), vec![7]);
        assert_eq!(lookup(&[1, 2, 1, 2], 0), Vec::<u32>::new());
        assert_eq!(lookup(&[], 4), Vec::<u32>::new());
    }
}
