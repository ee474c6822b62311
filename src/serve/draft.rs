//! Prompt-lookup drafts: the tokens that followed the latest earlier occurrence of a stream's last few tokens (the DSpark head takes this place once it runs).

/// Longest and shortest suffix matched.
const LONGEST: usize = 4;
const SHORTEST: usize = 2;

/// Up to `max` tokens proposed to follow the history `prompt` then `reply`: after the most recent earlier match of its last 4, 3 or 2 tokens, longest first (nothing is copied).
pub fn lookup(prompt: &[u32], reply: &[u32], max: usize) -> Vec<u32> {
    let n = prompt.len() + reply.len();
    if max == 0 {
        return Vec::new();
    }
    let at = |i: usize| if i < prompt.len() { prompt[i] } else { reply[i - prompt.len()] };
    for len in (SHORTEST..=LONGEST.min(n.saturating_sub(1))).rev() {
        if let Some(start) = (0..n - len).rev().find(|&s| (0..len).all(|d| at(s + d) == at(n - len + d))) {
            let from = start + len;
            return (from..(from + max).min(n)).map(at).collect();
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_longest_match_proposes_what_followed_it() {
        assert_eq!(lookup(&[1, 2, 3, 9, 1, 2, 3, 7, 8], &[1, 2, 3], 3), vec![7, 8, 1]);
        assert_eq!(lookup(&[1, 2, 3, 9, 1, 2, 3, 7, 8, 1, 2, 3], &[], 3), vec![7, 8, 1]);
        assert_eq!(lookup(&[5, 6], &[1, 2, 4, 1, 2], 5), vec![4, 1, 2]);
        assert_eq!(lookup(&[1, 2, 3, 4], &[], 3), Vec::<u32>::new());
        assert_eq!(lookup(&[7], &[7, 7], 2), vec![7]);
        assert_eq!(lookup(&[1, 2, 1, 2], &[], 0), Vec::<u32>::new());
        assert_eq!(lookup(&[], &[], 4), Vec::<u32>::new());
    }
}
