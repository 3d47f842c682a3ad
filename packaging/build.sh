#!/usr/bin/env bash
# Builds Flotilla's packages from a checkout with one command:
#
#   packaging/build.sh [OUT_DIR]        (default: $CARGO_TARGET_DIR/packages or target/packages)
#
# Output: flotilla-client, flotilla-controller and flotilla-node as .deb (cargo-deb) and .rpm
# (cargo-generate-rpm). Installs the two cargo tools at pinned versions when missing.
# Set FLOTILLA_PKG_NO_RPM=1 to build only the .deb files.
#
# The client package holds every binary of commands/src/bin and admin/src/bin (`flotilla`),
# found here so that a new command is packaged without an edit, and the man pages
# `flotilla man` writes from the parsers' tables.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

CARGO_DEB_VERSION=3.8.0
CARGO_GENERATE_RPM_VERSION=0.21.1

target=${CARGO_TARGET_DIR:-$root/target}
case "$target" in /*) ;; *) target=$root/$target ;; esac
out=${1:-$target/packages}
mkdir -p "$out"
out=$(cd "$out" && pwd)

say() { echo "=== [packaging] $*"; }

# --- tools, pinned -------------------------------------------------------------------------
need_tool() { # need_tool <cargo subcommand> <crate> <version>
  local have
  have=$(cargo "$1" --version 2>/dev/null | awk '{print $NF}' || true)
  have=${have#v}
  if [ "$have" != "$3" ]; then
    say "installing $2 $3 (found '${have:-none}')"
    # A target dir of its own: the tools' dependencies must not churn the project's.
    CARGO_TARGET_DIR="$target/pkg-tools" cargo install --locked "$2" --version "$3"
  fi
}
need_tool deb cargo-deb "$CARGO_DEB_VERSION"
if [ "${FLOTILLA_PKG_NO_RPM:-0}" != 1 ]; then
  need_tool generate-rpm cargo-generate-rpm "$CARGO_GENERATE_RPM_VERSION"
fi

# --- binaries ------------------------------------------------------------------------------
# Every binary commands/ and admin/ define: src/bin/NAME.rs and src/bin/NAME/main.rs (Cargo's
# rules). The client package is flotilla-commands' (its [package.metadata.deb]); it holds both.
client_bins=()
for f in commands/src/bin/*.rs commands/src/bin/*/main.rs admin/src/bin/*.rs admin/src/bin/*/main.rs; do
  [ -e "$f" ] || continue
  case "$f" in
    */main.rs) n=$(basename "$(dirname "$f")") ;;
    *) n=$(basename "$f" .rs) ;;
  esac
  client_bins+=("$n")
done
say "client commands: ${client_bins[*]}"

# FLOTILLA_PKG_PROFILE: the cargo profile to package (default release). CI passes `dev`, the
# profile its tests already built, so that CI builds one profile only; the binaries are then
# staged under a target directory of their own whose `release/` cargo-deb and the rpm specs read.
profile=${FLOTILLA_PKG_PROFILE:-release}
say "cargo build --profile $profile (stripped)"
export CARGO_PROFILE_RELEASE_STRIP=symbols
CARGO_TARGET_DIR=$target cargo build --profile "$profile" --locked \
  -p flotilla-commands -p flotilla-admin -p flotilla-slurmctld -p flotilla-slurmd -p flotilla-slurmrestd --bins
if [ "$profile" = release ]; then
  pkg_target=$target
else
  built=$target/$([ "$profile" = dev ] && echo debug || echo "$profile")
  pkg_target=$target/pkg-$profile
  rm -rf "$pkg_target/release"; mkdir -p "$pkg_target/release"
  for b in "${client_bins[@]}" slurmctld sackd slurmrestd slurmd; do
    strip -o "$pkg_target/release/$b" "$built/$b"
  done
fi

# --- staging: what the client package's globs pick up ----------------------------------------
stage=$pkg_target/release/pkgroot
rm -rf "$stage"
mkdir -p "$stage/client/bin" "$stage/client/man1" "$stage/man-raw"
for b in "${client_bins[@]}"; do
  install -m 0755 "$pkg_target/release/$b" "$stage/client/bin/$b"
done
"$pkg_target/release/flotilla" man --out "$stage/man-raw"
for b in "${client_bins[@]}"; do
  [ -e "$stage/man-raw/$b.1" ] || { echo "no man page for $b (add it to admin/src/man.rs PAGES)" >&2; exit 1; }
done
for m in "$stage/man-raw"/*.1; do
  gzip -9n -c "$m" > "$stage/client/man1/$(basename "$m").gz"
done

# --- .deb ----------------------------------------------------------------------------------
for p in flotilla-commands flotilla-slurmctld flotilla-slurmd; do
  say "cargo deb -p $p"
  CARGO_TARGET_DIR=$pkg_target cargo deb --no-build -p "$p" -o "$out"
done

# --- .rpm ----------------------------------------------------------------------------------
if [ "${FLOTILLA_PKG_NO_RPM:-0}" != 1 ]; then
  for spec in client:flotilla-commands:commands controller:flotilla-slurmctld:slurmctld-rs node:flotilla-slurmd:slurmd-rs; do
    IFS=: read -r name _ dir <<<"$spec"
    say "cargo generate-rpm ($name)"
    # Asset paths in packaging/rpm/*.toml are relative to the crate; target/release/ is
    # rewritten to this build's target directory here.
    tmp=$target/pkg-rpm-$name.toml
    sed "s|\"target/release/|\"$pkg_target/release/|" "packaging/rpm/$name.toml" > "$tmp"
    cargo generate-rpm -p "$dir" --metadata-overwrite="$tmp" -o "$out"
  done
fi

say "packages in $out:"
ls -l "$out"
