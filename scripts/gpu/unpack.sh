# Sourced by the scripts that run on a GPU host: unpacks the binaries scripts/gpu/h200.sh packed
# into .gpu-pack/gpu.tar.xz (carried instead of .gpu/, which holds more than the device tool's
# 64 MiB) into .gpu/. A carried .gpu/ is used as it is.
if [ -f .gpu-pack/gpu.tar.xz ]; then
  mkdir -p .gpu && tar -C .gpu -xJf .gpu-pack/gpu.tar.xz
fi
