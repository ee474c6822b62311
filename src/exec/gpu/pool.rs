//! Reuse of scratch buffers: outputs and small uploads take a buffer no tensor or recorded dispatch holds any more, so a step allocates almost nothing.
use crate::gpu::{Buf, Gpu, GpuError};
use std::collections::HashMap;

/// Flushes a free buffer stays pooled without being handed out again.
const KEEP_FLUSHES: u64 = 16;

/// The NaN pattern debug builds write into a reused buffer, so a kernel that leaves an element unwritten shows.
const POISON: u32 = 0x7fa0_0bad;

struct Entry {
    buf: Buf,
    used: u64,
}

/// Buffers by padded size; an entry is free when the pool holds its only clone.
pub(crate) struct Pool {
    sizes: HashMap<u64, Vec<Entry>>,
    flushes: u64,
    poison: bool,
}

impl Pool {
    /// An empty pool; `poison` fills every reused buffer with NaNs first.
    pub(crate) fn new(poison: bool) -> Pool {
        Pool { sizes: HashMap::new(), flushes: 0, poison }
    }

    /// A buffer of at least `bytes` (rounded up to 16) with unspecified contents: a free pooled one, else a new one.
    pub(crate) fn take(&mut self, gpu: &Gpu, bytes: u64) -> Result<Buf, GpuError> {
        let size = bytes.max(16).div_ceil(16) * 16;
        let list = self.sizes.entry(size).or_default();
        if let Some(e) = list.iter_mut().find(|e| e.buf.is_unshared()) {
            e.used = self.flushes;
            if self.poison {
                gpu.fill_u32(&e.buf, POISON);
            }
            return Ok(e.buf.clone());
        }
        let buf = gpu.alloc(size)?;
        list.push(Entry { buf: buf.clone(), used: self.flushes });
        Ok(buf)
    }

    /// A buffer holding `data` (zero-padded to 16 bytes), pooled like `take`.
    pub(crate) fn upload(&mut self, gpu: &Gpu, data: &[u8]) -> Result<Buf, GpuError> {
        let buf = self.take(gpu, data.len() as u64)?;
        gpu.write(&buf, data);
        Ok(buf)
    }

    /// Drops every free buffer (after a long prefill, so decode does not pay for freeing its scratch later).
    pub(crate) fn release_free(&mut self) {
        self.sizes.retain(|_, list| {
            list.retain(|e| !e.buf.is_unshared());
            !list.is_empty()
        });
    }

    /// Counts one flush and drops free buffers not handed out during the last `KEEP_FLUSHES` flushes; returns whether any was dropped.
    pub(crate) fn flushed(&mut self) -> bool {
        self.flushes += 1;
        let oldest = self.flushes.saturating_sub(KEEP_FLUSHES);
        let mut dropped = false;
        self.sizes.retain(|_, list| {
            let before = list.len();
            list.retain(|e| !e.buf.is_unshared() || e.used >= oldest);
            dropped |= list.len() < before;
            !list.is_empty()
        });
        dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::DeviceChoice;

    #[test]
    fn a_buffer_returns_only_when_unshared_poisoned_and_trimmed_after_idle_flushes() {
        let gpu = Gpu::open(&DeviceChoice::Default).expect("a GPU adapter (lavapipe: mesa-vulkan-drivers)");
        let mut pool = Pool::new(true);
        let a = pool.upload(&gpu, &[1u8; 40]).expect("upload");
        let b = pool.take(&gpu, 48).expect("take");
        assert_ne!(a.buffer, b.buffer, "a held buffer is not handed out twice");
        drop(a);
        let c = pool.take(&gpu, 33).expect("take");
        assert!(c.bytes == 48 && gpu.read_u32(&c).expect("read").iter().all(|&w| w == POISON), "reused and poisoned");
        drop((b, c));
        let dropped: Vec<bool> = (0..=KEEP_FLUSHES).map(|_| pool.flushed()).collect();
        assert!(pool.sizes.is_empty() && dropped.iter().filter(|&&d| d).count() == 1, "idle free buffers are dropped once: {dropped:?}");
    }
}
