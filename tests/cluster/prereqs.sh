#!/usr/bin/env bash
# Checks (and, as root on Debian/Ubuntu, installs) the tools the local control plane
# scripts use. Go and Rust are expected from the machine; everything else is small.
set -euo pipefail

die() { printf '[prereqs] error: %s\n' "$*" >&2; exit 1; }

command -v go >/dev/null || die "Go is missing: install it from https://go.dev/dl (the control plane is built from the Go module proxy)"
command -v cargo >/dev/null || die "Rust is missing: install it with rustup (https://rustup.rs)"
# The test command lints and checks formatting; rustup's minimal profile lacks both.
if ! cargo clippy --version >/dev/null 2>&1 || ! cargo fmt --version >/dev/null 2>&1; then
  command -v rustup >/dev/null || die "cargo clippy and cargo fmt are missing (install the clippy and rustfmt components)"
  rustup component add clippy rustfmt >&2
fi

# command -> Debian package
declare -A packages=(
  [openssl]=openssl [python3]=python3 [curl]=curl [setsid]=util-linux
  [flock]=util-linux [ss]=iproute2 [tmux]=tmux [base64]=coreutils
  # The Git server of the chart-source tests runs `git http-backend` and `git upload-pack`.
  [git]=git
)
missing=()
for cmd in "${!packages[@]}"; do
  command -v "$cmd" >/dev/null || missing+=("${packages[$cmd]}")
done
((${#missing[@]})) || exit 0

mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  printf '[prereqs] installing %s\n' "${missing[*]}" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
else
  die "missing packages: ${missing[*]} (install them with your package manager)"
fi
