// Exact top-k of a row by (value desc, index asc), order-free: -inf kept or dropped as the caller asks, radix select of the k-th key over 8-bit digits, then one pass in ascending index keeping ties by lower index.
const RS_NEG_INF_KEY: u32 = 0x007fffffu;
var<workgroup> rs_hist: array<atomic<u32>, 256>;
var<workgroup> rs_finite: atomic<u32>;
var<workgroup> rs_scan: array<u32, 256>;
var<workgroup> rs_pick: vec4<u32>;

// Keys under `mask` above `prefix` are kept, and of the `ties` equal to it the first `need` by index; `kept` is the total.
struct RsThreshold { prefix: u32, mask: u32, need: u32, ties: u32, kept: u32 }

// Order-preserving key of a value (larger value, larger key); -0 and +0 share one key.
fn rs_key(v: f32) -> u32 {
    let u = bitcast<u32>(v);
    let c = select(u, 0u, u == 0x80000000u);
    return select(c | 0x80000000u, ~c, (c & 0x80000000u) != 0u);
}

// Threshold of the top k (min(k, finite) when `drop_neg_inf`) of elements 0..n given by sel_value(row, i); every thread of the 256 calls this.
fn rs_threshold(row: u32, n: u32, k: u32, drop_neg_inf: bool, lid: u32) -> RsThreshold {
    var t = RsThreshold(0u, 0u, 0u, n, 0u);
    if (lid == 0u) { atomicStore(&rs_finite, 0u); }
    for (var digit = 0u; digit < 4u; digit++) {
        let shift = 24u - 8u * digit;
        atomicStore(&rs_hist[lid], 0u);
        workgroupBarrier();
        var finite = 0u;
        for (var i = lid; i < n; i += 256u) {
            let key = rs_key(sel_value(row, i));
            finite += select(0u, 1u, key != RS_NEG_INF_KEY);
            if ((key & t.mask) == t.prefix) { atomicAdd(&rs_hist[(key >> shift) & 255u], 1u); }
        }
        if (digit == 0u) { atomicAdd(&rs_finite, finite); }
        workgroupBarrier();
        if (lid == 0u) {
            var need = t.need;
            if (digit == 0u) { need = select(k, min(k, atomicLoad(&rs_finite)), drop_neg_inf); }
            var above = 0u;
            var b = 255u;
            loop {
                let h = atomicLoad(&rs_hist[b]);
                if (above + h >= need || b == 0u) {
                    rs_pick = vec4<u32>(b, need - above, h, need);
                    break;
                }
                above += h;
                b -= 1u;
            }
        }
        let pick = workgroupUniformLoad(&rs_pick);
        if (digit == 0u) { t.kept = pick.w; }
        t = RsThreshold(t.prefix | (pick.x << shift), t.mask | (255u << shift), pick.y, pick.z, t.kept);
        if (t.need == t.ties) { break; }
    }
    return t;
}

// Ties taken among the first x tied elements: the lowest indices (the highest under the tie control).
fn rs_taken(x: u32, t: RsThreshold) -> u32 {
    if (CONTROL == RS_TIES_HIGH) {
        let s = t.ties - t.need;
        return max(x, s) - s;
    }
    return min(x, t.need);
}

// Exclusive prefix sum over the workgroup (x) and the total (y); integer, so order-free.
fn rs_scan_excl(v: u32, lid: u32) -> vec2<u32> {
    rs_scan[lid] = v;
    workgroupBarrier();
    for (var off = 1u; off < 256u; off <<= 1u) {
        let add = select(0u, rs_scan[select(0u, lid - off, lid >= off)], lid >= off);
        workgroupBarrier();
        rs_scan[lid] += add;
        workgroupBarrier();
    }
    let r = vec2<u32>(rs_scan[lid] - v, rs_scan[255]);
    workgroupBarrier();
    return r;
}

// Calls sel_emit(row, i, kept, slot) for every element 0..n in ascending chunks of 256; kept elements get slots 0.. in index order.
fn rs_walk(row: u32, n: u32, t: RsThreshold, lid: u32) {
    var base = 0u;
    var seen = 0u;
    for (var c = 0u; c < n; c += 256u) {
        let i = c + lid;
        var flags = 0u;
        if (i < n) {
            let mk = rs_key(sel_value(row, i)) & t.mask;
            flags = select(select(0u, 0x10000u, mk == t.prefix), 1u, mk > t.prefix);
        }
        let sc = rs_scan_excl(flags, lid);
        let x = seen + (sc.x >> 16u);
        let tied = (flags >> 16u) != 0u;
        let kept = (flags & 1u) != 0u || (tied && rs_taken(x + 1u, t) > rs_taken(x, t));
        let slot = base + (sc.x & 0xffffu) + rs_taken(x, t) - rs_taken(seen, t);
        if (i < n) { sel_emit(row, i, kept, slot); }
        let chunk_ties = sc.y >> 16u;
        base += (sc.y & 0xffffu) + rs_taken(seen + chunk_ties, t) - rs_taken(seen, t);
        seen += chunk_ties;
    }
}
