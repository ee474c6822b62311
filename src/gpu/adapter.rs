//! Adapter listing and choice by `--device` / `LOCKSTEP_DEVICE`: an index, a name substring, a backend name, or `cpu`.
use super::GpuError;

/// What the user asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The CPU oracle, no GPU.
    Cpu,
    /// The first GPU adapter (discrete, then integrated, then any).
    Default,
    /// Index into `lockstep devices`.
    Index(usize),
    /// A backend name (vulkan, metal, dx12, gl) or a case-insensitive substring of the adapter name.
    Name(String),
    /// The MSL harness (`metal-emu`): every dispatch runs as the MSL Metal would be given, on the CPU; the default adapter holds the buffers.
    MetalEmu,
}

impl DeviceChoice {
    /// Parses a `--device` value; an empty value means the default adapter.
    pub fn parse(s: &str) -> DeviceChoice {
        let t = s.trim();
        if t.is_empty() || t.eq_ignore_ascii_case("default") || t.eq_ignore_ascii_case("gpu") {
            DeviceChoice::Default
        } else if t.eq_ignore_ascii_case("cpu") {
            DeviceChoice::Cpu
        } else if t.eq_ignore_ascii_case("metal-emu") {
            DeviceChoice::MetalEmu
        } else if let Ok(i) = t.parse() {
            DeviceChoice::Index(i)
        } else {
            DeviceChoice::Name(t.to_string())
        }
    }

    /// The `--device` flag if given, else `LOCKSTEP_DEVICE`, else the default.
    pub fn from_flag_or_env(flag: Option<&str>) -> DeviceChoice {
        match flag {
            Some(f) => DeviceChoice::parse(f),
            None => DeviceChoice::parse(&std::env::var("LOCKSTEP_DEVICE").unwrap_or_default()),
        }
    }
}

/// One adapter as `lockstep devices` prints it.
#[derive(Clone, Debug)]
pub struct AdapterSummary {
    pub index: usize,
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub subgroup_sizes: (u32, u32),
    pub shader_f16: bool,
    pub max_storage_binding: u64,
}

pub(super) fn instance() -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = wgpu::Backends::PRIMARY;
    wgpu::Instance::new(desc)
}

fn adapters(instance: &wgpu::Instance) -> Vec<wgpu::Adapter> {
    pollster::block_on(instance.enumerate_adapters(wgpu::Backends::PRIMARY))
}

fn backend_name(b: wgpu::Backend) -> String {
    format!("{b:?}").to_lowercase()
}

/// Lists every adapter wgpu can see.
pub fn list_adapters() -> Vec<AdapterSummary> {
    adapters(&instance())
        .iter()
        .enumerate()
        .map(|(index, a)| {
            let info = a.get_info();
            AdapterSummary {
                index,
                name: info.name.clone(),
                backend: backend_name(info.backend),
                device_type: format!("{:?}", info.device_type),
                driver: format!("{} {}", info.driver, info.driver_info).trim().to_string(),
                subgroup_sizes: (info.subgroup_min_size, info.subgroup_max_size),
                shader_f16: a.features().contains(wgpu::Features::SHADER_F16),
                max_storage_binding: a.limits().max_storage_buffer_binding_size,
            }
        })
        .collect()
}

pub(super) fn choose(instance: &wgpu::Instance, choice: &DeviceChoice) -> Result<wgpu::Adapter, GpuError> {
    let mut all = adapters(instance);
    let missing = || GpuError::NoAdapter(format!("{choice:?}"));
    let pick = match choice {
        DeviceChoice::Cpu => return Err(GpuError::NoAdapter("cpu (the CPU oracle has no adapter)".into())),
        DeviceChoice::Index(i) => (*i < all.len()).then_some(*i),
        DeviceChoice::Name(n) => {
            let n = n.to_lowercase();
            all.iter()
                .position(|a| backend_name(a.get_info().backend) == n)
                .or_else(|| all.iter().position(|a| a.get_info().name.to_lowercase().contains(&n)))
        }
        DeviceChoice::Default | DeviceChoice::MetalEmu => {
            let rank = |a: &wgpu::Adapter| match a.get_info().device_type {
                wgpu::DeviceType::DiscreteGpu => 0,
                wgpu::DeviceType::IntegratedGpu => 1,
                wgpu::DeviceType::VirtualGpu => 2,
                wgpu::DeviceType::Cpu => 3,
                wgpu::DeviceType::Other => 4,
            };
            (0..all.len()).min_by_key(|&i| rank(&all[i]))
        }
    };
    let i = pick.ok_or_else(missing)?;
    Ok(all.swap_remove(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_flag_parses_index_name_backend_and_cpu() {
        assert_eq!(DeviceChoice::parse("cpu"), DeviceChoice::Cpu);
        assert_eq!(DeviceChoice::parse("CPU"), DeviceChoice::Cpu);
        assert_eq!(DeviceChoice::parse("2"), DeviceChoice::Index(2));
        assert_eq!(DeviceChoice::parse("vulkan"), DeviceChoice::Name("vulkan".into()));
        assert_eq!(DeviceChoice::parse(""), DeviceChoice::Default);
        assert_eq!(DeviceChoice::parse("Metal-Emu"), DeviceChoice::MetalEmu);
    }
}
