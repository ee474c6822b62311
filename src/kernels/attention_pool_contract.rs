//! Contract registrations of compressor pooling and row copies.
use crate::contract::Kernel;
use crate::gpu::Shader;

/// Pooling and copy kernels.
pub fn kernels() -> Vec<&'static dyn Kernel> {
    Vec::new()
}

/// Pooling and copy WGSL sources.
pub fn shaders() -> Vec<Shader> {
    Vec::new()
}
