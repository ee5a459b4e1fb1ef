#!/usr/bin/env bash
# Installs the Debian 12 packages mindspeed-cpp builds and tests with (skips what is there).
# Needs root (or sudo) and the Debian package mirror; nothing else is downloaded.
set -euo pipefail
PACKAGES=(build-essential cmake ninja-build pkg-config
          libopenblas-openmp-dev libopenmpi-dev openmpi-bin
          nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
          libsentencepiece-dev zlib1g-dev
          gnuplot-nox  # tools/plot_metrics.sh (the loss picture of a run)
          iproute2 slurm-wlm)  # scripts/multi_host_test.sh: hosts as network namespaces, a Slurm cluster of them
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install_deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
