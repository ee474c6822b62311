// Weight words of a dense GEMM: the one weight buffer.
fn w_at(i: u32) -> vec4<u32> { return w[i]; }
