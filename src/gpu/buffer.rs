//! Device buffers: plain storage buffers, and row-aligned splits so no bound range reaches 2 GiB.
use super::{Gpu, GpuError};
use std::sync::Arc;
use wgpu::util::DeviceExt;

/// The largest range any kernel binds: below 2 GiB on every device.
pub const MAX_BINDING_BYTES: u64 = (1 << 31) - 256;

/// A storage buffer and its length in bytes; `holders` counts the clones alive (a pool reuses a buffer only when it holds the last one).
#[derive(Clone, Debug)]
pub struct Buf {
    pub buffer: wgpu::Buffer,
    pub bytes: u64,
    holders: Arc<()>,
}

impl Buf {
    /// Whether no clone other than this one is alive.
    pub fn is_unshared(&self) -> bool {
        Arc::strong_count(&self.holders) == 1
    }
}

/// A tensor split along its rows into buffers that each bind below the device's and the 2 GiB limit.
#[derive(Clone, Debug)]
pub struct SplitBuf {
    pub parts: Vec<Buf>,
    pub rows_per_part: usize,
    pub row_bytes: usize,
}

const USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

fn padded(n: u64) -> u64 {
    n.max(16).div_ceil(16) * 16
}

impl Gpu {
    /// The largest range one binding may cover on this device.
    pub fn max_binding(&self) -> u64 {
        self.limits.max_storage_buffer_binding_size.min(MAX_BINDING_BYTES)
    }

    /// An uninitialised storage buffer of `bytes` (rounded up to 16).
    pub fn alloc(&self, bytes: u64) -> Result<Buf, GpuError> {
        let size = padded(bytes);
        if size > self.max_binding() {
            return Err(GpuError::TooBig { bytes: size, limit: self.max_binding() });
        }
        let buffer = self.out_of_memory_checked(size, || {
            self.device.create_buffer(&wgpu::BufferDescriptor { label: None, size, usage: USAGE, mapped_at_creation: false })
        })?;
        Ok(Buf { buffer, bytes: size, holders: Arc::new(()) })
    }

    /// A storage buffer holding `data` (zero-padded to 16 bytes).
    pub fn upload(&self, data: &[u8]) -> Result<Buf, GpuError> {
        let size = padded(data.len() as u64);
        if size > self.max_binding() {
            return Err(GpuError::TooBig { bytes: size, limit: self.max_binding() });
        }
        let mut bytes = data.to_vec();
        bytes.resize(size as usize, 0);
        let buffer = self.out_of_memory_checked(size, || {
            self.device.create_buffer_init(&wgpu::util::BufferInitDescriptor { label: None, contents: &bytes, usage: USAGE })
        })?;
        Ok(Buf { buffer, bytes: size, holders: Arc::new(()) })
    }

    /// `make`'s buffer, or an error naming its size where the device had no memory for it.
    fn out_of_memory_checked(&self, bytes: u64, make: impl FnOnce() -> wgpu::Buffer) -> Result<wgpu::Buffer, GpuError> {
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let buffer = make();
        match pollster::block_on(scope.pop()) {
            None => Ok(buffer),
            Some(_) => Err(GpuError::OutOfMemory { bytes }),
        }
    }

    /// A storage buffer holding a slice of plain values.
    pub fn upload_pod<T: bytemuck::Pod>(&self, data: &[T]) -> Result<Buf, GpuError> {
        self.upload(bytemuck::cast_slice(data))
    }

    /// Uploads `rows` rows of `row_bytes` each, split into parts below the binding limit.
    pub fn upload_split(&self, data: &[u8], row_bytes: usize) -> Result<SplitBuf, GpuError> {
        let row_bytes = row_bytes.max(1);
        let rows_per_part = ((self.max_binding() as usize / row_bytes) / 32 * 32).max(1);
        let parts = data
            .chunks(rows_per_part * row_bytes)
            .map(|c| self.upload(c))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SplitBuf { parts, rows_per_part, row_bytes })
    }

    /// Overwrites the whole buffer with a repeated 32-bit pattern (NaN poison before a contract dispatch).
    pub fn fill_u32(&self, buf: &Buf, word: u32) {
        let words = vec![word; (buf.bytes / 4) as usize];
        self.queue.write_buffer(&buf.buffer, 0, bytemuck::cast_slice(&words));
    }

    /// Writes bytes at the start of a buffer.
    pub fn write(&self, buf: &Buf, data: &[u8]) {
        let mut bytes = data.to_vec();
        bytes.resize(padded(data.len() as u64) as usize, 0);
        self.queue.write_buffer(&buf.buffer, 0, &bytes);
    }

    /// Writes bytes at `offset` (a multiple of 4) of a buffer, zero-padded to 4 bytes.
    pub fn write_at(&self, buf: &Buf, offset: u64, data: &[u8]) {
        let mut bytes = data.to_vec();
        bytes.resize(data.len().div_ceil(4) * 4, 0);
        self.queue.write_buffer(&buf.buffer, offset, &bytes);
    }

    /// Copies a buffer back to the host (waits for the device; host time outside the wait counts as `read`).
    pub fn read(&self, buf: &Buf) -> Result<Vec<u8>, GpuError> {
        let t0 = std::time::Instant::now();
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: buf.bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(&buf.buffer, 0, &staging, 0, buf.bytes);
        self.queue.submit([enc.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r.is_ok());
        });
        super::add_since(&self.host.read, t0);
        self.wait()?;
        let t0 = std::time::Instant::now();
        if !rx.recv().unwrap_or(false) {
            return Err(GpuError::Map);
        }
        let view = staging.get_mapped_range(..).map_err(|_| GpuError::Map)?;
        let out = view.to_vec();
        drop(view);
        staging.unmap();
        super::add_since(&self.host.read, t0);
        Ok(out)
    }

    /// Reads a buffer back as 32-bit words.
    pub fn read_u32(&self, buf: &Buf) -> Result<Vec<u32>, GpuError> {
        Ok(bytemuck::pod_collect_to_vec(&self.read(buf)?))
    }
}
