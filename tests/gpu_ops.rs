//! The GPU executor's ops equal the CPU oracle executor's bit for bit, op by op, on the tiny model's weights and random bf16 inputs.
mod forward_support;

use forward_support::tiny;
use lockstep::exec::{CpuExecutor, Executor, GpuExecutor, Out, Stack};
use lockstep::gpu::{DeviceChoice, Gpu};
use lockstep::model::forward::routed_experts;
use lockstep::numerics::round_bf16;

/// Random bf16 values `[rows, cols]` of about unit size from a fixed seed.
fn randn(rows: usize, cols: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..rows * cols)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            round_bf16(((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 3.0)
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn dense_ops_equal_the_cpu_oracle_bit_for_bit_on_gemv_and_tiled_row_counts() {
    let t = tiny();
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    let mut g = GpuExecutor::new(&gpu, &t.ckpt);
    let mut c = CpuExecutor::new(&t.ckpt);
    let d = t.cfg.hidden_size;
    let inter = t.cfg.moe_intermediate_size;
    let modules = [
        ("layers.0.attn.wq_a", d),
        ("layers.0.ffn.shared_experts.w1", d),
        ("layers.0.ffn.experts.3.w2", inter),
        ("layers.2.attn.indexer.weights_proj", d),
        ("head", d),
    ];
    let mut checked = 0;
    for (rows, seed) in [(1usize, 1u64), (5, 2), (13, 3)] {
        for (module, k) in modules {
            let x = randn(rows, k, seed);
            for out in [Out::Bf16, Out::F32] {
                let xc = c.upload(rows, k, &x).expect("op");
                let yc = c.linear(&xc, module, out).expect("op");
                let xg = g.upload(rows, k, &x).expect("op");
                let yg = g.linear(&xg, module, out).expect("op");
                assert_eq!(g.dims(&yg), (yc.rows, yc.cols), "{module}");
                assert!(bits(&g.read(&yg).expect("op")) == bits(&yc.data), "linear {module} rows {rows} {out:?}");
                checked += 1;
            }
        }
        let x = randn(rows, d, seed + 10);
        let (xc, xg) = (c.upload(rows, d, &x).expect("op"), g.upload(rows, d, &x).expect("op"));
        for out in [Out::Bf16, Out::F32] {
            let yc = c.rmsnorm(&xc, "layers.1.attn_norm", 1e-20, out).expect("op");
            let yg = g.rmsnorm(&xg, "layers.1.attn_norm", 1e-20, out).expect("op");
            assert!(bits(&g.read(&yg).expect("op")) == bits(&yc.data), "rmsnorm rows {rows} {out:?}");
            let yc = c.scale(&xc, 0.3535, out).expect("op");
            let yg = g.scale(&xg, 0.3535, out).expect("op");
            assert!(bits(&g.read(&yg).expect("op")) == bits(&yc.data), "scale rows {rows} {out:?}");
            let y2 = randn(rows, d, seed + 20);
            let (bc, bg) = (c.upload(rows, d, &y2).expect("op"), g.upload(rows, d, &y2).expect("op"));
            let yc = c.add(&xc, &bc, out).expect("op");
            let yg = g.add(&xg, &bg, out).expect("op");
            assert!(bits(&g.read(&yg).expect("op")) == bits(&yc.data), "add rows {rows} {out:?}");
            checked += 3;
        }
        let u = randn(rows, d, seed + 30);
        let (uc, ug) = (c.upload(rows, d, &u).expect("op"), g.upload(rows, d, &u).expect("op"));
        let yc = c.swiglu(&xc, &uc, None, 1.5).expect("op");
        let yg = g.swiglu(&xg, &ug, None, 1.5).expect("op");
        assert!(bits(&g.read(&yg).expect("op")) == bits(&yc.data), "swiglu rows {rows}");
        checked += 1;
    }
    assert_eq!(checked, 3 * (modules.len() * 2 + 7));
}

#[test]
fn block_linear_equals_the_cpu_oracle_on_one_row_entries_and_on_gathered_tiles() {
    let t = tiny();
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    let mut g = GpuExecutor::new(&gpu, &t.ckpt);
    let mut c = CpuExecutor::new(&t.ckpt);
    let cols = t.cfg.num_attention_heads * t.cfg.head_dim;
    let (groups, rank) = (t.cfg.o_groups, t.cfg.o_lora_rank);
    for (rows, seed) in [(1usize, 41u64), (3, 42), (8, 43), (9, 44), (13, 45), (40, 46), (70, 47)] {
        let x = randn(rows, cols, seed);
        let xc = c.upload(rows, cols, &x).expect("op");
        let yc = c.block_linear(&xc, "layers.0.attn.wo_a", groups, rank).expect("op");
        let xg = g.upload(rows, cols, &x).expect("op");
        let yg = g.block_linear(&xg, "layers.0.attn.wo_a", groups, rank).expect("op");
        assert_eq!(g.dims(&yg), (rows, groups * rank));
        assert!(bits(&g.read(&yg).expect("op")) == bits(&yc.data), "block_linear rows {rows}");
    }
    let xg = g.upload(2, cols, &randn(2, cols, 48)).expect("op");
    assert!(g.block_linear(&xg, "layers.0.attn.wo_a", groups + 1, rank).is_err(), "groups that do not divide the inputs");
}

#[test]
fn split_weights_and_tables_give_the_same_bits_as_whole_ones() {
    let t = tiny();
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    let mut whole = GpuExecutor::new(&gpu, &t.ckpt);
    let mut split = GpuExecutor::new(&gpu, &t.ckpt).split_at(4096);
    let mut c = CpuExecutor::new(&t.ckpt);
    let ids = [0u32, 5, 129_279, 77, 5];
    let e = c.embed("embed", &ids).expect("cpu embed");
    for g in [&mut whole, &mut split] {
        let y = g.embed("embed", &ids).expect("gpu embed");
        assert!(bits(&g.read(&y).expect("read")) == bits(&e.data), "embed");
        let x = g.upload(5, e.cols, &e.data).expect("upload");
        let logits = g.linear(&x, "head", Out::F32).expect("head");
        let xc = c.upload(5, e.cols, &e.data).expect("upload");
        assert!(bits(&g.read(&logits).expect("read")) == bits(&c.linear(&xc, "head", Out::F32).expect("cpu head").data), "head in parts");
    }
    assert!(g_err(&mut split, &ids).contains("outside"), "an id outside the table is an error");
}

/// The error text of an embed call.
fn g_err(g: &mut GpuExecutor, ids: &[u32]) -> String {
    let mut bad = ids.to_vec();
    bad.push(1 << 30);
    g.embed("embed", &bad).err().map(|e| e.to_string()).unwrap_or_default()
}

#[test]
fn the_executor_refuses_kernels_outside_its_registry_with_an_error() {
    let t = tiny();
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    assert!(GpuExecutor::new(&gpu, &t.ckpt).missing_kernels().is_empty(), "every kernel the forward dispatches is registered");
    let mut g = GpuExecutor::new(&gpu, &t.ckpt).only_kernels(&["act_quant", "gemm_e4m3", "round_bf16"]);
    assert!(g.missing_kernels().contains(&"rmsnorm"));
    let x = g.upload(2, t.cfg.hidden_size, &randn(2, t.cfg.hidden_size, 9)).expect("upload");
    let err = g.rmsnorm(&x, "layers.0.attn_norm", 1e-20, Out::Bf16).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("rmsnorm") && err.contains("not registered"), "{err}");
    assert!(g.linear(&x, "layers.0.attn.wq_a", Out::Bf16).is_ok(), "registered kernels still run");
}

#[test]
fn grouped_routed_experts_equal_the_oracle_for_few_and_many_rows_whole_and_split_into_stack_parts_routed_on_the_device_or_the_host() {
    let t = tiny();
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    let mut c = CpuExecutor::new(&t.ckpt);
    let (d, k, experts) = (t.cfg.hidden_size, t.cfg.num_experts_per_tok, t.cfg.n_routed_experts);
    for rows in [1, 4, 8, 9, 40, 90] {
        let x = randn(rows, d, 11);
        let shared = randn(rows, d, 12);
        let spread = |i: usize| (i * 5 + i / k) % experts;
        let heavy = |i: usize| if i % k == 0 { 0 } else { 1 + spread(i) % (experts - 1) };
        let ids: Vec<f32> = (0..rows * k).map(|i| if rows == 90 { heavy(i) } else { spread(i) } as f32).collect();
        let w: Vec<f32> = (0..rows * k).map(|i| round_bf16(0.25 + (i % 7) as f32 * 0.1)).collect();
        let prefix = "layers.1.ffn.experts";
        let (xt, it, wt, st) = (c.upload(rows, d, &x).unwrap(), c.upload(rows, k, &ids).unwrap(), c.upload(rows, k, &w).unwrap(), c.upload(rows, d, &shared).unwrap());
        let want = routed_experts(&mut c, &xt, &it, &wt, &st, prefix, experts, 10.0).expect("cpu").data;
        let expert_bytes = t.ckpt.get(&format!("{prefix}.0.w1.weight")).expect("w1").bytes.len() as u64;
        let mut counts = Vec::new();
        for split in [None, Some(2 * expert_bytes)] {
            let mut g = GpuExecutor::new(&gpu, &t.ckpt);
            if let Some(b) = split {
                g = g.split_at(b);
            }
            let (xt, it, wt, st) = (g.upload(rows, d, &x).unwrap(), g.upload(rows, k, &ids).unwrap(), g.upload(rows, k, &w).unwrap(), g.upload(rows, d, &shared).unwrap());
            let y = routed_experts(&mut g, &xt, &it, &wt, &st, prefix, experts, 10.0).expect("gpu routed experts");
            assert!(bits(&g.read(&y).expect("read")) == bits(&want), "routed experts, {rows} rows (gemv, small-tile and, with 90 rows on expert 0, 64-row tiles), binding limit {split:?}");
            counts.push(g.dispatches());
            if rows <= 8 && split.is_some() && !gpu.native_msl() {
                assert_eq!(counts[1], counts[0] + 3, "{rows} rows: a stack in four parts takes two grouped GEMMs a matrix, two parts each");
            }
            let waits = g.waits();
            let routes = g.route(&it, experts).expect("route");
            let table = g.dims(&routes.table);
            assert!(rows > 8 || g.waits() == waits, "routing {rows} rows reads nothing back");
            assert_eq!(table, if rows <= 8 { (rows * k, 1) } else { (table.0, 3) }, "{rows} rows: an expert per pick on the device, packed by expert on the host past 8");
            if rows <= 8 {
                continue;
            }
            let mut bad = ids.clone();
            bad[3] = experts as f32;
            let bt = g.upload(rows, k, &bad).unwrap();
            let err = routed_experts(&mut g, &xt, &bt, &wt, &st, prefix, experts, 10.0).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains("outside"), "an expert id past the last expert is an error: {err}");
        }
    }
}

