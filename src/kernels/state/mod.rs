//! Packed sequence state: compressed KV rows and index keys kept as the e2m1 codes and scales their QAT rounds them to (spec 6), packed from the QAT's values and unpacked to the same bits.
pub mod contract;

use crate::gpu::{Arg, Buf, GpuError, Recorder, Shader};
use crate::kernels::dispatch::{bad_shape, grid64, key};
use crate::kernels::qat::Qat;
use crate::numerics::math::div;
use crate::numerics::{e2m1_to_f32, e4m3_from_f32, e4m3_to_f32, pow2};

pub(crate) const PACK: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "pack_rows", variant: "ref", source: include_str!("../../../wgsl/state/pack.wgsl") };
pub(crate) const UNPACK: Shader = Shader { lang: crate::gpu::Lang::Wgsl, kernel: "unpack_rows", variant: "ref", source: include_str!("../../../wgsl/state/unpack.wgsl") };

/// Multiples of the scale a block's largest magnitude may be, in the order a packer tries them.
const LEADS: [f32; 7] = [6.0, 4.0, 3.0, 2.0, 1.5, 1.0, 0.5];

/// How a packed row lays out: `cols / 8` words of e2m1 codes (value i in nibble i mod 8 of word i / 8), then a scale byte per block, four to a word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packing {
    /// The QAT whose values the row holds: `Fp4Rows` (e4m3 scale per 16) or `Fp4Index` (power-of-two scale per 32, as an e8m0 byte).
    pub kind: Qat,
    /// Values per row.
    pub cols: usize,
}

impl Packing {
    /// The packing of rows of `cols` values of `kind`; refused for the fp8 window format and for rows that are not whole blocks of eight codes.
    pub fn new(kind: Qat, cols: usize) -> Result<Packing, String> {
        if kind == Qat::Fp8 {
            return Err("fp8 rows are not packed".into());
        }
        if cols == 0 || !cols.is_multiple_of(kind.block()) {
            return Err(format!("{cols} values are not whole {kind:?} blocks"));
        }
        Ok(Packing { kind, cols })
    }
    /// Scale blocks per row.
    pub fn blocks(&self) -> usize {
        self.cols / self.kind.block()
    }
    /// Words of codes per row.
    pub fn code_words(&self) -> usize {
        self.cols / 8
    }
    /// Words per packed row.
    pub fn row_words(&self) -> usize {
        self.code_words() + self.blocks().div_ceil(4)
    }
    /// Bytes per packed row.
    pub fn row_bytes(&self) -> usize {
        self.row_words() * 4
    }
    fn kind_id(&self) -> u32 {
        u32::from(self.kind == Qat::Fp4Index)
    }
}

/// The scale byte of a block whose values no scale gives exactly: every value unpacks to NaN.
pub const NO_SCALE: u32 = 0xff;

/// The scale a scale byte stands for.
fn scale_value(kind: Qat, b: u32) -> f32 {
    if b == NO_SCALE {
        f32::NAN
    } else if kind == Qat::Fp4Index {
        pow2(b as i32 - 127)
    } else {
        e4m3_to_f32(b as u8)
    }
}

/// The scale byte of a candidate scale `t` (amax over a lead), or None when the format has no such scale.
fn scale_byte(kind: Qat, t: f32) -> Option<u32> {
    if kind == Qat::Fp4Index {
        let b = t.to_bits();
        let e = ((b >> 23) & 0xff) as i32 - 127;
        (b & 0x7f_ffff == 0 && (-126..=126).contains(&e) && t > 0.0).then_some((e + 127) as u32)
    } else {
        let c = u32::from(e4m3_from_f32(t));
        (c & 0x7f != 0 && c & 0x7f != 0x7f).then_some(c)
    }
}

/// The e2m1 code whose value times `s` is exactly `v`, sign kept.
fn exact_code(v: f32, s: f32) -> Option<u32> {
    let sign = (v.to_bits() >> 28) & 8;
    (0..8u32).find(|&k| e2m1_to_f32(k as u8) * s == v.abs()).map(|k| sign | k)
}

/// The scale byte and codes of one block of QAT values: the first lead whose scale gives every value exactly (a zero block takes scale byte 1); the byte [`NO_SCALE`] when none does.
fn pack_block(kind: Qat, blk: &[f32]) -> (u32, Vec<u32>) {
    let amax = blk.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let bytes: Vec<u32> = if amax == 0.0 { vec![1] } else { LEADS.iter().filter_map(|&c| scale_byte(kind, div(amax, c))).collect() };
    for b in bytes {
        let s = scale_value(kind, b);
        let codes: Option<Vec<u32>> = blk.iter().map(|&v| exact_code(v, s)).collect();
        if let Some(codes) = codes {
            return (b, codes);
        }
    }
    (NO_SCALE, vec![0; blk.len()])
}

/// Packs rows of QAT values `[rows, cols]` (the CPU twin of `pack_rows`).
pub fn pack_rows(p: Packing, x: &[f32]) -> Vec<u32> {
    let mut out = Vec::with_capacity(x.len() / p.cols * p.row_words());
    for row in x.chunks(p.cols) {
        let mut w = vec![0u32; p.row_words()];
        for (b, blk) in row.chunks(p.kind.block()).enumerate() {
            let (s, codes) = pack_block(p.kind, blk);
            w[p.code_words() + b / 4] |= s << (8 * (b % 4));
            for (i, c) in codes.into_iter().enumerate() {
                let at = b * p.kind.block() + i;
                w[at / 8] |= c << (4 * (at % 8));
            }
        }
        out.extend(w);
    }
    out
}

