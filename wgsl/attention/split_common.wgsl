// Sparse attention split over keys (decode shapes): parameters shared by the three stages; key slots per row LK = window + max(topk, block).
override CONTROL: u32 = 0u;
struct Params { zero: u32, row0: u32, m: u32, heads: u32, dim: u32, start: u32, window: u32, topk: u32, scale: f32, block: u32 }
@group(0) @binding(0) var<uniform> P: Params;
const MAX_KEYS: u32 = 1024u;

fn key_slots() -> u32 { return P.window + max(P.topk, P.block); }

// Scratch rows count from the dispatch's first row (P.row0), so the host can run the rows in chunks over one scratch.
fn local_row(row: u32) -> u32 { return row - P.row0; }

// Where row `row`'s key count sits in nk; its heads' denominators follow it.
fn count_at(row: u32) -> u32 { return local_row(row) * (P.heads + 1u); }