#[test]
fn picks_r_times_the_rows_read_row_g_over_r_and_equal_the_rows_gathered_on_both_executors() {
    let t = tiny();
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    let mut c = CpuExecutor::new(&t.ckpt);
    let (d, k, experts) = (t.cfg.hidden_size, t.cfg.num_experts_per_tok, t.cfg.n_routed_experts);
    let stack = Stack { prefix: "layers.1.ffn.experts", matrix: "w1" };
    for rows in [1, 3, 8] {
        let x = randn(rows, d, 21 + rows as u64);
        let picks: Vec<f32> = (0..rows * k).map(|i| ((i * 7 + 3) % experts) as f32).collect();
        let gathered: Vec<f32> = (0..rows * k).flat_map(|g| x[g / k * d..(g / k + 1) * d].to_vec()).collect();
        let want = {
            let (xg, pt) = (c.upload(rows * k, d, &gathered).unwrap(), c.upload(rows * k, 1, &picks).unwrap());
            bits(&c.grouped_linear(&xg, &stack, &pt, Out::Bf16).expect("cpu gathered").data)
        };
        let (xt, pt) = (c.upload(rows, d, &x).unwrap(), c.upload(rows * k, 1, &picks).unwrap());
        assert!(bits(&c.grouped_linear(&xt, &stack, &pt, Out::Bf16).expect("cpu by row").data) == want, "cpu, {rows} rows");
        let mut g = GpuExecutor::new(&gpu, &t.ckpt);
        let (xt, pt) = (g.upload(rows, d, &x).unwrap(), g.upload(rows * k, 1, &picks).unwrap());
        let y = g.grouped_linear(&xt, &stack, &pt, Out::Bf16).expect("gpu by row");
        assert!(bits(&g.read(&y).expect("read")) == want, "gpu, {rows} rows, {k} picks a row");
        if rows > 1 {
            let odd = g.upload(rows * k + 1, 1, &[picks.clone(), vec![0.0]].concat()).unwrap();
            let err = g.grouped_linear(&xt, &stack, &odd, Out::Bf16).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains("whole number"), "picks that are not a whole number per row are an error: {err}");
        }
    }
}

