//! Grouped GEMM: one dispatch over table entries, each a block of x rows times a block of weight rows into a block of output columns (the routed experts: an entry per expert over its packed rows and its rows of the stacked weights).
use crate::kernels::gemm::{gemm_shader, gemv_threads, WeightFormat};
use crate::gpu::{Arg, Buf, GpuError, Lang, PipelineKey, Recorder, Shader};


/// The WGSL grouped kernels by `GroupedTile`, then by format.
pub(crate) const SHADERS: [[Shader; 3]; 3] = [
    [
        gemm_shader!("gemm_bf16", "bf16", "grouped", "table4", "entry", "gemv_core"),
        gemm_shader!("gemm_e4m3", "e4m3", "grouped", "table6", "entry", "gemv_core"),
        gemm_shader!("gemm_e2m1", "e2m1", "grouped", "table6", "entry", "gemv_core"),
    ],
    [
        gemm_shader!("gemm_bf16", "bf16", "grouped_tiled", "table4", "entry", "tile_entry", "tile"),
        gemm_shader!("gemm_e4m3", "e4m3", "grouped_tiled", "table6", "entry", "tile_entry", "tile"),
        gemm_shader!("gemm_e2m1", "e2m1", "grouped_tiled", "table6", "entry", "tile_entry", "tile"),
    ],
    [
        gemm_shader!("gemm_bf16", "bf16", "grouped_small", "table4", "entry", "tile_entry", "tile_small"),
        gemm_shader!("gemm_e4m3", "e4m3", "grouped_small", "table6", "entry", "tile_entry", "tile_small"),
        gemm_shader!("gemm_e2m1", "e2m1", "grouped_small", "table6", "entry", "tile_entry", "tile_small"),
    ],
];

/// How a grouped GEMM covers its entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupedTile {
    /// Column blocks over any number of rows with K-parallel block sums (decode shapes).
    Blocks,
    /// 64x64 tiles, entries of at most `TILE_ROWS` rows.
    Tiled,
    /// 16x128 tiles, entries of at most `SMALL_ROWS` rows.
    Small,
}

impl GroupedTile {
    /// Most rows of one entry.
    pub fn max_rows(self) -> usize {
        match self {
            GroupedTile::Blocks => usize::MAX,
            GroupedTile::Tiled => TILE_ROWS,
            GroupedTile::Small => SMALL_ROWS,
        }
    }
}

/// The MSL fast paths for Apple GPUs, e4m3 then e2m1: a simdgroup per column (decode shapes), then 64x64 threadgroup tiles (prefill shapes).
pub(crate) const MSL: [[Shader; 2]; 2] = [
    [
        Shader { lang: Lang::Msl, kernel: "gemm_e4m3", variant: "msl_simd", source: crate::gpu::msl_lib!("msl/gemm/common.metal", "msl/gemm/fmt_e4m3.metal", "msl/gemm/blocks.metal", "msl/gemm/grouped_simd.metal") },
        Shader { lang: Lang::Msl, kernel: "gemm_e2m1", variant: "msl_simd", source: crate::gpu::msl_lib!("msl/gemm/common.metal", "msl/gemm/fmt_e2m1.metal", "msl/gemm/blocks.metal", "msl/gemm/grouped_simd.metal") },
    ],
    [
        Shader { lang: Lang::Msl, kernel: "gemm_e4m3", variant: "msl_tiled", source: crate::gpu::msl_lib!("msl/gemm/common.metal", "msl/gemm/fmt_e4m3.metal", "msl/gemm/blocks.metal", "msl/gemm/tile.metal", "msl/gemm/grouped_tiled.metal") },
        Shader { lang: Lang::Msl, kernel: "gemm_e2m1", variant: "msl_tiled", source: crate::gpu::msl_lib!("msl/gemm/common.metal", "msl/gemm/fmt_e2m1.metal", "msl/gemm/blocks.metal", "msl/gemm/tile.metal", "msl/gemm/grouped_tiled.metal") },
    ],
];

/// Largest K the simdgroup variant keeps segment sums for (16 stripes of 1024).
pub const SIMD_MAX_K: usize = 16384;

/// Most rows of one entry of the tiled grouped variant.
pub const TILE_ROWS: usize = 64;

/// Most rows of one entry of the small-tile grouped variant.
pub const SMALL_ROWS: usize = 16;

/// Words of the kernel's partial-sum memory (with the 5-word entry, 16 KiB).
pub const PART: usize = 4091;

