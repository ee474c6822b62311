//! Batch invariance on the GPU executor (default adapter, lavapipe in CI): sequences sharing a round get the CPU oracle's alone bits, in any batch order.
mod batch_support;
mod forward_support;

use batch_support::{alone, batched, orders, same, schedule};
use forward_support::tiny;
use lockstep::exec::{CpuExecutor, GpuExecutor};
use lockstep::model::forward::Model;
use lockstep::gpu::{DeviceChoice, Gpu};

#[test]
fn gpu_rounds_of_four_sequences_equal_the_cpu_oracle_alone_in_any_batch_order() {
    let t = tiny();
    let model = Model::new(t.cfg.clone(), &t.ckpt, t.map.clone()).expect("model");
    let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe: mesa-vulkan-drivers)");
    let rounds = schedule();
    let want = alone(&mut CpuExecutor::new(&t.ckpt), &model, &rounds);
    for (name, order) in orders().into_iter().filter(|(n, _)| *n != "listed") {
        let got = batched(&mut GpuExecutor::new(&gpu, &t.ckpt), &model, &rounds, order);
        same(&format!("gpu {name}"), &want, &got);
    }
}
