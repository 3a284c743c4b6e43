#!/usr/bin/env bash
# Offline build of the original Lashlang (its `lashlang` crate) and a small runner around it
# (rust/runner): see oracle.py. Everything comes from the environment:
#   ORACLE_SOURCES      folder with lash-<commit>.tar.gz, compact_str-0.9.1.tar.gz, castaway-0.2.4.tar.gz
#   ORACLE_WORK         where to build
#   CARGO_REGISTRY_DIR  Debian's crate sources (default /usr/share/cargo/registry)
# No lashlang source file is changed: only manifests (patch_manifests.py), and the
# `lash-sansio` dependency is replaced by a shim holding just its attachment module.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
: "${ORACLE_SOURCES:?set ORACLE_SOURCES to the folder with the source archives}"
: "${ORACLE_WORK:?set ORACLE_WORK}"
CARGO_REGISTRY_DIR=${CARGO_REGISTRY_DIR:-/usr/share/cargo/registry}
SRC=$ORACLE_WORK/lash-src
BUILD=$ORACLE_WORK/build
mkdir -p "$ORACLE_WORK"

need="async-trait futures-executor rustc-hash serde serde_derive serde_json sha2 smallvec thiserror cfg-if itoa ryu static_assertions rustversion"
missing=""
for c in $need; do
  ls -d "$CARGO_REGISTRY_DIR/$c"-[0-9]* >/dev/null 2>&1 || missing="$missing librust-$(echo "$c" | tr '_' '-')-dev"
done
if [ -n "$missing" ]; then
  echo "installing Debian crate sources:$missing" >&2
  apt-get update -qq && apt-get install -y -qq $missing >/dev/null
fi

lash_tar=$(ls "$ORACLE_SOURCES"/lash-*.tar.gz | head -n 1)
if [ ! -d "$SRC/crates/lashlang" ]; then
  mkdir -p "$SRC"
  tar -xzf "$lash_tar" -C "$SRC" --strip-components=1
fi
rm -rf "$BUILD/lashlang" "$BUILD/vendor" "$BUILD/sansio-shim" "$BUILD/runner"
mkdir -p "$BUILD/vendor" "$BUILD/.cargo"
cp -r "$SRC/crates/lashlang" "$BUILD/lashlang"
rm -rf "$BUILD/lashlang/benches" "$BUILD/lashlang/examples" "$BUILD/lashlang/tests"
cp -r "$HERE/rust/sansio-shim" "$BUILD/sansio-shim"
cp "$SRC/crates/lash-sansio/src/attachment.rs" "$BUILD/sansio-shim/src/attachment.rs"
cp -r "$HERE/rust/runner" "$BUILD/runner"
tar -xzf "$ORACLE_SOURCES/compact_str-0.9.1.tar.gz" -C "$BUILD/vendor" --strip-components=1 compact_str/compact_str
tar -xzf "$ORACLE_SOURCES/castaway-0.2.4.tar.gz" -C "$BUILD/vendor"
python3 "$HERE/patch_manifests.py" "$BUILD"
printf '[workspace]\nmembers = ["lashlang", "runner"]\nresolver = "2"\n' > "$BUILD/Cargo.toml"
cat > "$BUILD/.cargo/config.toml" <<TOML
[source.crates-io]
replace-with = "debian"

[source.debian]
directory = "$CARGO_REGISTRY_DIR"

[net]
offline = true
TOML
(cd "$BUILD" && cargo build --release -p lash-diff-runner)
echo "runner: $BUILD/target/release/lash-diff-runner"