/// The rows word's flag of a pick entry.
pub const PICK: u32 = 0x8000_0000;

/// One table entry: x rows `first..first+rows` times weight rows `w_row..w_row+cols` into output columns `col..col+cols`. A pick entry (`pick` = the part's expert count, `w_row` its first expert, one row) takes its weight rows from the expert the picks buffer names at the entry's index, and writes nothing when that expert is outside the part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupEntry {
    pub w_row: usize,
    pub first: usize,
    pub rows: usize,
    pub col: usize,
    pub cols: usize,
    pub pick: Option<usize>,
}

impl GroupEntry {
    /// A plain entry.
    pub fn rows(w_row: usize, first: usize, rows: usize, col: usize, cols: usize) -> GroupEntry {
        GroupEntry { w_row, first, rows, col, cols, pick: None }
    }

    /// A pick entry: x row `first` through the expert picked for this entry, if among the part's `experts` from `e0`.
    pub fn pick(e0: usize, experts: usize, first: usize, col: usize, cols: usize) -> GroupEntry {
        GroupEntry { w_row: e0, first, rows: 1, col, cols, pick: Some(experts) }
    }

    /// The entry as the table's five words.
    pub fn words(&self) -> [u32; 5] {
        let rows = self.pick.map_or(self.rows as u32, |e| PICK | e as u32);
        [self.w_row as u32, self.first as u32, rows, self.col as u32, self.cols as u32]
    }
}

/// The table words of `entries`.
pub fn table_words(entries: &[GroupEntry]) -> Vec<u32> {
    entries.iter().flat_map(GroupEntry::words).collect()
}

/// Device operands of one grouped GEMM.
pub struct GroupedArgs<'a> {
    pub fmt: WeightFormat,
    /// Rows of x (and of out).
    pub m: usize,
    pub k: usize,
    /// Activations [m, k] as f32 values; act_quant scales [m, k/32] for the scaled formats.
    pub x: &'a Buf,
    pub xs: Option<&'a Buf>,
    /// Weight rows (every entry's `w_row..w_row+cols` inside, or below `hi`'s row) and the scales of every weight row, in both buffers.
    pub w: &'a Buf,
    pub ws: Option<Arg<'a>>,
    /// A second weight buffer holding the rows from its `row` on, so one dispatch covers a stack split below the binding limit.
    pub hi: Option<GroupedHi<'a>>,
    /// Output f32, rows `ldo` apart (an entry's columns may start past `ldo`: a plane of later rows).
    pub out: &'a Buf,
    pub ldo: usize,
    /// The entries, and the same as table words on the device.
    pub entries: &'a [GroupEntry],
    pub table: &'a Buf,
    /// The expert of each pick entry by entry index, as f32 (any buffer when there are none).
    pub picks: &'a Buf,
    /// Store each output rounded to bf16 instead of as the f32 sum.
    pub round: bool,
}

/// The second weight buffer of a grouped GEMM: weight rows `row..` are its rows `0..`; their scales start at byte `scale_byte` of the scales binding.
#[derive(Clone, Copy, Debug)]
pub struct GroupedHi<'a> {
    pub w: &'a Buf,
    pub row: usize,
    pub scale_byte: usize,
}

/// The language a grouped GEMM of `fmt` and `k` runs in on a device that does (or does not) take MSL: the MSL fast paths cover e4m3 and e2m1 up to `SIMD_MAX_K`.
pub fn grouped_lang(native_msl: bool, fmt: WeightFormat, k: usize) -> Lang {
    if native_msl && fmt != WeightFormat::Bf16 && k <= SIMD_MAX_K { Lang::Msl } else { Lang::Wgsl }
}

