//! The float64 DSpark draft head (spec 2.8): features into the stages' rings on every fed position, and a draft block through the stages, head, Markov head and confidence head, with taps and forcing like the backbone.
use super::forward::{cat, Rec};
use super::mhc::{collapse, collapse_raw, expand_raw, mixes, rms_norm_raw};
use super::quant::bf16;
use super::weights::{bf16_linear, fp8_linear, vector, Linear};
use super::{layer, Forcing, Layer, Model, ReferenceError, State};
use crate::model::taps::Taps;
use crate::weights::Checkpoint;
use crate::model::Config;

/// The draft head's weights: the stages (backbone-shaped layers) and the tensors only the first and last stage hold.
#[derive(Debug, Clone)]
pub struct Dspark {
    /// `mtp.0..` as layers.
    pub stages: Vec<Layer>,
    /// `mtp.0.main_proj` `[D, targets * D]` (fp8).
    pub main_proj: Linear,
    /// `mtp.0.main_norm`.
    pub main_norm: Vec<f64>,
    /// The last stage's `norm`.
    pub norm: Vec<f64>,
    /// `markov_head.embed` `[V, rank]`.
    pub markov_embed: Vec<f64>,
    /// `markov_head.head` `[V, rank]`.
    pub markov_head: Linear,
    /// `confidence_head.proj` `[1, D + rank]`.
    pub confidence: Linear,
}

impl Dspark {
    /// Loads the draft head when the config has one.
    pub fn load(ck: &Checkpoint, cfg: &Config) -> Result<Option<Dspark>, ReferenceError> {
        if !cfg.has_drafts() {
            return Ok(None);
        }
        let (d, v, r, n) = (cfg.hidden_size, cfg.vocab_size, cfg.dspark_markov_rank, cfg.num_nextn_predict_layers);
        let stages = cfg.layer_plan().into_iter().skip(cfg.num_hidden_layers).map(|p| layer(ck, cfg, p)).collect::<Result<Vec<_>, _>>()?;
        let last = format!("mtp.{}", n - 1);
        Ok(Some(Dspark {
            stages,
            main_proj: fp8_linear(ck, "mtp.0.main_proj", d, d * cfg.dspark_target_layer_ids.len())?,
            main_norm: vector(ck, "mtp.0.main_norm.weight", d)?,
            norm: vector(ck, &format!("{last}.norm.weight"), d)?,
            markov_embed: vector(ck, &format!("{last}.markov_head.embed.weight"), v * r)?,
            markov_head: bf16_linear(ck, &format!("{last}.markov_head.head"), v, r)?,
            confidence: bf16_linear(ck, &format!("{last}.confidence_head.proj"), 1, d + r)?,
        }))
    }
}

/// The largest value's index, the lower on ties.
fn argmax(v: &[f64]) -> usize {
    (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b })
}

impl Model {
    /// A fresh state that feeds the draft head's rings.
    pub fn new_drafting_state(&self) -> State {
        State::drafting(self.layers.len(), self.dspark.as_ref().map_or(0, |d| d.stages.len()))
    }

    /// One call's features `[S, hc*D]` at each target layer into main_x and each stage's ring rows at positions `p0..`.
    pub(super) fn feed_rings(&self, st: &mut State, feats: &[Vec<f64>], p0: usize, rec: &mut Rec) {
        let Some(ds) = &self.dspark else { return };
        let (cfg, eps) = (&self.cfg, self.cfg.rms_norm_eps);
        let (d, hc) = (cfg.hidden_size, cfg.hc_mult);
        let s = feats.first().map_or(0, |f| f.len() / (hc * d));
        let mean = vec![1.0 / hc as f64; hc];
        let mean = &mean;
        let raw = cat((0..s).flat_map(|i| feats.iter().map(move |f| collapse_raw(&f[i * hc * d..(i + 1) * hc * d], mean))));
        let width = d * feats.len();
        let hidden = rec.stage("D.hidden".into(), width, raw.iter().map(|&v| bf16(v)).collect(), Some(raw));
        let x_raw = cat((0..s).map(|i| {
            let y: Vec<f64> = ds.main_proj.apply(&hidden[i * width..(i + 1) * width]).into_iter().map(bf16).collect();
            rms_norm_raw(&y, &ds.main_norm, eps)
        }));
        let x = rec.stage("D.main_x".into(), d, x_raw.iter().map(|&v| bf16(v)).collect(), Some(x_raw));
        for (k, stage) in ds.stages.iter().enumerate() {
            let t: Vec<_> = (0..s).map(|i| stage.attn.kv_path(&x[i * d..(i + 1) * d], p0 + i, eps)).collect();
            let raw = cat(t.iter().map(|t| t.raw.clone()));
            let kv = rec.stage(format!("S{k}.ring_kv"), cfg.head_dim, cat(t.into_iter().map(|t| t.kv)), Some(raw));
            if let Some(ring) = st.rings.get_mut(k) {
                ring.truncate(p0);
                ring.extend(kv.chunks_exact(cfg.head_dim).map(<[f64]>::to_vec));
            }
        }
    }

