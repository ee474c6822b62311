//! The reference forward (spec 2.2-2.7 with the state of spec 6): engram, single-pass mHC blocks, attention, MoE, final collapse and head, with taps and teacher forcing.
use super::attention::Attention;
use super::index::{candidate_blocks, comp_row, index_query, index_scores, select_topk};
use super::mhc::{collapse, expand_raw, mixes, rms_norm_raw, Mixes};
use super::quant::bf16;
use super::{Layer, Model, ReferenceError, State};
use crate::model::taps::{Tap, Taps};

/// Teacher forcing: after each stage is recorded, the oracle's tap of the same name replaces it downstream.
#[derive(Debug, Clone, Default)]
pub struct Forcing {
    /// The oracle's taps of this call (rows = this call's tokens).
    pub oracle: Taps<f64>,
    /// The reference's values before each stage's last bf16 rounding or quantization, by tap name.
    pub raw: Taps<f64>,
    /// Stages the oracle lacks or records with another shape (the reference's own value went on).
    pub missing: Vec<String>,
}

/// Records stages and applies forcing.
pub(super) struct Rec<'a> {
    pub taps: &'a mut Taps<f64>,
    pub force: Option<&'a mut Forcing>,
}

impl Rec<'_> {
    /// The oracle's tap `name` when forcing and recorded.
    pub fn forced(&self, name: &str) -> Option<&Tap<f64>> {
        self.force.as_deref().and_then(|f| f.oracle.get(name))
    }

    /// Records `value` (`cols` wide) under `name` and returns what flows on: the oracle's value when forcing, else `value`.
    pub fn stage(&mut self, name: String, cols: usize, value: Vec<f64>, raw: Option<Vec<f64>>) -> Vec<f64> {
        let rows = if cols == 0 { 0 } else { value.len() / cols };
        self.taps.record(name.clone(), rows, cols, &value);
        let Some(f) = self.force.as_deref_mut() else { return value };
        if let Some(data) = raw {
            f.raw.list.push(Tap { name: name.clone(), rows, cols, data });
        }
        match f.oracle.get(&name) {
            Some(t) if t.rows == rows && t.cols == cols => t.data.clone(),
            _ => {
                f.missing.push(name);
                value
            }
        }
    }
}

/// Per-call values layers hand down: each index source's top-k and the candidate mask.
struct Shared {
    topk: Vec<Option<Vec<Vec<usize>>>>,
    candidates: Option<Vec<Vec<bool>>>,
}

/// Concatenates per-token vectors.
pub(super) fn cat(rows: impl IntoIterator<Item = Vec<f64>>) -> Vec<f64> {
    rows.into_iter().flatten().collect()
}

impl Model {
    /// Runs `ids` from the state's position; returns logits `[S, V]` and records every tap.
    pub fn forward(&self, st: &mut State, ids: &[u32], image_mask: Option<&[bool]>, taps: &mut Taps<f64>) -> Result<Vec<f64>, ReferenceError> {
        self.run(st, ids, image_mask, &mut Rec { taps, force: None })
    }

    /// Like [`Model::forward`], but every stage continues from the oracle's recorded value (teacher forcing), so each tap is the reference stage on the oracle's inputs.
    pub fn forward_forced(&self, st: &mut State, ids: &[u32], image_mask: Option<&[bool]>, taps: &mut Taps<f64>, forcing: &mut Forcing) -> Result<Vec<f64>, ReferenceError> {
        self.run(st, ids, image_mask, &mut Rec { taps, force: Some(forcing) })
    }