#[test]
fn work_the_device_refuses_is_an_error_at_the_next_wait_not_a_panic_and_the_device_keeps_working() {
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    gpu.wait().expect("nothing refused yet");
    // A buffer mapped at creation must be a multiple of 4 bytes: made outside the device layer's checks, wgpu refuses it.
    let _bad = gpu.device.create_buffer(&wgpu::BufferDescriptor { label: None, size: 6, usage: wgpu::BufferUsages::MAP_WRITE, mapped_at_creation: true });
    let err = gpu.wait().expect_err("the refusal surfaces at the next wait");
    assert!(err.to_string().starts_with("the device refused work"), "{err}");
    gpu.wait().expect("a refusal is reported once");
    let b = gpu.upload_pod(&[1u32, 2, 3, 4]).expect("upload");
    assert_eq!(gpu.read_u32(&b).expect("read")[..4], [1, 2, 3, 4]);
}

#[test]
fn a_grouped_gemm_over_two_weight_buffers_refuses_entries_across_the_second_buffers_first_row_and_msl() {
    use lockstep::gpu::{Arg, Lang, Recorder};
    use lockstep::kernels::gemm::grouped::{record_grouped, table_words, GroupEntry, GroupedArgs, GroupedHi, GroupedTile};
    use lockstep::kernels::gemm::WeightFormat;
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    let (m, n, k) = (2, 64, 64);
    let buf = |bytes: usize| gpu.upload(&vec![0u8; bytes]).expect("upload");
    let (x, xs, w, w_hi, ws, out) = (buf(4 * m * k), buf(4 * m * k / 32), buf(n * k / 2), buf(n * k / 2), buf(2 * n * k / 32), buf(4 * m * n));
    let hi = Some(GroupedHi { w: &w_hi, row: n, scale_byte: n * k / 32 });
    let run = |entries: &[GroupEntry], lang: Lang| {
        let table = gpu.upload_pod(&table_words(entries)).expect("table");
        let a = GroupedArgs { fmt: WeightFormat::E2m1, m, k, x: &x, xs: Some(&xs), w: &w, ws: Some(Arg::Whole(&ws)), hi, out: &out, ldo: n, entries, table: &table, picks: &table, round: false };
        record_grouped(&mut Recorder::new(&gpu), &a, GroupedTile::Blocks, lang, 0).err().map(|e| e.to_string()).unwrap_or_default()
    };
    assert_eq!(run(&[GroupEntry::rows(0, 0, m, 0, n), GroupEntry::rows(n, 0, m, 0, n)], Lang::Wgsl), "", "entries on either side of the first row record");
    let err = run(&[GroupEntry::rows(n / 2, 0, m, 0, n)], Lang::Wgsl);
    assert!(err.contains("straddles"), "an entry across the second buffer's first row is an error: {err}");
    let err = run(&[GroupEntry::pick(0, 2, 0, 0, n / 3)], Lang::Wgsl);
    assert!(err.contains("straddles"), "picks whose experts do not end at the second buffer's first row are an error: {err}");
    let err = run(&[GroupEntry::rows(0, 0, m, 0, n)], Lang::Msl);
    assert!(err.contains("WGSL only"), "a second weight buffer in MSL is an error: {err}");
}

