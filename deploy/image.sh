#!/usr/bin/env bash
# deploy/image.sh — builds dpstream's container image as an OCI image layout
# tarball, with no container engine and no registry (only git and Go).
#
#   deploy/image.sh [OUT.tar]        # default deploy/image/out/dpstream-oci.tar
#   podman load -i deploy/image/out/dpstream-oci.tar     # or:
#   skopeo copy oci-archive:deploy/image/out/dpstream-oci.tar docker://REGISTRY/dpstream:TAG
#
# It builds a COMMIT, not the work tree: it clones the repository's commit
# (HEAD by default) into a temporary directory, so uncommitted changes never
# end up in an image and the same commit always gives the same image
# digest (with the same Go toolchain and CA bundle). Inside that clone:
#   CGO_ENABLED=0 go build -trimpath -buildvcs=true -ldflags "-s -w -X main.version=… -X main.commit=…"
# gives a static binary whose `dpstream --version` names the version, commit
# and Go version; then deploy/image (a Go program, its own module, using
# go-containerregistry) assembles an image from an empty base with one layer:
# /usr/local/bin/dpstream, /etc/ssl/certs/ca-certificates.crt (copied from
# THIS machine's CA bundle), /etc/passwd and /etc/group with the non-root
# user nonroot (65532), /home/nonroot, /tmp; config User 65532:65532,
# Entrypoint ["dpstream"], Cmd ["run","--config","/etc/dpstream/dpstream.yaml"].
# Every time stamp is SOURCE_DATE_EPOCH (default: the commit's committer
# time), every owner numeric. It prints the image digest.
#
# Environment:
#   DPSTREAM_IMAGE_REPO     git repository to build from (default: this one)
#   DPSTREAM_IMAGE_REV      commit to build (default HEAD)
#   DPSTREAM_VERSION        version stamp (default: `git describe --tags` of a
#                           v* tag, else a Go pseudo-version v0.0.0-TIME-COMMIT)
#   SOURCE_DATE_EPOCH       image time stamp, unix seconds
#   DPSTREAM_IMAGE_CACERTS  CA bundle (default /etc/ssl/certs/ca-certificates.crt)
#   GOARCH                  target architecture (default: this machine's)
#
# deploy/Dockerfile builds the same contents with Docker (not exercised here).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=${DPSTREAM_IMAGE_REPO:-$(cd "$here/.." && pwd)}
out=${1:-$here/image/out/dpstream-oci.tar}
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
cacerts=${DPSTREAM_IMAGE_CACERTS:-/etc/ssl/certs/ca-certificates.crt}

rev=$(git -C "$repo" rev-parse --verify "${DPSTREAM_IMAGE_REV:-HEAD}^{commit}")
work=$(mktemp -d "${TMPDIR:-/tmp}/dpstream-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
git clone --quiet --shared --no-checkout "$repo" "$work/src"
git -C "$work/src" -c advice.detachedHead=false checkout --quiet --detach "$rev"

epoch=${SOURCE_DATE_EPOCH:-$(git -C "$work/src" show -s --format=%ct "$rev")}
if [ -z "${DPSTREAM_VERSION:-}" ]; then
  if ! DPSTREAM_VERSION=$(git -C "$work/src" describe --tags --match 'v[0-9]*' --exact-match "$rev" 2>/dev/null); then
    # The pseudo-version `go build` would stamp for an untagged commit.
    DPSTREAM_VERSION="v0.0.0-$(TZ=UTC git -C "$work/src" show -s --format=%cd --date=format-local:%Y%m%d%H%M%S "$rev")-${rev:0:12}"
  fi
fi
arch=${GOARCH:-$(go env GOARCH)}

(
  cd "$work/src"
  CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -trimpath -buildvcs=true \
    -ldflags "-s -w -X main.version=$DPSTREAM_VERSION -X main.commit=$rev" \
    -o "$work/dpstream" ./cmd/dpstream
)

# The assembler of the commit being built; a commit from before it existed
# is assembled with this work tree's.
assembler="$work/src/deploy/image"
[ -f "$assembler/main.go" ] || assembler="$here/image"
(
  cd "$assembler"
  go run . -binary "$work/dpstream" -cacerts "$cacerts" -version "$DPSTREAM_VERSION" \
    -revision "$rev" -created "$epoch" -arch "$arch" -out "$out"
)
echo "wrote $out (dpstream $DPSTREAM_VERSION, commit $rev)" >&2
