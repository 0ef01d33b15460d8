#!/usr/bin/env bash
# Assembles the controller's OCI image layout with no Docker, daemon or base image (see
# tests/dist.sh, which calls it with the release binaries; the image test calls it with
# the test build): one layer holding WHEELHOUSE and HELPER in /usr/local/bin, the shared
# libraries WHEELHOUSE links (copied from this machine, where ldd finds them), the CA
# certificates, /etc/passwd and /etc/group for uid 65532, /tmp and /home/wheelhouse;
# entrypoint `wheelhouse`, command `controller`, user 65532, OCI labels. Reproducible:
# sorted entries, owner 0, every mtime at SOURCE_DATE_EPOCH (default: the commit's time).
# Prints the manifest's digest.
#
# Usage: tests/image.sh WHEELHOUSE HELPER VERSION OUTDIR
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
usage="usage: tests/image.sh WHEELHOUSE HELPER VERSION OUTDIR"
wheelhouse=${1:?$usage}
helper=${2:?$usage}
version=${3:?$usage}
image=${4:?$usage}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}
stage=$(mktemp -d "${TMPDIR:-/tmp}/wheelhouse-image.XXXXXX")
trap 'rm -rf "$stage"' EXIT
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
rootfs=$stage/rootfs
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc/ssl/certs" "$rootfs/tmp" "$rootfs/home/wheelhouse"
install -m 0755 "$wheelhouse" "$rootfs/usr/local/bin/wheelhouse"
install -m 0755 "$helper" "$rootfs/usr/local/bin/wheelhouse-render"
# The shared libraries wheelhouse links, at the paths its loader looks for them.
for lib in $(ldd "$wheelhouse" | grep -o '/[^ ]*'); do
  mkdir -p "$rootfs$(dirname "$lib")"
  install -m 0755 "$(readlink -f "$lib")" "$rootfs$lib"
done
install -m 0644 /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/sbin/nologin\nwheelhouse:x:65532:65532:wheelhouse:/home/wheelhouse:/sbin/nologin\n' >"$rootfs/etc/passwd"
printf 'root:x:0:\nwheelhouse:x:65532:\n' >"$rootfs/etc/group"
chmod 1777 "$rootfs/tmp"
layer=$stage/layer.tar
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$rootfs" -cf "$layer" .
diff_id=$(sha256sum "$layer" | cut -d' ' -f1)
gzip -9 -n -c "$layer" >"$layer.gz"

rm -rf "$image"
mkdir -p "$image/blobs/sha256"
# Stores stdin as a blob; prints its digest and size.
blob() {
  local tmp=$stage/blob digest
  cat >"$tmp"
  digest=$(sha256sum "$tmp" | cut -d' ' -f1)
  mv -f "$tmp" "$image/blobs/sha256/$digest"
  echo "$digest $(stat -c %s "$image/blobs/sha256/$digest")"
}
read -r layer_digest layer_size < <(blob <"$layer.gz")
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
labels="\"org.opencontainers.image.source\": \"https://github.com/wheelhouse-dev/wheelhouse\", \"org.opencontainers.image.version\": \"$version\", \"org.opencontainers.image.revision\": \"$revision\", \"org.opencontainers.image.licenses\": \"Apache-2.0\", \"org.opencontainers.image.created\": \"$created\""
config="{\"architecture\": \"amd64\", \"os\": \"linux\", \"created\": \"$created\",
 \"config\": {\"User\": \"65532:65532\", \"Entrypoint\": [\"/usr/local/bin/wheelhouse\"], \"Cmd\": [\"controller\"],
  \"Env\": [\"PATH=/usr/local/bin:/usr/bin:/bin\", \"HOME=/home/wheelhouse\", \"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt\"],
  \"WorkingDir\": \"/\", \"Labels\": {$labels}},
 \"rootfs\": {\"type\": \"layers\", \"diff_ids\": [\"sha256:$diff_id\"]},
 \"history\": [{\"created\": \"$created\", \"created_by\": \"tests/dist.sh\"}]}"
read -r config_digest config_size < <(printf '%s\n' "$config" | blob)
manifest="{\"schemaVersion\": 2, \"mediaType\": \"application/vnd.oci.image.manifest.v1+json\",
 \"config\": {\"mediaType\": \"application/vnd.oci.image.config.v1+json\", \"digest\": \"sha256:$config_digest\", \"size\": $config_size},
 \"layers\": [{\"mediaType\": \"application/vnd.oci.image.layer.v1.tar+gzip\", \"digest\": \"sha256:$layer_digest\", \"size\": $layer_size}],
 \"annotations\": {$labels}}"
read -r manifest_digest manifest_size < <(printf '%s\n' "$manifest" | blob)
printf '{"imageLayoutVersion": "1.0.0"}\n' >"$image/oci-layout"
printf '%s\n' "{\"schemaVersion\": 2, \"mediaType\": \"application/vnd.oci.image.index.v1+json\",
 \"manifests\": [{\"mediaType\": \"application/vnd.oci.image.manifest.v1+json\", \"digest\": \"sha256:$manifest_digest\", \"size\": $manifest_size,
  \"annotations\": {\"org.opencontainers.image.ref.name\": \"$version\"}}]}" >"$image/index.json"
echo "sha256:$manifest_digest"
