//! The mHC family's registrations: the mixes, collapse and expand.
use crate::contract::Kernel;
use crate::kernels::hc::{mixes_contract, stream_contract};

static STREAM_KERNELS: [stream_contract::StreamKernel; 2] = [stream_contract::StreamKernel { expand: false }, stream_contract::StreamKernel { expand: true }];
static MIXES: mixes_contract::MixesKernel = mixes_contract::MixesKernel;

/// This family's registered kernels.
pub fn kernels() -> Vec<&'static dyn Kernel> {
    let mut k: Vec<&'static dyn Kernel> = vec![&MIXES];
    k.extend(STREAM_KERNELS.iter().map(|s| s as &dyn Kernel));
    k
}