    /// The forward of one call.
    fn run(&self, st: &mut State, ids: &[u32], image_mask: Option<&[bool]>, rec: &mut Rec) -> Result<Vec<f64>, ReferenceError> {
        let cfg = &self.cfg;
        let (s, d, hc, eps) = (ids.len(), cfg.hidden_size, cfg.hc_mult, cfg.rms_norm_eps);
        if let Some(&bad) = ids.iter().find(|&&id| id as usize >= cfg.vocab_size) {
            return Err(ReferenceError::Input(format!("token id {bad} is outside the vocabulary of {}", cfg.vocab_size)));
        }
        if image_mask.is_some_and(|m| m.len() != s) {
            return Err(ReferenceError::Input("image mask length differs from the token count".into()));
        }
        if st.layers.len() != self.layers.len() || (self.hasher.is_some() && st.history.len() != st.pos) {
            return Err(ReferenceError::Input("state does not belong to this model or position".into()));
        }
        let image = |i: usize| image_mask.is_some_and(|m| m[i]);
        let p0 = st.pos;
        let hash = match &self.hasher {
            Some(hasher) => {
                st.history.extend(&self.token_map, ids, image_mask)?;
                hasher.hash(&st.history, p0, s)?
            }
            None => Vec::new(),
        };
        let embed = cat(ids.iter().map(|&id| self.embed[id as usize * d..(id as usize + 1) * d].to_vec()));
        let embed = rec.stage("embed".into(), d, embed, None);
        let mut h: Vec<f64> = (0..s).flat_map(|i| (0..hc).flat_map(move |_| i * d..(i + 1) * d)).map(|k| embed[k]).collect();
        let mut m: Vec<Vec<f64>> = (0..s).map(|_| (0..hc).map(|i| if i == 0 { 1.0 } else { 0.0 }).collect()).collect();
        let mut shared = Shared { topk: vec![None; self.layers.len()], candidates: None };
        let w = hc * d;
        let feeding = st.feeding && self.dspark.is_some();
        let mut feats = Vec::new();
        for (l, layer) in self.layers.iter().enumerate() {
            if let (Some(e), Some(hasher)) = (&layer.engram, &self.hasher) {
                let (per, cols) = (hasher.ids_per_position(), cfg.engram_hash_cols());
                let traces: Vec<_> = (0..s)
                    .map(|i| e.run(&h[i * w..(i + 1) * w], &hash[i * per + e.index * cols..i * per + (e.index + 1) * cols], image(i), hc, eps))
                    .collect();
                let raw = cat(traces.into_iter().map(|t| t.raw));
                h = rec.stage(format!("L{l}.engram"), w, raw.iter().map(|&v| bf16(v)).collect(), Some(raw));
            }
            if feeding && layer.plan.dspark_target.is_some() {
                feats.push(h.clone());
            }
            let site = |hs: &[f64], site| -> Vec<Mixes> {
                (0..s).map(|i| mixes(site, &hs[i * w..(i + 1) * w], hc, cfg.hc_sinkhorn_iters, cfg.hc_eps, eps)).collect()
            };
            let mix_a = site(&h, &layer.hc_attn);
            let x_raw = cat((0..s).map(|i| rms_norm_raw(&collapse(&h[i * w..(i + 1) * w], &m[i]), &layer.attn_norm, eps)));
            let x = rec.stage(format!("L{l}.attn.x"), d, x_raw.iter().map(|&v| bf16(v)).collect(), Some(x_raw));
            let out = self.attention(l, layer, st, &x, p0, &mut shared, rec)?;
            let raw = cat((0..s).map(|i| expand_raw(&out[i * d..(i + 1) * d], &h[i * w..(i + 1) * w], &mix_a[i])));
            h = rec.stage(format!("L{l}.h_attn"), w, raw.iter().map(|&v| bf16(v)).collect(), Some(raw));
            let mix_f = site(&h, &layer.hc_ffn);
            let x_raw = cat((0..s).map(|i| rms_norm_raw(&collapse(&h[i * w..(i + 1) * w], &mix_a[i].pre), &layer.ffn_norm, eps)));
            let x = rec.stage(format!("L{l}.ffn.x"), d, x_raw.iter().map(|&v| bf16(v)).collect(), Some(x_raw));
            let out = self.ffn(&format!("L{l}"), layer, &x, &image, rec);
            let raw = cat((0..s).map(|i| expand_raw(&out[i * d..(i + 1) * d], &h[i * w..(i + 1) * w], &mix_f[i])));
            h = rec.stage(format!("L{l}.h_ffn"), w, raw.iter().map(|&v| bf16(v)).collect(), Some(raw));
            m = mix_f.into_iter().map(|x| x.pre).collect();
        }
        if feeding {
            self.feed_rings(st, &feats, p0, rec);
        }
        let x_raw = cat((0..s).map(|i| rms_norm_raw(&collapse(&h[i * w..(i + 1) * w], &m[i]), &self.norm, eps)));
        let x = rec.stage("final.x".into(), d, x_raw.iter().map(|&v| bf16(v)).collect(), Some(x_raw));
        let logits = cat((0..s).map(|i| self.head.apply(&x[i * d..(i + 1) * d])));
        let logits = rec.stage("logits".into(), cfg.vocab_size, logits, None);
        st.pos += s;
        Ok(logits)
    }

