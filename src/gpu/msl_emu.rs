//! The MSL harness: the exact MSL Metal would be given, compiled by the host g++ against a small `metal_stdlib` shim and run with Metal's execution model on the CPU (a fiber per thread, barriers honoured in a seeded order, subnormals flushed when asked).
use super::msl::Translated;
use sha2::{Digest, Sha256};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};

/// The shim Metal's headers are replaced by.
pub const SHIM: &str = include_str!("../../msl/shim/metal_stdlib");
/// The harness's scheduler, compiled into every kernel.
pub const RUNTIME: &str = include_str!("../../msl/harness/runtime.hpp");
/// g++'s flags: no contraction, no fast math, single-precision literals (metal.md).
pub const FLAGS: &[&str] = &["-std=c++17", "-O2", "-ffp-contract=off", "-fno-fast-math", "-fsingle-precision-constant", "-Wno-attributes", "-Wno-unknown-pragmas", "-shared", "-fPIC", "-pthread"];

/// Why the harness could not build or run a kernel.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// The kernel's signature has a parameter the launcher cannot bind.
    #[error("{0}")]
    Signature(String),
    /// g++ failed or is missing.
    #[error("compiling {entry} with g++: {message}")]
    Compile { entry: String, message: String },
    /// The compiled library could not be loaded.
    #[error("loading {0}")]
    Load(String),
    /// The run itself failed (a barrier reached by some threads only, a buffer missing).
    #[error("running {entry}: {message}")]
    Run { entry: String, message: String },
    /// Files in the cache folder.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