/// Records one grouped GEMM in `lang` covering its entries as `tile` says (`control` is 0 outside the contract); nothing when there are no entries.
pub fn record_grouped(rec: &mut Recorder, a: &GroupedArgs, tile: GroupedTile, lang: Lang, control: u32) -> Result<(), GpuError> {
    let shader = match (lang, a.fmt, tile) {
        (Lang::Wgsl, f, t) => SHADERS[t as usize][f as usize],
        (Lang::Msl, WeightFormat::Bf16, _) => return Err(GpuError::Shader { kernel: "gemm_bf16/msl".into(), message: "no MSL grouped GEMM for bf16 weights".into() }),
        (Lang::Msl, _, GroupedTile::Small) => return Err(GpuError::Shader { kernel: "grouped gemm/msl".into(), message: "no MSL small-tile grouped GEMM".into() }),
        (Lang::Msl, f, t) => MSL[usize::from(t == GroupedTile::Tiled)][f as usize - 1],
    };
    let bad = |message: String| GpuError::Shader { kernel: format!("{}/{}", shader.kernel, shader.variant), message };
    if a.entries.is_empty() {
        return Ok(());
    }
    if a.entries.len() > 65535 || a.k % 32 != 0 || a.k / 32 > PART || a.table.bytes < 20 * a.entries.len() as u64 {
        return Err(bad(format!("{} entries (at most 65535), k {} (a multiple of 32), table of {} bytes", a.entries.len(), a.k, a.table.bytes)));
    }
    let max_rows = tile.max_rows();
    let out_words = (a.out.bytes / 4) as usize;
    if let Some(e) = a.entries.iter().find(|e| e.rows == 0 || e.cols == 0 || e.first + e.rows > a.m || (e.first + e.rows - 1) * a.ldo + e.col + e.cols > out_words || e.rows > max_rows || e.pick.is_some_and(|x| e.rows != 1 || x == 0 || x >= PICK as usize)) {
        return Err(bad(format!("entry {e:?}: empty, over {max_rows} rows, a pick of other than one row, outside x rows {}, or writing past the output's {out_words} words", a.m)));
    }
    if a.entries.iter().any(|e| e.pick.is_some()) && a.picks.bytes < 4 * a.entries.len() as u64 {
        return Err(bad(format!("{} entries with picks, a picks buffer of {} bytes", a.entries.len(), a.picks.bytes)));
    }
    if let Some(h) = a.hi {
        if lang == Lang::Msl || h.row == 0 || h.row >= PICK as usize || h.scale_byte >= PICK as usize {
            return Err(bad(format!("a second weight buffer from row {} (scale byte {}) in {lang:?}: WGSL only, inside u32", h.row, h.scale_byte)));
        }
        if let Some(e) = a.entries.iter().find(|e| if e.pick.is_some() { !h.row.is_multiple_of(e.cols) } else { e.w_row < h.row && e.w_row + e.cols > h.row }) {
            return Err(bad(format!("entry {e:?} straddles the second weight buffer's first row {}", h.row)));
        }
    }
    let cols = a.entries.iter().map(|e| e.cols).max().unwrap_or(1).max(1);
    let rows = a.entries.iter().map(|e| e.rows).max().unwrap_or(1);
    let split = a.hi.into_iter().flat_map(|h| [("W_SPLIT", h.row as f64), ("WS_SPLIT", h.scale_byte as f64)]).take(if a.fmt == WeightFormat::Bf16 { 1 } else { 2 });
    let constants: Vec<(&str, f64)> = split.chain([("CONTROL", f64::from(control))]).collect();
    let key = |r: Option<u32>| PipelineKey::new(shader, &r.into_iter().flat_map(|r| [("R", f64::from(r)), ("WG", f64::from(gemv_threads(a.k, r)))]).chain(constants.iter().copied()).collect::<Vec<_>>());
    let params = |gx: u32| [a.m as u32, cols as u32, a.k as u32, 0, a.ldo as u32, gx, u32::from(a.round)];
    let dispatch = |rec: &mut Recorder, r: Option<u32>, per: u32| {
        let groups = [(cols as u32).div_ceil(per), a.entries.len() as u32, 1];
        rec.dispatch(&key(r), &params(groups[0]), &args(a, lang)?, groups)
    };
    match (lang, tile) {
        (Lang::Msl, GroupedTile::Blocks) if a.k > SIMD_MAX_K => Err(bad(format!("k {} is over the simdgroup variant's {SIMD_MAX_K}", a.k))),
        (Lang::Msl, GroupedTile::Blocks) => dispatch(rec, None, 8),
        (_, GroupedTile::Tiled) => dispatch(rec, None, 64),
        (_, GroupedTile::Small) => dispatch(rec, None, 128),
        (_, GroupedTile::Blocks) => {
            // At least the device's spread of workgroups over the entries, pick entries counting as one (in each part most of them write nothing).
            let live = if a.entries.iter().any(|e| e.pick.is_some()) { 1 } else { a.entries.len() };
            let r = (PART / (rows.max(1) * (a.k / 32).max(1))).min(cols * live / rec.gpu().spread()).clamp(1, 64) as u32;
            dispatch(rec, Some(r), r)
        }
    }
}

