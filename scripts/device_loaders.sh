#!/usr/bin/env bash
# Downloads the Vulkan and GL loaders' Debian packages into .gl/ for the device scripts to unpack on a GPU machine (carry .gl).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .gl /tmp/amd64/partial
o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
apt-get "${o[@]}" update -qq
(cd .gl && apt-get "${o[@]}" download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
ls .gl