#[test]
fn a_gated_linear_equals_two_linears_and_a_swiglu_on_both_executors_for_decode_and_prefill_rows() {
    let t = tiny();
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    let mut c = CpuExecutor::new(&t.ckpt);
    let mut g = GpuExecutor::new(&gpu, &t.ckpt);
    let (gate, up) = ("layers.1.ffn.shared_experts.w1", "layers.1.ffn.shared_experts.w3");
    for rows in [1, 4, 8, 9] {
        let x = randn(rows, t.cfg.hidden_size, 40 + rows as u64);
        let xc = c.upload(rows, t.cfg.hidden_size, &x).unwrap();
        let (gc, uc) = (c.linear(&xc, gate, Out::Bf16).unwrap(), c.linear(&xc, up, Out::Bf16).unwrap());
        let want = bits(&c.swiglu(&gc, &uc, None, 10.0).unwrap().data);
        assert!(bits(&c.gated_linear(&xc, gate, up, 10.0).unwrap().data) == want, "cpu, {rows} rows");
        let xg = g.upload(rows, t.cfg.hidden_size, &x).unwrap();
        let a = g.gated_linear(&xg, gate, up, 10.0).expect("gpu gated linear");
        assert!(bits(&g.read(&a).expect("read")) == want, "gpu, {rows} rows (one grouped GEMM up to 8 rows, two GEMMs past)");
    }
    let xg = g.upload(1, t.cfg.hidden_size, &randn(1, t.cfg.hidden_size, 3)).unwrap();
    let err = g.gated_linear(&xg, gate, "layers.1.ffn.shared_experts.w9", 10.0).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("shared_experts.w9"), "a missing up projection is an error naming it: {err}");
}