/// Value `col` of one packed row.
fn unpack_value(p: Packing, row: &[u32], col: usize) -> f32 {
    let code = (row[col / 8] >> (4 * (col % 8))) & 0xf;
    let b = col / p.kind.block();
    let s = (row[p.code_words() + b / 4] >> (8 * (b % 4))) & 0xff;
    if s == NO_SCALE {
        f32::NAN
    } else {
        e2m1_to_f32(code as u8) * scale_value(p.kind, s)
    }
}

/// Rows of a packed cache as values (the CPU twin of `unpack_rows`): rows `sel` (f32 row numbers, -1 for none: a zero row) or every row; with `sel`, also each pick's place in the output (-1 kept).
pub fn unpack_rows(p: Packing, words: &[u32], sel: Option<&[f32]>) -> (Vec<f32>, Option<Vec<f32>>) {
    let rw = p.row_words();
    let rows = words.len() / rw;
    let one = |r: usize| -> Vec<f32> { (0..p.cols).map(|c| unpack_value(p, &words[r * rw..(r + 1) * rw], c)).collect() };
    match sel {
        None => ((0..rows).flat_map(one).collect(), None),
        Some(sel) => {
            let vals = sel.iter().flat_map(|&v| if v >= 0.0 { one((v as usize).min(rows.saturating_sub(1))) } else { vec![0.0; p.cols] }).collect();
            let places = sel.iter().enumerate().map(|(j, &v)| if v >= 0.0 { j as f32 } else { -1.0 }).collect();
            (vals, Some(places))
        }
    }
}

/// Records packing `rows` rows of QAT values `x` into packed rows `row0..` of `cache`.
pub fn record_pack(rec: &mut Recorder, p: Packing, x: &Buf, cache: &Buf, rows: usize, row0: usize, control: u32) -> Result<(), GpuError> {
    let groups = p.blocks().div_ceil(4);
    if rows == 0 {
        return Ok(());
    }
    if (row0 + rows) * p.row_words() >= 1 << 32 {
        return Err(bad_shape("pack_rows", format!("{} packed rows exceed 2^32 words", row0 + rows)));
    }
    let g = grid64(rows * groups * 4);
    let k = key(PACK, control, &[("KIND", f64::from(p.kind_id()))]);
    rec.dispatch(&k, &[rows as u32, p.cols as u32, row0 as u32, g[0]], &[Arg::Whole(x), Arg::Whole(cache)], g)
}

/// Records unpacking a packed cache of `rows` rows: every row into `y` `[rows, cols]` (`sel` None), or the `n` rows `sel` names (f32, -1 for none) into `y` `[n, cols]` with each pick's place into `places` `[n]` (unwritten without `sel`).
#[allow(clippy::too_many_arguments)]
pub fn record_unpack(rec: &mut Recorder, p: Packing, cache: &Buf, rows: usize, sel: Option<(&Buf, usize)>, y: &Buf, places: &Buf, control: u32) -> Result<(), GpuError> {
    let n = sel.map_or(rows, |s| s.1);
    if n * p.cols >= 1 << 32 || rows * p.row_words() >= 1 << 32 {
        return Err(bad_shape("unpack_rows", format!("{n} of {rows} rows of {} exceed 2^32 values", p.cols)));
    }
    if n == 0 {
        return Ok(());
    }
    let g = grid64(n * p.cols);
    let k = key(UNPACK, control, &[("KIND", f64::from(p.kind_id())), ("PICK", f64::from(u32::from(sel.is_some())))]);
    let idx = sel.map_or(cache, |s| s.0);
    rec.dispatch(&k, &[n as u32, p.cols as u32, rows.max(1) as u32, g[0]], &[Arg::Whole(cache), Arg::Whole(idx), Arg::Whole(y), Arg::Whole(places)], g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::qat::qat;

    #[test]
    fn packed_rows_unpack_to_the_qat_values_bit_for_bit() {
        for (kind, cols) in [(Qat::Fp4Rows, 512), (Qat::Fp4Index, 128), (Qat::Fp4Rows, 16)] {
            let x: Vec<f32> = (0..cols * 5).map(|i| ((i * 7919 % 1013) as f32 - 506.0) * [1e-3, 0.37, 41.0, 1e-20][i / cols % 4]).collect();
            let v = qat(kind, &x);
            let p = Packing::new(kind, cols).unwrap();
            let w = pack_rows(p, &v);
            assert_eq!(w.len(), 5 * p.row_words());
            let (back, none) = unpack_rows(p, &w, None);
            assert!(none.is_none());
            assert_eq!(back.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), v.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), "{kind:?} {cols}");
            let (picked, places) = unpack_rows(p, &w, Some(&[3.0, -1.0, 0.0]));
            assert_eq!(places.unwrap(), vec![0.0, -1.0, 2.0]);
            assert_eq!(&picked[..cols], &v[3 * cols..4 * cols]);
            assert!(picked[cols..2 * cols].iter().all(|&z| z == 0.0));
        }
    }

    #[test]
    fn release_rows_pack_to_the_model_card_sizes() {
        assert_eq!(Packing::new(Qat::Fp4Rows, 512).unwrap().row_bytes(), 288);
        assert_eq!(Packing::new(Qat::Fp4Index, 128).unwrap().row_bytes(), 68);
        assert!(Packing::new(Qat::Fp8, 512).is_err());
        assert!(Packing::new(Qat::Fp4Rows, 40).is_err());
    }

    #[test]
    fn values_off_the_grid_unpack_to_nan() {
        let p = Packing::new(Qat::Fp4Rows, 16).unwrap();
        let mut v = qat(Qat::Fp4Rows, &[1.0f32; 16]);
        v[3] = 1.1;
        let (back, _) = unpack_rows(p, &pack_rows(p, &v), None);
        assert!(back.iter().all(|x| x.is_nan()));
    }
}
