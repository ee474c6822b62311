//! The layer plan: each backbone layer's and DSpark stage's role (spec 1.4), derived once from the config.
use crate::model::config::Config;
pub use crate::model::rope::RopeTable;

/// How a layer obtains its compressed KV and its top-k.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerMode {
    /// Ratio 0: sliding window only.
    Window,
    /// KV source: own compressor (and index keys) and own indexer.
    Full,
    /// Reads compressed KV and top-k published by earlier layers.
    Reuse,
    /// Own indexer (`wq_b`, `weights_proj`) scoring the KV source's keys.
    Reindex,
}

/// The role of one layer, backbone or DSpark stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerPlan {
    /// Layer id in one namespace: backbone `0..n_layers`, DSpark stages after.
    pub layer_id: usize,
    /// DSpark stage index (`mtp.S`), `None` for backbone layers.
    pub dspark_stage: Option<usize>,
    /// KV compression ratio (0 = window only).
    pub ratio: usize,
    /// Window, Full, Reuse or Reindex.
    pub mode: LayerMode,
    /// Layer whose compressed KV and index keys this layer reads.
    pub kv_source: Option<usize>,
    /// Layer whose top-k this layer uses (itself for Full and Reindex).
    pub index_source: Option<usize>,
    /// Whether this layer publishes candidate blocks.
    pub candidate_source: bool,
    /// Whether this layer's indexer masks scores by the candidate blocks.
    pub candidate_mask: bool,
    /// Whether the compressor has a gate (`compressor.wgate`, KV sources with ratio > 1).
    pub has_wgate: bool,
    /// Position in `engram_layer_ids` when this layer has an engram.
    pub engram: Option<usize>,
    /// Position in `dspark_target_layer_ids` when this layer's input feeds DSpark.
    pub dspark_target: Option<usize>,
    /// RoPE table of q, kv, compressed rows and indexer.
    pub rope: RopeTable,
    /// Routed experts of this layer's MoE.
    pub n_routed_experts: usize,
    /// Experts per token of this layer's MoE.
    pub num_experts_per_tok: usize,
}

impl LayerPlan {
    /// Checkpoint prefix: `layers.L` or `mtp.S`.
    pub fn prefix(&self) -> String {
        match self.dspark_stage {
            Some(s) => format!("mtp.{s}"),
            None => format!("layers.{}", self.layer_id),
        }
    }

    /// Whether this layer owns a compressor and index keys.
    pub fn is_kv_source(&self) -> bool {
        self.mode == LayerMode::Full
    }

    /// Whether this layer runs its own indexer.
    pub fn is_index_source(&self) -> bool {
        matches!(self.mode, LayerMode::Full | LayerMode::Reindex)
    }
}

impl Config {
    /// The plan of every layer, backbone then DSpark stages, indexed by layer id (the config must be valid).
    pub fn layer_plan(&self) -> Vec<LayerPlan> {
        let n = self.num_hidden_layers;
        (0..self.total_layers())
            .map(|l| {
                let ratio = self.compress_ratios.get(l).copied().unwrap_or(0);
                let backbone = l < n;
                let is_kv = backbone && self.kv_source_layer_ids.contains(&l);
                let is_index = backbone && self.index_source_layer_ids.contains(&l);
                let mode = match (ratio, is_kv, is_index) {
                    (0, _, _) => LayerMode::Window,
                    (_, true, _) => LayerMode::Full,
                    (_, false, true) => LayerMode::Reindex,
                    _ => LayerMode::Reuse,
                };
                let compressed = ratio > 0 && backbone;
                let candidate_source = backbone && self.candidate_source_layer_id == Some(l);
                let after_candidates = self.candidate_source_layer_id.is_some_and(|c| c < l);
                let (n_routed_experts, num_experts_per_tok) = self.moe_shape(l);
                LayerPlan {
                    layer_id: l,
                    dspark_stage: (!backbone).then(|| l - n),
                    ratio,
                    mode,
                    kv_source: compressed.then(|| Config::nearest_at_or_before(&self.kv_source_layer_ids, l)).flatten(),
                    index_source: compressed.then(|| Config::nearest_at_or_before(&self.index_source_layer_ids, l)).flatten(),
                    candidate_source,
                    candidate_mask: is_index && after_candidates,
                    has_wgate: is_kv && ratio > 1,
                    engram: backbone.then(|| self.engram_layer_ids.iter().position(|&e| e == l)).flatten(),
                    dspark_target: backbone.then(|| self.dspark_target_layer_ids.iter().position(|&t| t == l)).flatten(),
                    rope: if ratio > 0 { RopeTable::Compress } else { RopeTable::Main },
                    n_routed_experts,
                    num_experts_per_tok,
                }
            })
            .collect()
    }
}
