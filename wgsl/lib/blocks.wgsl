// Block staging shared by kernels: a 32-value block filled from vec4 loads.

// Values 4i..4i+3 of block `v` from one vec4 load.
fn ls_put4(v: ptr<function, array<f32, 32>>, i: u32, t: vec4<f32>) {
    (*v)[4u * i] = t.x;
    (*v)[4u * i + 1u] = t.y;
    (*v)[4u * i + 2u] = t.z;
    (*v)[4u * i + 3u] = t.w;
}