    /// The MoE of one call (taps under `name`): router taps, experts on the (possibly forced) routing, `ffn.out`.
    pub(super) fn ffn(&self, name: &str, layer: &Layer, x: &[f64], image: &dyn Fn(usize) -> bool, rec: &mut Rec) -> Vec<f64> {
        let (cfg, d, k) = (&self.cfg, self.cfg.hidden_size, layer.ffn.topk);
        let s = x.len() / d;
        let routes: Vec<_> = (0..s).map(|i| layer.ffn.route(cfg, &x[i * d..(i + 1) * d], image(i))).collect();
        let idx = cat(routes.iter().map(|r| r.idx.iter().map(|&e| e as f64).collect()));
        let idx = rec.stage(format!("{name}.ffn.gate_idx"), k, idx, None);
        let wts = rec.stage(format!("{name}.ffn.gate_w"), k, cat(routes.into_iter().map(|r| r.weights)), None);
        let n = layer.ffn.experts.len();
        let raw = cat((0..s).map(|i| {
            let sel: Vec<usize> = idx[i * k..(i + 1) * k].iter().map(|&e| e as usize).filter(|&e| e < n).collect();
            layer.ffn.combine_raw(cfg, &x[i * d..(i + 1) * d], &sel, &wts[i * k..(i + 1) * k])
        }));
        rec.stage(format!("{name}.ffn.out"), d, raw.iter().map(|&v| bf16(v)).collect(), Some(raw))
    }

