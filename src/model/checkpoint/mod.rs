//! A checkpoint against its config: the expected tensor table, the release storage formats, and the one load call that validates both.
pub mod quantize;
pub mod tensor_table;

use crate::model::config::{Config, ConfigError};
use crate::weights::{Checkpoint, CheckpointError, LoadMode, ValueCheck};
use std::path::Path;

/// Why a checkpoint directory cannot be served: its config or its tensors.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The config is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The tensors are unusable (names the file or tensor).
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}

/// Opens, reads the config, validates layout and values and makes the values canonical (what changed is in `Checkpoint::canonical`): the one call a server makes.
pub fn load(dir: &Path, mode: LoadMode, values: ValueCheck) -> Result<(Config, Checkpoint), LoadError> {
    let cfg = Config::from_dir(dir)?;
    let mut ck = Checkpoint::open(dir, mode)?;
    ck.check_layout(&tensor_table::expected_tensors(&cfg))?;
    ck.check_values(values)?;
    Ok((cfg, ck))
}
