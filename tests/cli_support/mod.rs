//! Helpers for the command-line tests: the built binary, temp dirs removed on drop, tiny models from `make-tiny`.
use std::path::PathBuf;
use std::process::{Command, Output};

/// A directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the `lockstep` binary with `args`.
pub fn lockstep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstep")).args(args).env("RUST_BACKTRACE", "0").output().expect("run lockstep")
}

/// A fresh temp dir path `lockstep-{suite}-{tag}-{pid}`, removed when dropped.
pub fn temp(suite: &str, tag: &str) -> TempDir {
    let dir = std::env::temp_dir().join(format!("lockstep-{suite}-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    TempDir(dir)
}

/// A tiny model written by `lockstep make-tiny --seed seed` into a fresh temp dir.
pub fn tiny_model(suite: &str, tag: &str, seed: &str) -> TempDir {
    let dir = temp(suite, tag);
    let out = lockstep(&["make-tiny", dir.0.to_str().expect("utf-8 temp dir"), "--seed", seed]);
    assert!(out.status.success(), "make-tiny failed: {}", String::from_utf8_lossy(&out.stderr));
    dir
}

/// A `w` x `h` RGB image of seeded noise (the same pixels for the same seed).
#[allow(dead_code)]
pub fn noise_rgb(w: u32, h: u32, seed: u64) -> image::RgbImage {
    let mut s = seed;
    let px: Vec<u8> = (0..w * h * 3)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 56) as u8
        })
        .collect();
    image::RgbImage::from_raw(w, h, px).expect("pixels")
}
