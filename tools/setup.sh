#!/usr/bin/env bash
# Installs what pplab needs from Debian packages (only what is missing), then
# configures and builds it in build/. Usage: bash tools/setup.sh [cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake g++ ninja-build ccache pkg-config libboost-graph-dev libcli11-dev nlohmann-json3-dev catch2
          libtorch-dev libgloo-dev libopenblas0-pthread libsentencepiece-dev fortunes fortunes-min)
missing=()
for p in "${packages[@]}"; do
  grep -q "install ok installed" <<< "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j 2
