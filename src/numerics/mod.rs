//! Bit-exact numerics (design/numerics.md): formats, unfused products, software transcendentals, canonical sums.
pub mod edge;
pub mod formats;
pub mod math;
pub mod sum;

pub use formats::*;
