#!/usr/bin/env bash
# NVIDIA's PTX assembler for suites/ptxas and engine/compiler/ptx/ptxas: every generated kernel
# assembled on a machine without a GPU. Debian 12 ships it in non-free's nvidia-cuda-toolkit
# (CUDA 11.8); only the ptxas binary is taken from the package (dpkg -x, nothing installed), so
# the 84 MB download is the whole cost. The tests find it through TESSERA_PTXAS.
# Idempotent: the download happens only when the binary is not there yet.
set -euo pipefail
dest=/opt/tessera-ptxas
if [ ! -x "$dest/ptxas" ]; then
  sudo=()
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  src=/etc/apt/sources.list.d/tessera-nonfree.sources
  if [ ! -f "$src" ]; then
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: non-free contrib\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' | "${sudo[@]}" tee "$src" >/dev/null
  fi
  "${sudo[@]}" apt-get update -qq
  work=$(mktemp -d)
  (cd "$work" && apt-get download -qq nvidia-cuda-toolkit 2>/dev/null)
  dpkg -x "$work"/nvidia-cuda-toolkit_*.deb "$work/x"
  "${sudo[@]}" mkdir -p "$dest"
  "${sudo[@]}" cp "$work/x/usr/bin/ptxas" "$dest/ptxas"
  rm -rf "$work"
fi
"$dest/ptxas" --version | tail -2
if [ -n "${TESSERA_CI_OUT:-}" ]; then
  echo "TESSERA_PTXAS=$dest/ptxas" >>"$TESSERA_CI_OUT/setup.env"
fi
