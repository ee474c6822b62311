//! A checkpoint against its config: the expected tensor table, the release storage formats, and the one load call that validates both.
pub mod quantize;
pub mod tensor_table;

use crate::model::config::{Config, ConfigError};
use crate::weights::{Checkpoint, CheckpointError, LoadMode, TensorSpec, ValueCheck};
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

/// Tensors of the table a checkpoint may leave out whole and still serve text, as the official code builds them only for vision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Optional {
    /// The vision tower, the aligner and the image delimiter embeddings.
    VisionTower,
    /// Every MoE gate's `bias_vl`, the routing bias of image-span rows.
    BiasVl,
}

impl Optional {
    /// Both groups.
    pub const ALL: [Optional; 2] = [Optional::VisionTower, Optional::BiasVl];

    /// The group the tensor `name` belongs to, if any.
    pub fn of(name: &str) -> Option<Optional> {
        if name.ends_with(".ffn.gate.bias_vl") {
            Some(Optional::BiasVl)
        } else if name.starts_with("vision.") || name.starts_with("aligner.") || matches!(name, "image_start" | "image_end" | "image_newline") {
            Some(Optional::VisionTower)
        } else {
            None
        }
    }

    /// What the group is, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Optional::VisionTower => "vision tower (vision.*, aligner.*, image_start, image_end, image_newline)",
            Optional::BiasVl => "`ffn.gate.bias_vl` in its MoE gates (the routing bias of image rows)",
        }
    }
}

/// The optional groups `cfg`'s table has and `ck` holds none of.
pub fn absent_groups(cfg: &Config, ck: &Checkpoint) -> Vec<Optional> {
    let table = tensor_table::expected_tensors(cfg);
    let absent = |g: Optional| {
        let mut members = table.iter().filter(|s| Optional::of(&s.name) == Some(g)).peekable();
        members.peek().is_some() && members.all(|s| ck.get(&s.name).is_none())
    };
    Optional::ALL.into_iter().filter(|&g| absent(g)).collect()
}

/// `cfg`'s table less the optional groups `ck` leaves out whole; a group held in part still expects every member.
pub fn tensors_to_hold(cfg: &Config, ck: &Checkpoint) -> Vec<TensorSpec> {
    let absent = absent_groups(cfg, ck);
    let mut table = tensor_table::expected_tensors(cfg);
    table.retain(|s| Optional::of(&s.name).is_none_or(|g| !absent.contains(&g)));
    table
}

/// Why image input cannot be served from this checkpoint, naming what it lacks; `None` when it holds the whole vision path.
pub fn vision_missing(cfg: &Config, ck: &Checkpoint) -> Option<String> {
    if cfg.vision.is_none() {
        return Some("its config has no vision tower (no vision_config, or 0 vision layers)".into());
    }
    let absent = absent_groups(cfg, ck);
    if absent.is_empty() {
        return None;
    }
    Some(format!("the checkpoint has no {}", absent.iter().map(|g| g.describe()).collect::<Vec<_>>().join(" and no ")))
}

/// Opens, reads the config, validates layout and values and makes the values canonical (what changed is in `Checkpoint::canonical`): the one call a server makes.
pub fn load(dir: &Path, mode: LoadMode, values: ValueCheck) -> Result<(Config, Checkpoint), LoadError> {
    let cfg = Config::from_dir(dir)?;
    let mut ck = Checkpoint::open(dir, mode)?;
    ck.check_layout(&tensors_to_hold(&cfg, &ck))?;
    ck.check_values(values)?;
    Ok((cfg, ck))
}
