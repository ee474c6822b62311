//! Contract registrations of this op family's GPU kernels.
use crate::contract::Kernel;
use crate::gpu::Shader;

/// This family's registered kernels.
pub fn kernels() -> Vec<&'static dyn Kernel> {
    Vec::new()
}

/// This family's WGSL sources.
pub fn shaders() -> Vec<Shader> {
    Vec::new()
}
