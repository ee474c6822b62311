// The first weight scale byte of a dense GEMM's rows: the scale buffer's first.
fn ws_base() -> u32 { return 0u; }
