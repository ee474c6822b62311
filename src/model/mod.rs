//! The model: config, layer plan, per-sequence state, checkpoints against their config, the tiny generator, the forward graph and the f64 reference.
pub mod checkpoint;
pub mod config;
pub use config::preset;

pub mod forward;
pub mod plan;
pub mod reference;
pub mod rope;
pub mod state;
pub mod taps;
pub mod tiny;

pub use checkpoint::quantize;
pub use checkpoint::tensor_table::{expected_tensors, Quant, TensorSpec};
pub use checkpoint::{absent_groups, load, tensors_to_hold, vision_missing, LoadError, Optional};

pub use config::{Config, ConfigError, ScoringFunc, VisionConfig, Yarn};
pub use plan::{LayerMode, LayerPlan, RopeTable};
pub use state::{CompCache, DraftRings, LayerState, Mark, SeqState, StateError};
pub use tiny::{make_tiny, make_tiny_from_file, write_checkpoint, write_checkpoint_values, TinyError, TinySummary, Values};
pub use crate::weights::{Checkpoint, CheckpointError, Dtype, LoadMode, TensorView, ValueCheck};
