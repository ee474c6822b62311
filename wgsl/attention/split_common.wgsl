// Sparse attention split over keys (decode shapes): parameters shared by the three stages; key slots per row LK = window + max(topk, block).
override CONTROL: u32 = 0u;
struct Params { zero: u32, row0: u32, m: u32, heads: u32, dim: u32, start: u32, window: u32, topk: u32, scale: f32, block: u32 }
@group(0) @binding(0) var<uniform> P: Params;
const MAX_KEYS: u32 = 1024u;

fn key_slots() -> u32 { return P.window + max(P.topk, P.block); }