#[test]
fn msl_grouped_gemms_over_a_stack_in_parts_bind_each_parts_scales_as_a_range_and_equal_the_oracle() {
    let t = tiny();
    let gpu = Gpu::open(&DeviceChoice::MetalEmu).expect("the MSL harness");
    let mut c = CpuExecutor::new(&t.ckpt);
    let (d, k, experts) = (t.cfg.hidden_size, t.cfg.num_experts_per_tok, t.cfg.n_routed_experts);
    let stack = Stack { prefix: "layers.1.ffn.experts", matrix: "w1" };
    let expert_bytes = t.ckpt.get("layers.1.ffn.experts.0.w1.weight").expect("w1").bytes.len() as u64;
    let mut g = GpuExecutor::new(&gpu, &t.ckpt).split_at(3 * expert_bytes);
    for rows in [1, 4] {
        let x = randn(rows, d, 60 + rows as u64);
        let picks: Vec<f32> = (0..rows * k).map(|i| ((i * 5 + 1) % experts) as f32).collect();
        let (xc, pc) = (c.upload(rows, d, &x).unwrap(), c.upload(rows * k, 1, &picks).unwrap());
        let want = bits(&c.grouped_linear(&xc, &stack, &pc, Out::Bf16).expect("cpu").data);
        let (xg, pg) = (g.upload(rows, d, &x).unwrap(), g.upload(rows * k, 1, &picks).unwrap());
        let y = g.grouped_linear(&xg, &stack, &pg, Out::Bf16).expect("metal-emu");
        assert!(bits(&g.read(&y).expect("read")) == want, "metal-emu, {rows} rows over three parts of a stack");
    }
}