    /// The attention of one call at layer `l`: q, window kv, compressor, indexer, sparse attention, output.
    #[allow(clippy::too_many_arguments)]
    fn attention(&self, l: usize, layer: &Layer, st: &mut State, x: &[f64], p0: usize, shared: &mut Shared, rec: &mut Rec) -> Result<Vec<f64>, ReferenceError> {
        let cfg = &self.cfg;
        let (d, heads, hd, eps, plan) = (cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim, cfg.rms_norm_eps, &layer.plan);
        let a: &Attention = &layer.attn;
        let s = x.len() / d;
        let xs = |i: usize| &x[i * d..(i + 1) * d];
        let qt: Vec<_> = (0..s).map(|i| a.q_path(xs(i), p0 + i, heads, eps)).collect();
        let q_raw = cat(qt.iter().map(|t| t.raw.clone()));
        let q = rec.stage(format!("L{l}.attn.q"), heads * hd, cat(qt.iter().map(|t| t.q.clone())), Some(q_raw));
        let kvt: Vec<_> = (0..s).map(|i| a.kv_path(xs(i), p0 + i, eps)).collect();
        let kv_raw = cat(kvt.iter().map(|t| t.raw.clone()));
        let kv = rec.stage(format!("L{l}.attn.kv"), hd, cat(kvt.into_iter().map(|t| t.kv)), Some(kv_raw));
        st.layers[l].window.extend(kv.chunks_exact(hd).map(<[f64]>::to_vec));
        let mut topk: Vec<Vec<usize>> = vec![Vec::new(); s];
        if plan.ratio > 0 {
            let r = plan.ratio;
            if let Some(c) = &a.compressor {
                let ls = &mut st.layers[l];
                let j0 = ls.comp.len();
                let mut latents = Vec::new();
                for i in 0..s {
                    if r == 1 {
                        latents.push(c.latent_single(xs(i), eps));
                    } else {
                        ls.pending.push(c.project(xs(i)));
                        if ls.pending.len() == r {
                            latents.push(c.latent_pooled(&ls.pending, eps));
                            ls.pending.clear();
                        }
                    }
                }
                let keys: Vec<_> = latents.iter().enumerate().map(|(k, lat)| c.index_key(lat, (j0 + k) * r, &a.inv_freq, eps)).collect();
                let rows: Vec<_> = latents.iter().enumerate().map(|(k, lat)| comp_row(lat, (j0 + k) * r, &a.inv_freq)).collect();
                let ihd = cfg.index_head_dim;
                let key_raw = cat(keys.iter().map(|q| q.raw.clone()));
                let keys = rec.stage(format!("L{l}.attn.index_keys"), ihd, cat(keys.into_iter().map(|q| q.value)), Some(key_raw));
                let row_raw = cat(rows.iter().map(|q| q.raw.clone()));
                let rows = rec.stage(format!("L{l}.attn.comp"), hd, cat(rows.into_iter().map(|q| q.value)), Some(row_raw));
                let ls = &mut st.layers[l];
                ls.index_keys.extend(keys.chunks_exact(ihd).map(<[f64]>::to_vec));
                ls.comp.extend(rows.chunks_exact(hd).map(<[f64]>::to_vec));
            }
            let src = plan.kv_source.ok_or_else(|| ReferenceError::Input(format!("layer {l} has ratio {r} but no KV source")))?;
            if let Some(ix) = &a.indexer {
                let keys = &st.layers[src].index_keys;
                let (inh, k) = (cfg.index_n_heads, cfg.index_topk);
                let mut cands = Vec::new();
                let mut picks = Vec::with_capacity(s * k);
                for i in 0..s {
                    let p = p0 + i;
                    let visible = ((p + 1) / r).min(keys.len());
                    let qi = index_query(ix, &qt[i].qr, p, inh, &a.inv_freq);
                    let mut scores = index_scores(ix, &qi, xs(i), keys, visible, inh);
                    if plan.candidate_source {
                        cands.push(candidate_blocks(&scores, visible, cfg.candidate_topk_blocks, cfg.candidate_block_size));
                    }
                    if plan.candidate_mask {
                        if let Some(mask) = shared.candidates.as_ref().and_then(|c| c.get(i)) {
                            scores.iter_mut().zip(mask).filter(|(_, &keep)| !keep).for_each(|(v, _)| *v = f64::NEG_INFINITY);
                        }
                    }
                    let sel = select_topk(&scores, visible, k);
                    picks.extend((0..k).map(|j| sel.get(j).map_or(-1.0, |&t| t as f64)));
                }
                if plan.candidate_source {
                    shared.candidates = Some(cands);
                }
                let picks = rec.stage(format!("L{l}.attn.topk"), k, picks, None);
                let n = keys.len();
                shared.topk[l] = Some(picks.chunks_exact(k.max(1)).map(|row| row.iter().filter(|&&t| t >= 0.0 && (t as usize) < n).map(|&t| t as usize).collect()).collect());
            }
            let isrc = plan.index_source.ok_or_else(|| ReferenceError::Input(format!("layer {l} has ratio {r} but no index source")))?;
            topk = shared.topk[isrc].clone().ok_or_else(|| ReferenceError::Input(format!("layer {l}: index source {isrc} published no top-k")))?;
        }
        let src_rows = plan.kv_source.map(|sl| &st.layers[sl].comp);
        let window = &st.layers[l].window;
        let mut o_raw = Vec::with_capacity(s * heads * hd);
        let mut o = Vec::with_capacity(s * heads * hd);
        for i in 0..s {
            let p = p0 + i;
            let mut keys: Vec<&[f64]> = window[(p + 1).saturating_sub(cfg.sliding_window)..=p].iter().map(Vec::as_slice).collect();
            if let Some(rows) = src_rows {
                keys.extend(topk[i].iter().filter_map(|&t| rows.get(t)).map(Vec::as_slice));
            }
            let (raw, oi) = a.unrotate(&a.attend_raw(&q[i * heads * hd..(i + 1) * heads * hd], &keys, heads), p, heads);
            o_raw.extend(raw);
            o.extend(oi);
        }
        let o = rec.stage(format!("L{l}.attn.o"), heads * hd, o, Some(o_raw));
        let outs: Vec<_> = o.chunks_exact(heads * hd).map(|oi| a.output(oi, cfg.o_groups)).collect();
        let raw = cat(outs.iter().map(|t| t.raw.clone()));
        Ok(rec.stage(format!("L{l}.attn.out"), d, cat(outs.into_iter().map(|t| t.out)), Some(raw)))
    }
}
