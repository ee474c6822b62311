// A grouped table entry: weight row base, first x row, rows, output column base, columns; a pick entry (rows PICK | the experts it may pick, weight row base the first of them) is one row through the expert picks[entry] names, no columns when outside them. Weight rows from W_SPLIT on lie in the second buffer (hi), from its row 0.
const PICK: u32 = 0x80000000u;
override W_SPLIT: u32 = 0xffffffffu;
struct GroupRow { wbase: u32, first: u32, rows: u32, cbase: u32, cols: u32, hi: u32 }

fn group_entry(i: u32) -> GroupRow {
    let t = i * 5u;
    var g = GroupRow(table[t], table[t + 1u], table[t + 2u], table[t + 3u], table[t + 4u], 0u);
    if (g.rows >= PICK) {
        let e = picks[i];
        let inside = e >= f32(g.wbase) && e < f32(g.wbase + (g.rows - PICK));
        g.wbase = select(0u, (u32(e) - g.wbase) * g.cols, inside);
        g.cols = select(0u, g.cols, inside);
        g.rows = 1u;
    }
    let hi = g.wbase >= W_SPLIT;
    g.wbase = select(g.wbase, g.wbase - W_SPLIT, hi);
    g.hi = select(0u, 1u, hi);
    return g;
}
