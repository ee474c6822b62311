//! The registry is the only list: the contract's kernels, the shader list and the forward's kernel list all come from it, nothing is named by hand here, and every source says its language.
mod forward_support;

use forward_support::{patches, prompt, tiny};
use lockstep::engine::{Session, Span, Work};
use lockstep::model::forward::vision::{span_len, ImagePatches};
use lockstep::exec::GpuExecutor;
use lockstep::gpu::{DeviceChoice, Gpu, Lang};
use lockstep::kernels::registry::{self, all, forward_kernels, registry, INSTRUMENTS};
use lockstep::model::forward::{LogitRows, Model};
use lockstep::model::taps::Taps;
use std::collections::BTreeSet;

#[test]
fn every_kernel_has_a_wgsl_reference_first_and_every_shader_comes_from_a_variant_or_an_instrument() {
    let kernels = registry();
    let names: BTreeSet<&str> = kernels.iter().map(|k| k.name()).collect();
    assert_eq!(names.len(), kernels.len(), "kernel names are unique");
    for k in &kernels {
        let v = k.variants();
        assert!(!v.is_empty() && v[0].lang() == Lang::Wgsl, "{}: the first variant is the WGSL reference", k.name());
        assert!(v.iter().all(|v| !v.shaders.is_empty() && v.shaders.iter().all(|s| s.lang == v.lang())), "{}: each variant has sources of one language", k.name());
    }
    let shaders = all();
    for (kernel, v) in registry::variants() {
        assert!(v.shaders.iter().all(|s| shaders.iter().any(|x| x.same(s))), "{kernel}/{}: its shaders are listed", v.name);
    }
    let from_variants = |s: &lockstep::gpu::Shader| registry::variants().iter().any(|(_, v)| v.shaders.iter().any(|x| x.same(s)));
    assert!(shaders.iter().all(|s| from_variants(s) || INSTRUMENTS.iter().any(|x| x.same(s))), "nothing is listed that no variant or instrument compiles");
    assert!(forward_kernels().iter().all(|k| names.contains(k)), "the forward's kernels are registered kernels");
}

#[test]
fn the_forward_with_an_image_compiles_exactly_the_registered_forward_kernels_and_only_listed_shaders() {
    let t = tiny();
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe in CI)");
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let mut s = Session::new(GpuExecutor::new(&gpu, &t.ckpt), &model).expect("session");
    assert!(s.ex.missing_kernels().is_empty(), "every forward kernel is registered: {:?}", s.ex.missing_kernels());
    s.run(&prompt(40), LogitRows::Last, &mut Taps::default()).expect("prefill");
    s.run(&[77], LogitRows::Last, &mut Taps::default()).expect("decode");
    let vc = model.cfg.vision.clone().expect("the tiny model has a tower");
    let data = patches(8 * 8 * 3 * vc.patch_size * vc.patch_size, 3);
    let image = s.add_image(&ImagePatches { grid_h: 8, grid_w: 8, data: &data }, 3, 3, &mut Taps::default()).expect("the tower");
    let seq = s.seq;
    let span = [Span::Image { image, from: 0, len: span_len(3, 3) }];
    s.round(&[Work { seq, input: &span, rows: LogitRows::Last }], &mut Taps::default()).expect("an image span");
    let compiled = gpu.compiled_shaders();
    let listed = all();
    for sh in &compiled {
        assert!(listed.iter().any(|x| x.same(sh)), "{}/{} ran but the registry does not list it", sh.kernel, sh.variant);
    }
    let dispatched: BTreeSet<&str> = compiled.iter().map(|s| s.kernel).collect();
    let forward: BTreeSet<&str> = forward_kernels().into_iter().collect();
    assert_eq!(dispatched, forward, "the forward dispatches every kernel the registry marks as the forward's, and no other");
}

#[test]
fn a_profile_names_each_stage_of_a_variant_that_dispatches_several_sources_and_one_line_otherwise() {
    let mut seen = std::collections::HashSet::new();
    for (kernel, v) in registry::variants() {
        for s in v.shaders {
            let label = registry::stage_label(kernel, v.name, s.source);
            if v.shaders.len() == 1 {
                assert_eq!(label, format!("{kernel}/{}", v.name));
            } else {
                assert!(label.starts_with(&format!("{kernel}/{}.", v.name)), "{label}");
            }
            assert!(seen.insert(label.clone()), "{label} names two sources");
        }
    }
    let split: Vec<String> = registry::variants().into_iter().filter(|(k, v)| *k == "sparse_attention" && v.name == "split").flat_map(|(k, v)| v.shaders.iter().map(move |s| registry::stage_label(k, v.name, s.source))).collect();
    assert_eq!(split, ["sparse_attention/split.0", "sparse_attention/split.1", "sparse_attention/split.2", "sparse_attention/split.3"]);
}
