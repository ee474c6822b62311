//! lockstep: DeepSeek-V4.1-Flash inference whose every op gives the same bits on every device.
pub mod contract;
pub mod gpu;
pub mod kernels;
pub mod model;
pub mod numerics;
pub mod text;
pub mod bench;
pub mod bench_counted;
pub mod bench_forward;
pub mod exec;
pub mod engine;
pub use model::forward;
pub mod cli_run;
pub mod cli_diff;
