//! A prompt's positions as round input: text ids, and the image spans placed over them.
use super::rounds::{ImageId, Span};

/// An image's span in a prompt: the engine image and the positions `at..at + len` it fills.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The image in the engine.
    pub image: ImageId,
    /// The span's first position.
    pub at: usize,
    /// Its positions.
    pub len: usize,
}

/// The spans of prompt positions `lo..hi`: text between images, and the part of each image's span they cover (`images` sorted, not overlapping).
pub fn chunk_spans<'a>(prompt: &'a [u32], images: &[Placed], lo: usize, hi: usize) -> Vec<Span<'a>> {
    let mut out = Vec::new();
    let mut at = lo;
    for p in images {
        let end = p.at + p.len;
        if end <= at || p.at >= hi {
            continue;
        }
        if at < p.at {
            out.push(Span::Tokens(&prompt[at..p.at]));
            at = p.at;
        }
        let to = end.min(hi);
        out.push(Span::Image { image: p.image, from: at - p.at, len: to - at });
        at = to;
    }
    if at < hi {
        out.push(Span::Tokens(&prompt[at..hi]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The positions the spans cover, in order: a text id (the prompt is 0..n) or an image and its offset.
    fn covered(spans: &[Span<'_>]) -> Vec<(Option<ImageId>, usize)> {
        let mut out = Vec::new();
        for s in spans {
            match *s {
                Span::Tokens(t) => out.extend(t.iter().map(|&x| (None, x as usize))),
                Span::Image { image, from, len } => out.extend((from..from + len).map(|j| (Some(image), j))),
            }
        }
        out
    }

    #[test]
    fn chunks_of_any_cut_cover_each_position_once_with_its_span_offset() {
        let prompt: Vec<u32> = (0..40).collect();
        let images = [Placed { image: ImageId::test(0), at: 5, len: 7 }, Placed { image: ImageId::test(1), at: 12, len: 9 }, Placed { image: ImageId::test(2), at: 30, len: 10 }];
        let want: Vec<(Option<ImageId>, usize)> = (0..40)
            .map(|p| match images.iter().find(|i| (i.at..i.at + i.len).contains(&p)) {
                Some(i) => (Some(i.image), p - i.at),
                None => (None, p),
            })
            .collect();
        for chunk in 1..=41 {
            let mut got = Vec::new();
            let mut lo = 0;
            while lo < 40 {
                let hi = (lo + chunk).min(40);
                let spans = chunk_spans(&prompt, &images, lo, hi);
                assert!(spans.iter().all(|s| !matches!(s, Span::Tokens(t) if t.is_empty()) && !matches!(s, Span::Image { len: 0, .. })), "no empty span");
                got.extend(covered(&spans));
                lo = hi;
            }
            assert_eq!(got, want, "chunk {chunk}");
        }
    }
}
