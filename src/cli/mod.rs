//! The command line's work behind `src/main.rs`: run, serve, diff, make-tiny, and the kernel and forward benchmarks.
pub mod bench_counted;
pub mod bench_forward;
pub mod bench_kernels;
pub mod bench_vision;
pub mod diff;
pub mod fuzz;
mod image;
pub mod inspect;
pub mod msl;
pub mod run;
pub mod serve;