/// The bindings of a grouped GEMM: the format's operands, the table and the picks, then (WGSL) the second weight buffer, or the first again when there is none.
fn args<'a>(a: &GroupedArgs<'a>, lang: Lang) -> Result<Vec<Arg<'a>>, GpuError> {
    let mut v = match (a.fmt, a.xs, a.ws) {
        (WeightFormat::Bf16, _, _) => vec![Arg::Whole(a.x), Arg::Whole(a.w), Arg::Whole(a.out)],
        (_, Some(xs), Some(ws)) => vec![Arg::Whole(a.x), Arg::Whole(xs), Arg::Whole(a.w), ws, Arg::Whole(a.out)],
        _ => return Err(GpuError::Shader { kernel: "grouped gemm".into(), message: "scales missing for a scaled format".into() }),
    };
    v.push(Arg::Whole(a.table));
    v.push(Arg::Whole(a.picks));
    if lang == Lang::Wgsl {
        v.push(Arg::Whole(a.hi.map_or(a.w, |h| h.w)));
    }
    Ok(v)
}

/// Entries that tile an [m, n] GEMM into uneven row blocks (1, 3, 7, 15, ... rows, at most `max_rows`) times up to three column blocks, so every offset is exercised.
pub fn tiling(m: usize, n: usize, max_rows: usize) -> Vec<GroupEntry> {
    let col_blocks = n.clamp(1, 3);
    let per = n.div_ceil(col_blocks);
    let mut entries = Vec::new();
    let (mut first, mut size) = (0, 1);
    while first < m {
        let rows = size.min(m - first).min(max_rows);
        for c in (0..n).step_by(per.max(1)) {
            entries.push(GroupEntry::rows(c, first, rows, c, per.min(n - c)));
        }
        first += rows;
        size = size * 2 + 1;
    }
    entries
}

/// `tiling`'s entries with every one-row entry of a whole column block made a pick entry of a part from expert 5 (its block's index as the pick), each followed by a pick entry whose expert lies outside the part (below, past, NaN), which must write nothing; the entries and the picks by entry.
pub fn tiling_with_picks(m: usize, n: usize, max_rows: usize) -> (Vec<GroupEntry>, Vec<f32>) {
    let per = n.div_ceil(n.clamp(1, 3));
    let blocks = n.div_ceil(per.max(1));
    let (mut entries, mut picks) = (Vec::new(), Vec::new());
    for e in tiling(m, n, max_rows) {
        if e.rows != 1 || e.cols != per {
            entries.push(e);
            picks.push(-1.0);
            continue;
        }
        entries.push(GroupEntry::pick(5, blocks, e.first, e.col, e.cols));
        picks.push((5 + e.w_row / per) as f32);
        entries.push(GroupEntry::pick(5, blocks, e.first, e.col, e.cols));
        picks.push([4.0, (5 + blocks) as f32, f32::NAN][entries.len() % 3]);
    }
    (entries, picks)
}

/// A table entry as the kernels resolve it, given its pick: the plain entry it stands for, or None when it writes nothing.
pub fn resolve(e: &GroupEntry, pick: f32) -> Option<GroupEntry> {
    let Some(experts) = e.pick else { return Some(*e) };
    let inside = pick >= e.w_row as f32 && pick < (e.w_row + experts) as f32;
    inside.then(|| GroupEntry::rows((pick as usize - e.w_row) * e.cols, e.first, 1, e.col, e.cols))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiling_covers_every_output_once() {
        for (m, n, cap) in [(1, 1, 64), (4, 512, 64), (17, 33, 5), (70, 1, 64), (130, 4096, 64), (300, 70, usize::MAX)] {
            let mut seen = vec![0u8; m * n];
            for e in tiling(m, n, cap) {
                assert!(e.rows <= cap);
                assert_eq!(e.w_row, e.col);
                for i in e.first..e.first + e.rows {
                    (e.col..e.col + e.cols).for_each(|j| seen[i * n + j] += 1);
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "{m}x{n}");
            let (entries, picks) = tiling_with_picks(m, n, cap);
            let resolved: Vec<GroupEntry> = entries.iter().zip(&picks).filter_map(|(e, &p)| resolve(e, p)).collect();
            assert_eq!(resolved, tiling(m, n, cap), "{m}x{n}");
            assert!(entries.iter().filter(|e| e.pick.is_some()).count() >= 2, "{m}x{n}");
        }
    }
}
