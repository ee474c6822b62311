//! The kernel contract end to end on the default adapter (lavapipe in CI) and on the CPU oracle; the device's hash is recorded for `lockstep serve`.
use lockstep::contract::{fusion_inputs, probe_fusion, run_contract, ContractOptions};
use lockstep::gpu::{DeviceChoice, Gpu};

fn gpu() -> Gpu {
    Gpu::open(&DeviceChoice::from_flag_or_env(None)).expect("a GPU adapter (lavapipe in CI)")
}

#[test]
fn mul_rn_then_add_stays_unfused_on_this_device_for_inputs_where_fusion_differs() {
    let g = gpu();
    for [x, y, z] in fusion_inputs(4096) {
        assert_ne!(x.mul_add(y, z).to_bits(), (x * y + z).to_bits(), "inputs must tell fused from unfused");
    }
    let p = probe_fusion(&g).expect("probe runs");
    eprintln!("{}: {p}", g.describe());
    assert!(p.mul_rn_unfused, "mul_rn(a,b)+c fused on {}", g.describe());
}

#[test]
fn every_kernel_passes_all_gates_with_every_control_red_and_hashes_like_the_cpu_oracle() {
    let g = gpu();
    let kernels = lockstep::kernels::registry();
    let opts = ContractOptions { hash: true, ..Default::default() };
    let device = run_contract(Some(&g), &kernels, &opts).expect("contract runs on the device");
    println!("{device}");
    assert!(device.ok(), "{device}");
    for l in &device.lines {
        assert!(l.controls_red >= 3, "{} {} has fewer than 3 controls caught on this device", l.kernel, l.variant);
    }
    let cpu = run_contract(None, &kernels, &opts).expect("contract runs on the CPU oracle");
    assert!(cpu.ok(), "{cpu}");
    assert_eq!(device.hash, cpu.hash, "device and CPU oracle outputs differ");
    let hash = device.hash.expect("a hash");
    let record = lockstep::cli::serve::record_contract_hash(Some(&g), &hash).expect("the hash recorded for `lockstep serve`");
    eprintln!("HASH {hash} on {}, recorded in {}", g.describe(), record.display());
}
