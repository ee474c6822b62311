//! The wgpu device layer: adapter choice, buffers, the pipeline cache, the recorder, readback, timestamps.
mod adapter;
mod binds;
mod buffer;
pub mod msl;
pub mod msl_emu;
mod pipeline;
mod recorder;
mod shader;

pub use adapter::{list_adapters, AdapterSummary, DeviceChoice};
pub use buffer::{Buf, SplitBuf, MAX_BINDING_BYTES};
pub use pipeline::PipelineKey;
pub use shader::{Lang, Shader, WGSL_LIB};
pub(crate) use shader::msl_lib;
pub use recorder::{Arg, Recorder, Submitted};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Errors of the device layer.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("no adapter matches --device {0:?}; `lockstep devices` lists them")]
    NoAdapter(String),
    #[error("requesting a device from {adapter:?} failed: {source}")]
    RequestDevice { adapter: String, source: wgpu::RequestDeviceError },
    #[error("waiting for the device failed: {0}")]
    Poll(String),
    #[error("mapping a readback buffer failed")]
    Map,
    #[error("kernel {kernel}: {message}")]
    Shader { kernel: String, message: String },
    #[error("buffer of {bytes} bytes exceeds what the device allows ({limit} bytes)")]
    TooBig { bytes: u64, limit: u64 },
    #[error("the device is out of memory for a buffer of {bytes} bytes")]
    OutOfMemory { bytes: u64 },
    #[error("the device refused work submitted since the last wait: {0}")]
    Refused(String),
}

/// One opened device with its queue, limits and pipeline cache.
pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    pub features: wgpu::Features,
    pipelines: Mutex<pipeline::Cache>,
    /// Host time spent in each phase of recording, submitting and reading back.
    pub host: HostTimes,
    binds: Mutex<binds::Binds>,
    /// The MSL harness's kernels when this device emulates Metal (`--device metal-emu`).
    pub(crate) emu: Option<msl_emu::EmuDevice>,
    /// Pass timestamps no submit in flight holds, for the next submits.
    stamps: Mutex<Vec<recorder::PassStamps>>,
    /// The first error wgpu reported outside an error scope since the last wait (reported by that wait, not a panic).
    refused: Arc<Mutex<Option<String>>>,
}

/// Host nanoseconds by phase: recording dispatches, building bind groups, encoding and submitting, waiting for the device, reading buffers back.
#[derive(Debug, Default)]
pub struct HostTimes {
    pub record: AtomicU64,
    pub bind: AtomicU64,
    pub submit: AtomicU64,
    pub wait: AtomicU64,
    pub read: AtomicU64,
}

impl HostTimes {
    /// Milliseconds of each phase as (name, ms).
    pub fn snapshot(&self) -> [(&'static str, f64); 5] {
        let ms = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 * 1e-6;
        [("record", ms(&self.record)), ("bind", ms(&self.bind)), ("submit", ms(&self.submit)), ("wait", ms(&self.wait)), ("read", ms(&self.read))]
    }
}

/// Adds the time since `t0` to `counter`.
pub(crate) fn add_since(counter: &AtomicU64, t0: Instant) {
    counter.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

impl Gpu {
    /// Opens the adapter chosen by `choice` with its full limits and timestamp queries where offered.
    pub fn open(choice: &DeviceChoice) -> Result<Gpu, GpuError> {
        let instance = adapter::instance();
        let adapter = adapter::choose(&instance, choice)?;
        let mut info = adapter.get_info();
        // on Metal every kernel is passed through as MSL, so Metal's default fast math never compiles one
        let metal = if adapter.get_info().backend == wgpu::Backend::Metal { wgpu::Features::PASSTHROUGH_SHADERS } else { wgpu::Features::empty() };
        let wanted = wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS | metal;
        let features = adapter.features() & wanted;
        let limits = adapter.limits();
        let desc = wgpu::DeviceDescriptor {
            label: Some("lockstep"),
            required_features: features,
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        };
        let (device, queue) = pollster::block_on(adapter.request_device(&desc))
            .map_err(|source| GpuError::RequestDevice { adapter: info.name.clone(), source })?;
        if info.backend == wgpu::Backend::Metal && !features.contains(wgpu::Features::PASSTHROUGH_SHADERS) {
            return Err(GpuError::NoAdapter(format!("{} (Metal without passthrough shaders: its kernels would compile with fast math)", info.name)));
        }
        let refused: Arc<Mutex<Option<String>>> = Arc::default();
        let slot = refused.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            slot.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(|| e.to_string());
        }));
        let emu = (*choice == DeviceChoice::MetalEmu).then(msl_emu::EmuDevice::default);
        if emu.is_some() {
            info.name = format!("metal-emu (MSL harness, buffers on {})", info.name);
        }
        Ok(Gpu { device, queue, info, limits, features, pipelines: Mutex::new(pipeline::Cache::default()), host: HostTimes::default(), binds: Mutex::default(), stamps: Mutex::default(), emu, refused })
    }

    /// Whether dispatches run in the MSL harness.
    pub fn is_emulated(&self) -> bool {
        self.emu.is_some()
    }

    /// Workgroups a dispatch aims to spread its work over: hundreds on a GPU, a few large ones on a CPU adapter (lavapipe), where each workgroup costs a fixed time of its own.
    pub fn spread(&self) -> usize {
        if self.info.device_type == wgpu::DeviceType::Cpu {
            8
        } else {
            256
        }
    }

    /// Short description: backend and adapter name.
    pub fn describe(&self) -> String {
        if self.emu.is_some() {
            return format!("backend=metal-emu device={:?}", self.info.name);
        }
        format!("backend={} device={:?}", format!("{:?}", self.info.backend).to_lowercase(), self.info.name)
    }

    /// Whether timestamp queries can time command buffers.
    pub fn has_timestamps(&self) -> bool {
        self.features.contains(wgpu::Features::TIMESTAMP_QUERY)
    }

    /// Blocks until all submitted work is done; fails if the device refused any of it (the refusal is reported once).
    pub fn wait(&self) -> Result<(), GpuError> {
        let t0 = Instant::now();
        let r = self
            .device
            .poll(wgpu::PollType::Wait { submission_index: None, timeout: None })
            .map(|_| ())
            .map_err(|e| GpuError::Poll(e.to_string()));
        add_since(&self.host.wait, t0);
        r?;
        match self.refused.lock().unwrap_or_else(|p| p.into_inner()).take() {
            Some(message) => Err(GpuError::Refused(message)),
            None => Ok(()),
        }
    }
}
