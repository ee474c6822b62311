//! lockstep: DeepSeek-V4.1-Flash inference whose every op gives the same bits on every device.
pub mod gpu;
pub mod model;
pub mod numerics;
pub mod text;