#[link(name = "dl")]
extern "C" {
    fn dlopen(filename: *const c_char, flag: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *mut c_char;
}

type Launch = unsafe extern "C" fn(*const *mut c_void, *const u32, u64, c_int, *mut c_char, usize) -> c_int;

/// One kernel built for the harness.
pub struct EmuKernel {
    translated: Translated,
    launch: Launch,
}

/// The launcher: the kernel's text, the scheduler, and `ls_body` binding each parameter from the buffers and the thread's ids.
pub fn launcher(t: &Translated) -> Result<String, EmuError> {
    let head = t.source.find(&format!("kernel void {}(", t.entry)).ok_or_else(|| EmuError::Signature(format!("no kernel {}", t.entry)))?;
    let open = head + t.source[head..].find('(').unwrap_or(0) + 1;
    let close = open + t.source[open..].find("\n) {").ok_or_else(|| EmuError::Signature("no end of the parameters".into()))?;
    let [wx, wy, wz] = t.workgroup;
    let mut args = Vec::new();
    for p in t.source[open..close].lines().map(|l| l.trim().trim_start_matches(',').trim()).filter(|l| !l.is_empty()) {
        let (decl, attr) = p.split_once("[[").ok_or_else(|| EmuError::Signature(format!("parameter `{p}` has no attribute")))?;
        let attr = attr.trim_end_matches("]]").trim();
        let decl = decl.trim();
        let ty = decl.rsplit_once(' ').map_or("", |(ty, _)| ty).trim();
        let arg = if let Some(n) = attr.strip_prefix("buffer(").and_then(|r| r.strip_suffix(')')) {
            let ty = ty.replace("device ", "").replace("constant ", "");
            let ty = ty.trim();
            match ty.strip_suffix('&') {
                Some(r) => format!("*reinterpret_cast<{}*>(ls_bufs[{n}])", r.trim()),
                None => format!("reinterpret_cast<{ty}>(ls_bufs[{n}])"),
            }
        } else {
            match attr {
                "thread_index_in_threadgroup" => "t->index".to_string(),
                "thread_position_in_threadgroup" => "metal::uint3(t->lx, t->ly, t->lz)".to_string(),
                "threadgroup_position_in_grid" => "metal::uint3(gx, gy, gz)".to_string(),
                "thread_position_in_grid" => format!("metal::uint3(gx * {wx}u + t->lx, gy * {wy}u + t->ly, gz * {wz}u + t->lz)"),
                "thread_index_in_simdgroup" => "(t->index & 31u)".to_string(),
                "simdgroup_index_in_threadgroup" => "(t->index >> 5u)".to_string(),
                "threads_per_simdgroup" => "32u".to_string(),
                "threads_per_threadgroup" => format!("metal::uint3({wx}u, {wy}u, {wz}u)"),
                "threadgroups_per_grid" => "metal::uint3(ls_groups[0], ls_groups[1], ls_groups[2])".to_string(),
                other => return Err(EmuError::Signature(format!("parameter `{p}`: attribute `{other}` is not bound by the harness"))),
            }
        };
        args.push(arg);
    }
    Ok(format!(
        "{source}\n#include \"runtime.hpp\"\nstatic void* ls_bufs[32];\nstatic std::uint32_t ls_groups[3];\nstatic void ls_body(LsThread* t, std::uint32_t gx, std::uint32_t gy, std::uint32_t gz) {{\n    (void)gx; (void)gy; (void)gz; (void)t;\n    {entry}({args});\n}}\nextern \"C\" int ls_launch(void* const* bufs, const std::uint32_t* groups, std::uint64_t seed, int flush, char* err, std::size_t errlen) {{\n    static std::mutex one;\n    std::lock_guard<std::mutex> held(one);\n    for (int i = 0; i < 32; i++) ls_bufs[i] = bufs[i];\n    for (int i = 0; i < 3; i++) ls_groups[i] = groups[i];\n    static const std::uint32_t size[3] = {{{wx}u, {wy}u, {wz}u}};\n    return ls_run(size, groups, seed, flush, err, errlen);\n}}\n",
        source = t.source,
        entry = t.entry,
        args = args.join(", ")
    ))
}

/// The folder compiled kernels are kept in (`LOCKSTEP_CACHE_DIR`, else the repository's `.cache`).
pub fn cache_dir() -> PathBuf {
    let root = std::env::var_os("LOCKSTEP_CACHE_DIR").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache"));
    root.join("msl-emu")
}

impl EmuKernel {
    /// Compiles (or finds compiled) and loads a translated kernel.
    pub fn build(t: &Translated) -> Result<EmuKernel, EmuError> {
        let unit = launcher(t)?;
        let dir = cache_dir();
        let inc = dir.join("include");
        std::fs::create_dir_all(inc.join("simd"))?;
        for (name, text) in [("metal_stdlib", SHIM), ("runtime.hpp", RUNTIME), ("simd/simd.h", "")] {
            let p = inc.join(name);
            if std::fs::read_to_string(&p).ok().as_deref() != Some(text) {
                std::fs::write(&p, text)?;
            }
        }
        let mut h = Sha256::new();
        h.update(&unit);
        h.update(SHIM);
        h.update(RUNTIME);
        FLAGS.iter().for_each(|f| h.update(f));
        let hex: String = h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect();
        let lib = dir.join(format!("{hex}.so"));
        if !lib.is_file() {
            static BUILDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let src = dir.join(format!("{hex}.{}.{n}.cpp", std::process::id()));
            std::fs::write(&src, &unit)?;
            let tmp = src.with_extension("tmp.so");
            let out = std::process::Command::new("g++").args(FLAGS).arg("-I").arg(&inc).arg("-x").arg("c++").arg(&src).arg("-o").arg(&tmp).output().map_err(|e| EmuError::Compile { entry: t.entry.clone(), message: format!("running g++: {e}") })?;
            if !out.status.success() {
                return Err(EmuError::Compile { entry: t.entry.clone(), message: String::from_utf8_lossy(&out.stderr).lines().take(20).collect::<Vec<_>>().join("\n") });
            }
            std::fs::rename(&tmp, &lib)?;
            let _ = std::fs::remove_file(&src);
        }
        let path = CString::new(lib.to_string_lossy().as_bytes()).map_err(|_| EmuError::Load(lib.display().to_string()))?;
        // SAFETY: dlopen and dlsym take NUL-terminated strings; the library stays loaded for the process's life.
        let launch = unsafe {
            let handle = dlopen(path.as_ptr(), 2);
            if handle.is_null() {
                return Err(EmuError::Load(format!("{}: {}", lib.display(), CStr::from_ptr(dlerror()).to_string_lossy())));
            }
            let sym = dlsym(handle, c"ls_launch".as_ptr());
            if sym.is_null() {
                return Err(EmuError::Load(format!("{}: no ls_launch", lib.display())));
            }
            std::mem::transmute::<*mut c_void, Launch>(sym)
        };
        Ok(EmuKernel { translated: t.clone(), launch })
    }

    /// The translation it runs.
    pub fn translated(&self) -> &Translated {
        &self.translated
    }

    /// Runs `groups` threadgroups over `bufs` (by binding: 0 the parameter uniform, then the storage buffers), the schedule shuffled from `seed`, subnormals flushed when `flush`.
    pub fn launch(&self, bufs: &mut [&mut [u8]], groups: [u32; 3], seed: u64, flush: bool) -> Result<(), EmuError> {
        let t = &self.translated;
        let run = |m: String| EmuError::Run { entry: t.entry.clone(), message: m };
        let mut ptrs: [*mut c_void; 32] = [std::ptr::null_mut(); 32];
        for b in &t.buffers {
            let buf = bufs.get_mut(b.binding as usize).ok_or_else(|| run(format!("no buffer for binding {}", b.binding)))?;
            if buf.len() % 4 != 0 {
                return Err(run(format!("binding {} has {} bytes, not a whole number of words", b.binding, buf.len())));
            }
            ptrs[b.slot as usize] = buf.as_mut_ptr().cast();
        }
        let mut sizes: Vec<u32> = t.sized.iter().map(|&b| bufs.get(b as usize).map_or(0, |x| x.len() as u32)).collect();
        sizes.push(0);
        ptrs[t.sizes_slot as usize] = sizes.as_mut_ptr().cast();
        let mut err = vec![0 as c_char; 512];
        // SAFETY: every slot the kernel reads points at a live buffer of the size its sizes entry gives; the kernel's indices are clamped to those sizes (naga's Restrict policy).
        let rc = unsafe { (self.launch)(ptrs.as_ptr(), groups.as_ptr(), seed, c_int::from(flush), err.as_mut_ptr(), err.len()) };
        if rc != 0 {
            // SAFETY: the launcher writes a NUL-terminated message into `err`.
            let m = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().to_string();
            return Err(run(m));
        }
        Ok(())
    }
}

/// The harness as a device: a build per pipeline key; each dispatch runs on host copies of its bound buffers twice (subnormals flushed as Apple flushes them, then kept, under two schedules) and must give one result.
#[derive(Default)]
pub struct EmuDevice {
    kernels: std::sync::Mutex<std::collections::HashMap<super::PipelineKey, std::sync::Arc<EmuKernel>>>,
    runs: std::sync::atomic::AtomicU64,
}

impl EmuDevice {
    /// The harness build of `key`'s shader with its override constants (translated and compiled on first use).
    pub fn kernel(&self, key: &super::PipelineKey) -> Result<std::sync::Arc<EmuKernel>, super::GpuError> {
        let err = |message: String| super::GpuError::Shader { kernel: format!("{}/{}", key.shader.kernel, key.shader.variant), message };
        if let Some(k) = self.kernels.lock().unwrap_or_else(|p| p.into_inner()).get(key) {
            return Ok(k.clone());
        }
        let constants: Vec<(&str, f64)> = key.constants.iter().map(|&(n, v)| (n, f64::from_bits(v))).collect();
        let t = super::msl::metal_text(&key.shader, &constants).map_err(|e| err(e.to_string()))?;
        let k = std::sync::Arc::new(EmuKernel::build(&t).map_err(|e| err(e.to_string()))?);
        self.kernels.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone(), k.clone());
        Ok(k)
    }

    /// Runs one dispatch: reads its buffers, runs the kernel flushed and unflushed, refuses differing bits, writes back what it may write.
    pub fn run(&self, gpu: &super::Gpu, k: &EmuKernel, name: &str, params: Vec<u8>, bound: &[(super::Buf, Option<(u64, u64)>)], groups: [u32; 3]) -> Result<(), super::GpuError> {
        let err = |message: String| super::GpuError::Shader { kernel: name.to_string(), message };
        let mut inputs = vec![params];
        for (b, range) in bound {
            let all = gpu.read(b)?;
            inputs.push(match *range {
                None => all,
                Some((offset, size)) => all[offset as usize..(offset + size) as usize].to_vec(),
            });
        }
        let n = self.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let run = |flush: bool, seed: u64| -> Result<Vec<Vec<u8>>, super::GpuError> {
            let mut bufs = inputs.clone();
            let mut views: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
            k.launch(&mut views, groups, seed, flush).map_err(|e| err(e.to_string()))?;
            Ok(bufs)
        };
        let flushed = run(true, n.wrapping_mul(0x9e37_79b9_7f4a_7c15))?;
        // the contract's probes measure the device, so they see Apple's flushing only
        let kept = if name.starts_with("probe_") { flushed.clone() } else { run(false, !n)? };
        for s in k.translated().buffers.iter().filter(|s| s.mutable) {
            let i = s.binding as usize;
            if flushed[i] != kept[i] {
                let words = flushed[i].chunks(4).zip(kept[i].chunks(4)).filter(|(a, b)| a != b).count();
                return Err(err(format!("binding {}: {words} words differ between the run with subnormals flushed and the run without (or between two schedules)", s.binding)));
            }
            let (b, range) = &bound[i - 1];
            gpu.write_at(b, range.map_or(0, |r| r.0), &flushed[i]);
        }
        Ok(())
    }
}
