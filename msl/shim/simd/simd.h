// Metal's simd header: nothing lockstep's MSL needs beyond <metal_stdlib>.
