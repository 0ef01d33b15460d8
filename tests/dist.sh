#!/usr/bin/env bash
# Builds wheelhouse's release bundle from this checkout:
#
#   DIR/wheelhouse-<version>-x86_64-unknown-linux-gnu.tar.gz (and .sha256)
#
# holding `wheelhouse` and its render helper `wheelhouse-render` side by side (wheelhouse
# looks for the helper beside its own executable, so nothing needs configuring), LICENSE,
# README.md, themes/, shell completions (completions/), and a CycloneDX SBOM of each
# binary (sbom/: the Rust crates of wheelhouse by cargo-cyclonedx, the Go modules built
# into the helper by cyclonedx-gomod from the binary's own build information). Both
# binaries are built --locked and stripped. The archive is reproducible: sorted entries,
# owner 0, every mtime at SOURCE_DATE_EPOCH (default: the commit's time), gzip without a
# name or timestamp.
#
# It also writes DIR/image/, an OCI image layout of the controller built with no Docker,
# daemon or base image: one layer holding the two binaries (/usr/local/bin), the shared
# libraries wheelhouse links (copied from this machine, where ldd finds them), the CA
# certificates, /etc/passwd and /etc/group for uid 65532, /tmp and /home/wheelhouse;
# entrypoint `wheelhouse`, command `controller`, user 65532, OCI labels for source,
# version and revision; its manifest digest in DIR/image.digest. Built from the same
# inputs it has the same digest (sorted entries, fixed owners and times). Push it with any
# OCI tool, e.g. `oras cp --from-oci-layout DIR/image:VERSION REGISTRY/wheelhouse:VERSION`
# or `skopeo copy oci:DIR/image:VERSION docker://REGISTRY/wheelhouse:VERSION`.
#
# Usage: tests/dist.sh DIR
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
log() { printf '[dist] %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}
out=${1:?usage: tests/dist.sh DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)

target=x86_64-unknown-linux-gnu
[[ $(uname -m) == x86_64 ]] || die "this script builds the x86_64 bundle on an x86_64 machine only (aarch64 is planned, see README.md)"
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
[[ -n $version ]] || die "no version in Cargo.toml"
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
start=$(date +%s)

# The SBOM tools, pinned, installed once into the cache (CycloneDX's own tools).
tools=${XDG_CACHE_HOME:-$HOME/.cache}/wheelhouse/tools
CARGO_CYCLONEDX_VERSION=0.5.9
CYCLONEDX_GOMOD_VERSION=v1.10.0
cargo_cyclonedx=$tools/cargo-cyclonedx-$CARGO_CYCLONEDX_VERSION/bin/cargo-cyclonedx
if [[ ! -x $cargo_cyclonedx ]]; then
  log "installing cargo-cyclonedx $CARGO_CYCLONEDX_VERSION (once)"
  cargo install --locked --quiet --version "$CARGO_CYCLONEDX_VERSION" \
    --root "$tools/cargo-cyclonedx-$CARGO_CYCLONEDX_VERSION" cargo-cyclonedx
fi
gomod=$tools/cyclonedx-gomod-$CYCLONEDX_GOMOD_VERSION/cyclonedx-gomod
if [[ ! -x $gomod ]]; then
  log "installing cyclonedx-gomod $CYCLONEDX_GOMOD_VERSION (once)"
  GOBIN="$tools/cyclonedx-gomod-$CYCLONEDX_GOMOD_VERSION" GOFLAGS=-modcacherw \
    go install "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$CYCLONEDX_GOMOD_VERSION"
fi

log "building wheelhouse $version (release, --locked)"
# Stripped afterwards (strip(1)), so the release build stays the benchmarks' own.
cargo build --release --locked --bin wheelhouse --quiet
wheelhouse=${CARGO_TARGET_DIR:-$root/target}/release/wheelhouse
helper=$("$root/src/helm/render/helper/build.sh")/wheelhouse-render

name=wheelhouse-$version-$target
stage=$(mktemp -d "${TMPDIR:-/tmp}/wheelhouse-dist.XXXXXX")
trap 'rm -rf "$stage"' EXIT
dir=$stage/$name
mkdir -p "$dir/completions" "$dir/sbom" "$dir/themes"
install -m 0755 "$wheelhouse" "$helper" "$dir/"
strip --strip-all "$dir/wheelhouse"
install -m 0644 LICENSE README.md "$dir/"
install -m 0644 themes/*.yaml "$dir/themes/"
"$dir/wheelhouse" completion bash >"$dir/completions/wheelhouse.bash"
"$dir/wheelhouse" completion zsh >"$dir/completions/_wheelhouse"
"$dir/wheelhouse" completion fish >"$dir/completions/wheelhouse.fish"

log "writing the SBOMs"
# cargo-cyclonedx writes beside Cargo.toml; the dependencies of the binary's target only.
"$cargo_cyclonedx" cyclonedx --format json --target "$target" --override-filename wheelhouse.cdx \
  --spec-version 1.5 >/dev/null
mv -f "$root/wheelhouse.cdx.json" "$dir/sbom/wheelhouse.cdx.json"
"$gomod" bin -json -output "$dir/sbom/wheelhouse-render.cdx.json" -version "$version" "$helper" 2>/dev/null
# Their serial numbers and timestamps differ at each run; the bundle should not.
for sbom in "$dir"/sbom/*.json; do
  sed -i -E 's/"serialNumber": *"[^"]*"/"serialNumber": "urn:uuid:00000000-0000-0000-0000-000000000000"/; s/"timestamp": *"[^"]*"/"timestamp": "'"$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"'"/' "$sbom"
done

log "packing $name.tar.gz"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$stage" -cf - "$name" | gzip -9 -n >"$out/$name.tar.gz"
(cd "$out" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256")
log "$out/$name.tar.gz: $(du -h "$out/$name.tar.gz" | cut -f1)"

log "assembling the image layout"
digest=$("$root/tests/image.sh" "$dir/wheelhouse" "$dir/wheelhouse-render" "$version" "$out/image")
echo "$digest" >"$out/image.digest"
image=$out/image
manifest_digest=${digest#sha256:}
log "image sha256:$manifest_digest ($(du -sh "$image" | cut -f1)); all in $(($(date +%s) - start))s"
echo "$out/$name.tar.gz"