#[test]
fn normed_linears_equal_two_linears_and_two_rmsnorms_on_both_executors_with_one_gemv_for_one_row() {
    let t = tiny();
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    let mut c = CpuExecutor::new(&t.ckpt);
    let (d, eps) = (t.cfg.hidden_size, t.cfg.rms_norm_eps as f32);
    let (a, b) = (["layers.0.attn.wq_a", "layers.0.attn.q_norm"], ["layers.0.attn.wkv", "layers.0.attn.kv_norm"]);
    for rows in [1, 3] {
        let x = randn(rows, d, 70 + rows as u64);
        let xc = c.upload(rows, d, &x).unwrap();
        let (qa, ka) = lockstep::exec::normed_linears_apart(&mut c, &xc, a, b, eps).expect("cpu apart");
        let (qc, kc) = c.normed_linears(&xc, a, b, eps).expect("cpu");
        assert!(bits(&qc.data) == bits(&qa.data) && bits(&kc.data) == bits(&ka.data), "cpu, {rows} rows");
        let mut apart = GpuExecutor::new(&gpu, &t.ckpt);
        let xa = apart.upload(rows, d, &x).unwrap();
        let (qp, kp) = lockstep::exec::normed_linears_apart(&mut apart, &xa, a, b, eps).expect("gpu apart");
        assert!(bits(&apart.read(&qp).expect("read")) == bits(&qa.data) && bits(&apart.read(&kp).expect("read")) == bits(&ka.data), "gpu apart, {rows} rows");
        let mut g = GpuExecutor::new(&gpu, &t.ckpt);
        let xg = g.upload(rows, d, &x).unwrap();
        let (qg, kg) = g.normed_linears(&xg, a, b, eps).expect("gpu");
        assert!(bits(&g.read(&qg).expect("read")) == bits(&qa.data) && bits(&g.read(&kg).expect("read")) == bits(&ka.data), "gpu, {rows} rows");
        let fewer = usize::from(rows == 1);
        assert_eq!(g.dispatches() + fewer, apart.dispatches(), "{rows} rows: one GEMV over both weights for one row, two GEMVs past");
    }
    let xg = GpuExecutor::new(&gpu, &t.ckpt).upload(1, d, &randn(1, d, 5)).unwrap();
    let mut g = GpuExecutor::new(&gpu, &t.ckpt);
    let err = g.normed_linears(&xg, a, ["layers.0.attn.wkv", "layers.0.attn.kv_norm9"], eps).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("kv_norm9"), "a missing norm is an error naming it: {err}");
}

#[test]
fn pooled_linears_equal_two_linears_and_a_compress_pool_on_both_executors_with_one_gemv_for_one_row() {
    let t = tiny();
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    let mut c = CpuExecutor::new(&t.ckpt);
    let (d, hd) = (t.cfg.hidden_size, t.cfg.head_dim);
    for (layer, rows, pending) in [(2, 1, 0), (2, 1, 1), (2, 3, 1)] {
        let m = [format!("layers.{layer}.attn.compressor.wkv"), format!("layers.{layer}.attn.compressor.wgate")];
        let m = [m[0].as_str(), m[1].as_str()];
        let (x, held) = (randn(rows, d, 80 + layer as u64), randn(1, 2 * hd, 90 + layer as u64));
        let xc = c.upload(rows, d, &x).unwrap();
        let mut pc = c.upload(1, 2 * hd, &held).unwrap();
        let want = lockstep::exec::pooled_linears_apart(&mut c, &xc, m, &mut pc, pending, 2).expect("cpu apart");
        let want = (bits(&want.data), bits(&pc.data));
        let mut pc = c.upload(1, 2 * hd, &held).unwrap();
        let got = c.pooled_linears(&xc, m, &mut pc, pending, 2).expect("cpu");
        assert!((bits(&got.data), bits(&pc.data)) == want, "cpu, layer {layer}, {rows} rows");
        let mut counts = Vec::new();
        for fused in [false, true] {
            let mut g = GpuExecutor::new(&gpu, &t.ckpt);
            let (xg, mut pg) = (g.upload(rows, d, &x).unwrap(), g.upload(1, 2 * hd, &held).unwrap());
            let y = if fused { g.pooled_linears(&xg, m, &mut pg, pending, 2) } else { lockstep::exec::pooled_linears_apart(&mut g, &xg, m, &mut pg, pending, 2) }.expect("gpu");
            assert!((bits(&g.read(&y).expect("read")), bits(&g.read(&pg).expect("read"))) == want, "gpu, layer {layer}, {rows} rows, fused {fused}: pooled rows and the partial group");
            counts.push(g.dispatches());
        }
        assert_eq!(counts[1] + usize::from(rows == 1), counts[0], "layer {layer}, {rows} rows: one GEMV over both weights for one row, two past");
    }
}
