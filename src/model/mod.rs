//! The model: config, layer plan, checkpoints, the tiny checkpoint generator.
pub mod checkpoint;
pub mod config;
pub mod engram_layout;
pub mod forward;
pub mod plan;
pub mod progress;
pub mod quantize;
pub mod rope;
pub mod safetensors_header;
pub mod tensor_table;
pub mod preset;
pub mod tiny;
mod tiny_fill;
mod validate;

pub use checkpoint::{load, Checkpoint, CheckpointError, LoadMode, TensorView, ValueCheck};
pub use config::{Config, ConfigError, ScoringFunc, VisionConfig, Yarn};
pub use plan::{LayerMode, LayerPlan, RopeTable};
pub use safetensors_header::Dtype;
pub use tensor_table::{expected_tensors, Quant, TensorSpec};
pub use tiny::{make_tiny, make_tiny_from_file, write_checkpoint, TinyError, TinySummary};
pub mod taps;
pub mod reference;
