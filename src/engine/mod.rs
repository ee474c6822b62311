//! The engine: one executor over many sequences and their rounds, the sampler, and the prefill/decode loop of one sequence.
pub mod generate;
pub mod rounds;
pub mod sampler;
pub mod spans;

pub use generate::{GenerateError, GenerateOptions, Generation, Session};
pub use rounds::{Engine, EngineError, ImageId, SeqId, Span, Work};
pub use sampler::{logprobs, Filters, Sampler, SamplerError, Sampling};
pub use spans::{chunk_spans, Placed};
