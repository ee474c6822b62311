//! Row gathers around the routed experts and the embedding: typed dispatchers and their CPU oracles.
use super::{grid64, pipeline_key};
use crate::gpu::{Arg, Buf, GpuError, Recorder, Shader};
use crate::numerics::bf16_to_f32;

pub(crate) const EMBED: Shader = Shader { kernel: "embed", variant: "ref", source: include_str!("../../wgsl/ops/embed.wgsl") };
pub(crate) const GATHER_ROWS: Shader = Shader { kernel: "gather_rows", variant: "ref", source: include_str!("../../wgsl/ops/gather_rows.wgsl") };

/// Records the embedding gather: table [v, d] bf16 (row-major little-endian, as in the checkpoint), ids [m] u32 (< v) -> y [m, d] f32.
#[allow(clippy::too_many_arguments)]
pub fn record_embed(rec: &mut Recorder, table: &Buf, ids: &Buf, y: &Buf, m: usize, d: usize, v: usize, control: u32) -> Result<(), GpuError> {
    let g = grid64(m * d);
    rec.dispatch(&pipeline_key(EMBED, control), &[m as u32, d as u32, v as u32, g[0]], &[Arg::Whole(table), Arg::Whole(ids), Arg::Whole(y)], g)
}

/// Embedding rows on the CPU: the bf16 row of each id widened to f32 (the CPU executor's embed).
pub fn embed_rows(table: &[u8], d: usize, ids: &[u32]) -> Vec<f32> {
    ids.iter()
        .flat_map(|&id| table[id as usize * d * 2..(id as usize + 1) * d * 2].chunks_exact(2).map(|c| bf16_to_f32(u16::from_le_bytes([c[0], c[1]]))))
        .collect()
}

/// Records a row gather: src [r, c] f32, idx [p] u32 (< r) -> dst [p, c] f32 with dst[i] = src[idx[i]] (for the routed experts: x rows by packed row, and route weights viewed as [m*k, 1] by i*k+j).
#[allow(clippy::too_many_arguments)]
pub fn record_gather_rows(rec: &mut Recorder, src: &Buf, idx: &Buf, dst: &Buf, p: usize, c: usize, r: usize, control: u32) -> Result<(), GpuError> {
    let g = grid64(p * c);
    rec.dispatch(&pipeline_key(GATHER_ROWS, control), &[p as u32, c as u32, r as u32, g[0]], &[Arg::Whole(src), Arg::Whole(idx), Arg::Whole(dst)], g)
}

/// Row gather on the CPU.
pub fn gather_rows(src: &[f32], c: usize, idx: &[u32]) -> Vec<f32> {
    idx.iter().flat_map(|&i| src[i as usize * c..(i as usize + 1) * c].iter().copied()).collect()
}

/// The packed layout of one call's routed rows: experts ascending, each expert's rows ascending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutePack {
    /// Source row of each packed row (gather_rows' index list for x).
    pub rows: Vec<u32>,
    /// Flat (row * k + pick) of each packed row (gather_rows' index list for the weights viewed as [m*k, 1]).
    pub picks: Vec<u32>,
    /// Packed row of each (row, pick), row-major [m, k] (moe_join's slot map).
    pub slot_map: Vec<u32>,
    /// (expert id, first packed row, packed rows) of each expert used, ascending.
    pub experts: Vec<(u32, usize, usize)>,
}

/// Packs moe_route's ids [m, k] (f32 expert ids in pick order) into the layout the expert GEMMs and moe_join read.
pub fn pack_routes(ids: &[f32], k: usize) -> RoutePack {
    let mut order: Vec<(u32, u32)> = ids.iter().enumerate().map(|(s, &e)| (e as u32, s as u32)).collect();
    order.sort_unstable();
    let mut pack = RoutePack { rows: Vec::new(), picks: Vec::new(), slot_map: vec![0; ids.len()], experts: Vec::new() };
    for (p, &(e, s)) in order.iter().enumerate() {
        pack.rows.push(s / k.max(1) as u32);
        pack.picks.push(s);
        pack.slot_map[s as usize] = p as u32;
        match pack.experts.last_mut() {
            Some(last) if last.0 == e => last.2 += 1,
            _ => pack.experts.push((e, p, 1)),
        }
    }
    pack
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_groups_rows_by_ascending_expert_and_maps_every_pick_back() {
        let ids = [5.0, 1.0, 1.0, 7.0, 5.0, 0.0];
        let p = pack_routes(&ids, 2);
        assert_eq!(p.experts, vec![(0, 0, 1), (1, 1, 2), (5, 3, 2), (7, 5, 1)]);
        assert_eq!(p.rows, vec![2, 0, 1, 0, 2, 1]);
        for (s, &slot) in p.slot_map.iter().enumerate() {
            assert_eq!(p.picks[slot as usize] as usize, s);
        }
    }
}
