# Sourced by the device scripts: unpacks the carried loaders, points Vulkan at the NVIDIA driver, and sets OUT, B and DIR.
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json} XDG_RUNTIME_DIR=/tmp
export LOCKSTEP_TOKENIZER=$PWD/.cache/tokenizer/tokenizer.json LOCKSTEP_CACHE_DIR=/tmp/lockstep-cache RUST_BACKTRACE=0
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=./target/release/lockstep
DIR=${DIR:-/tmp/fs}
