//! The vision tower and aligner on the tiny model: the CPU oracle and the GPU give the same bits in every tower tap and image row, for grids that fill their 3x3 cells and grids that pad them.
mod forward_support;

use forward_support::{patches, same_taps, tiny};
use lockstep::exec::{CpuExecutor, Executor, GpuExecutor};
use lockstep::gpu::{DeviceChoice, Gpu};
use lockstep::model::forward::vision::{encode_image, ImagePatches};
use lockstep::model::forward::Model;
use lockstep::model::taps::Taps;


fn encode<E: Executor>(ex: &mut E, model: &Model, gh: usize, gw: usize, data: &[f32]) -> (Taps<f32>, Vec<f32>) {
    let mut taps = Taps::on();
    let rows = encode_image(ex, model, &ImagePatches { grid_h: gh, grid_w: gw, data }, &mut taps).expect("tower");
    (taps, ex.read(&rows).expect("read"))
}

#[test]
fn tower_bits_are_equal_on_the_cpu_and_the_gpu_for_full_and_padded_cells() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let vc = model.cfg.vision.clone().expect("the tiny model has a tower");
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    let mut c = CpuExecutor::new(&t.ckpt);
    let mut g = GpuExecutor::new(&gpu, &t.ckpt);
    let patch = 3 * vc.patch_size * vc.patch_size;
    for (i, (gh, gw)) in [(8usize, 8usize), (6, 9), (5, 7), (1, 1)].into_iter().enumerate() {
        let data = patches(gh * gw * patch, 11 + i as u64);
        let (tc, rc) = encode(&mut c, &model, gh, gw, &data);
        let (tg, rg) = encode(&mut g, &model, gh, gw, &data);
        let cells = gh.div_ceil(vc.downsample_ratio) * gw.div_ceil(vc.downsample_ratio);
        assert_eq!(rc.len(), cells * model.cfg.hidden_size, "{gh}x{gw}: image rows");
        assert!(rc.iter().any(|&v| v != 0.0), "{gh}x{gw}: image rows are all zero");
        let compared = same_taps(i, &tc, &tg);
        assert!(compared >= 13 * vc.num_hidden_layers + 5, "{gh}x{gw}: {compared} taps compared");
        assert!(rc.iter().zip(&rg).all(|(a, b)| a.to_bits() == b.to_bits()), "{gh}x{gw}: image rows differ between the cpu and the gpu");
    }
}

#[test]
fn a_model_without_a_tower_refuses_an_image_with_an_error() {
    let t = tiny();
    let mut cfg = t.cfg.clone();
    cfg.vision = None;
    let model = Model::new(cfg, &t.ckpt, t.map.clone()).expect("model");
    let mut c = CpuExecutor::new(&t.ckpt);
    let data = patches(588, 1);
    let err = encode_image(&mut c, &model, &ImagePatches { grid_h: 1, grid_w: 1, data: &data }, &mut Taps::default()).err().expect("an error");
    assert!(err.to_string().contains("no vision tower"), "{err}");
}
