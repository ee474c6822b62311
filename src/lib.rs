//! lockstep: DeepSeek-V4.1-Flash inference whose every op gives the same bits on every device.
//!
//! Layers, each importing only from the ones above it in this list: testing, numerics, gpu, contract, kernels, weights, exec, text, vision, model, engine, serve, api, fuzz, cli.
pub mod testing;
pub mod numerics;
pub mod gpu;
pub mod contract;
pub mod kernels;
pub mod weights;
pub mod exec;
pub mod text;
pub mod vision;
pub mod model;
pub mod engine;
pub mod serve;
pub mod api;
pub mod fuzz;
pub mod cli;