    /// Drafts one block after the state's position from the sampled token `first`; returns the proposals and their confidence logits.
    pub fn draft(&self, st: &State, first: u32, taps: &mut Taps<f64>) -> Result<(Vec<u32>, Vec<f64>), ReferenceError> {
        self.draft_block(st, first, &mut Rec { taps, force: None })
    }

    /// Like [`Model::draft`], each stage continuing from the oracle's recorded value.
    pub fn draft_forced(&self, st: &State, first: u32, taps: &mut Taps<f64>, forcing: &mut Forcing) -> Result<(Vec<u32>, Vec<f64>), ReferenceError> {
        self.draft_block(st, first, &mut Rec { taps, force: Some(forcing) })
    }

    fn draft_block(&self, st: &State, first: u32, rec: &mut Rec) -> Result<(Vec<u32>, Vec<f64>), ReferenceError> {
        let ds = self.dspark.as_ref().ok_or_else(|| ReferenceError::Input("the model has no draft head".into()))?;
        let cfg = &self.cfg;
        let (b, d, hc, eps, heads, hd) = (cfg.dspark_block_size, cfg.hidden_size, cfg.hc_mult, cfg.rms_norm_eps, cfg.num_attention_heads, cfg.head_dim);
        let p0 = st.pos;
        if st.rings.iter().any(|r| r.len() != p0) || st.rings.len() != ds.stages.len() {
            return Err(ReferenceError::Input("the state's rings were not fed up to its position".into()));
        }
        let ids: Vec<u32> = std::iter::once(first).chain(std::iter::repeat_n(cfg.dspark_noise_token_id as u32, b - 1)).collect();
        let w = hc * d;
        let mut h: Vec<f64> = ids.iter().flat_map(|&id| (0..hc).flat_map(move |_| self.embed[id as usize * d..(id as usize + 1) * d].iter().copied())).collect();
        let mut m: Vec<Vec<f64>> = (0..b).map(|_| (0..hc).map(|i| if i == 0 { 1.0 } else { 0.0 }).collect()).collect();
        let text = |_: usize| false;
        for (k, layer) in ds.stages.iter().enumerate() {
            let name = format!("S{k}");
            let a = &layer.attn;
            let mix_a: Vec<_> = (0..b).map(|i| mixes(&layer.hc_attn, &h[i * w..(i + 1) * w], hc, cfg.hc_sinkhorn_iters, cfg.hc_eps, eps)).collect();
            let x_raw = cat((0..b).map(|i| rms_norm_raw(&collapse(&h[i * w..(i + 1) * w], &m[i]), &layer.attn_norm, eps)));
            let x = rec.stage(format!("{name}.attn.x"), d, x_raw.iter().map(|&v| bf16(v)).collect(), Some(x_raw));
            let qt: Vec<_> = (0..b).map(|i| a.q_path(&x[i * d..(i + 1) * d], p0 + i, heads, eps)).collect();
            let q_raw = cat(qt.iter().map(|t| t.raw.clone()));
            let q = rec.stage(format!("{name}.attn.q"), heads * hd, cat(qt.into_iter().map(|t| t.q)), Some(q_raw));
            let kvt: Vec<_> = (0..b).map(|i| a.kv_path(&x[i * d..(i + 1) * d], p0 + i, eps)).collect();
            let kv_raw = cat(kvt.iter().map(|t| t.raw.clone()));
            let kv = rec.stage(format!("{name}.attn.kv"), hd, cat(kvt.into_iter().map(|t| t.kv)), Some(kv_raw));
            let ring = &st.rings[k];
            let mut keys: Vec<&[f64]> = ring[p0.saturating_sub(cfg.sliding_window)..p0].iter().map(Vec::as_slice).collect();
            keys.extend(kv.chunks_exact(hd));
            let (mut o_raw, mut o) = (Vec::new(), Vec::new());
            for i in 0..b {
                let (raw, oi) = a.unrotate(&a.attend_raw(&q[i * heads * hd..(i + 1) * heads * hd], &keys, heads), p0 + i, heads);
                o_raw.extend(raw);
                o.extend(oi);
            }
            let o = rec.stage(format!("{name}.attn.o"), heads * hd, o, Some(o_raw));
            let outs: Vec<_> = o.chunks_exact(heads * hd).map(|oi| a.output(oi, cfg.o_groups)).collect();
            let raw = cat(outs.iter().map(|t| t.raw.clone()));
            let out = rec.stage(format!("{name}.attn.out"), d, cat(outs.into_iter().map(|t| t.out)), Some(raw));
            let raw = cat((0..b).map(|i| expand_raw(&out[i * d..(i + 1) * d], &h[i * w..(i + 1) * w], &mix_a[i])));
            h = rec.stage(format!("{name}.h_attn"), w, raw.iter().map(|&v| bf16(v)).collect(), Some(raw));
            let mix_f: Vec<_> = (0..b).map(|i| mixes(&layer.hc_ffn, &h[i * w..(i + 1) * w], hc, cfg.hc_sinkhorn_iters, cfg.hc_eps, eps)).collect();
            let x_raw = cat((0..b).map(|i| rms_norm_raw(&collapse(&h[i * w..(i + 1) * w], &mix_a[i].pre), &layer.ffn_norm, eps)));
            let x = rec.stage(format!("{name}.ffn.x"), d, x_raw.iter().map(|&v| bf16(v)).collect(), Some(x_raw));
            let out = self.ffn(&name, layer, &x, &text, rec);
            let raw = cat((0..b).map(|i| expand_raw(&out[i * d..(i + 1) * d], &h[i * w..(i + 1) * w], &mix_f[i])));
            h = rec.stage(format!("{name}.h_ffn"), w, raw.iter().map(|&v| bf16(v)).collect(), Some(raw));
            m = mix_f.into_iter().map(|x| x.pre).collect();
        }
        let xc_raw = cat((0..b).map(|i| collapse_raw(&h[i * w..(i + 1) * w], &m[i])));
        let xc = rec.stage("D.x".into(), d, xc_raw.iter().map(|&v| bf16(v)).collect(), Some(xc_raw));
        let xn_raw = cat((0..b).map(|i| rms_norm_raw(&xc[i * d..(i + 1) * d], &ds.norm, eps)));
        let xn = rec.stage("D.x_norm".into(), d, xn_raw.iter().map(|&v| bf16(v)).collect(), Some(xn_raw));
        let head = rec.stage("D.head".into(), cfg.vocab_size, cat((0..b).map(|i| self.head.apply(&xn[i * d..(i + 1) * d]))), None);
        let (v, r) = (cfg.vocab_size, cfg.dspark_markov_rank);
        let forced: Option<Vec<u32>> = rec.forced("D.tokens").filter(|t| t.data.len() == b).map(|t| t.data.iter().map(|&x| x as u32).collect());
        let (mut prev, mut tokens, mut embeds, mut logits) = (first as usize, Vec::with_capacity(b), Vec::with_capacity(b * r), Vec::with_capacity(b * v));
        for i in 0..b {
            let e = self.dspark_embed(ds, prev, r)?;
            let li: Vec<f64> = head[i * v..(i + 1) * v].iter().zip(ds.markov_head.apply(&e)).map(|(a, c)| a + c).collect();
            let pick = forced.as_ref().map_or_else(|| argmax(&li) as u32, |f| f[i]);
            tokens.push(pick);
            prev = pick as usize;
            embeds.extend(e);
            logits.extend(li);
        }
        let embeds = rec.stage("D.markov_e".into(), r, embeds, None);
        rec.stage("D.logits".into(), v, logits, None);
        let picks = rec.stage("D.tokens".into(), 1, tokens.iter().map(|&t| f64::from(t)).collect(), None);
        let joined = cat((0..b).map(|i| xc[i * d..(i + 1) * d].iter().chain(&embeds[i * r..(i + 1) * r]).copied().collect()));
        let conf = cat((0..b).map(|i| ds.confidence.apply(&joined[i * (d + r)..(i + 1) * (d + r)])));
        let conf = rec.stage("D.confidence".into(), 1, conf, None);
        Ok((picks.iter().map(|&t| t as u32).collect(), conf))
    }

    /// Row `id` of the Markov embedding.
    fn dspark_embed(&self, ds: &Dspark, id: usize, r: usize) -> Result<Vec<f64>, ReferenceError> {
        ds.markov_embed.get(id * r..(id + 1) * r).map(<[f64]>::to_vec).ok_or_else(|| ReferenceError::Input(format!("token id {id} is outside the Markov table")))
    }
}
