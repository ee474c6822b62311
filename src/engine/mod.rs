//! The engine: per-sequence state, the sampler, and the prefill/decode loop of one sequence.
pub mod generate;
pub mod sampler;

pub use generate::{GenerateError, GenerateOptions, Generation, Session};
pub use sampler::{Sampler, SamplerError, Sampling};
