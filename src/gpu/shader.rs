//! Kernel sources: the language each is written in, its registered names and text, the shared WGSL numerics and the MSL library prefix.
/// The shared WGSL numerics and block staging every kernel may call.
pub const WGSL_LIB: &str = concat!(include_str!("../../wgsl/lib/formats.wgsl"), "\n", include_str!("../../wgsl/lib/math.wgsl"), "\n", include_str!("../../wgsl/lib/edge.wgsl"), "\n", include_str!("../../wgsl/lib/blocks.wgsl"), "\n");

/// An MSL kernel source: `msl/lib/` (formats, edge arithmetic, transcendentals) then the files named, repository-relative.
macro_rules! msl_lib {
    ($($file:literal),+) => {
        concat!(
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/msl/lib/formats.metal")),
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/msl/lib/edge.metal")),
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/msl/lib/math.metal")),
            $(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $file))),+
        )
    };
}
pub(crate) use msl_lib;

/// The language a kernel source is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lang {
    /// WGSL, compiled by wgpu on every backend (the shared numerics prepended).
    Wgsl,
    /// Metal Shading Language, passed through to Metal only.
    Msl,
}

/// A kernel source: its registered name, its variant, its language and its text (compared by the text's address, so cache lookups never hash whole sources).
#[derive(Clone, Copy, Debug)]
pub struct Shader {
    pub lang: Lang,
    pub kernel: &'static str,
    pub variant: &'static str,
    pub source: &'static str,
}

impl Shader {
    /// Whether `o` is the same source: language, names and text (equality proper compares the text's address only).
    pub fn same(&self, o: &Shader) -> bool {
        (self.lang, self.kernel, self.variant, self.source) == (o.lang, o.kernel, o.variant, o.source)
    }
}

impl PartialEq for Shader {
    fn eq(&self, o: &Shader) -> bool {
        (self.lang, self.kernel, self.variant) == (o.lang, o.kernel, o.variant) && std::ptr::eq(self.source, o.source)
    }
}

impl Eq for Shader {}

impl std::hash::Hash for Shader {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (self.lang, self.kernel, self.variant, self.source.as_ptr(), self.source.len()).hash(h);
    }
}
