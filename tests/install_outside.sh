#!/bin/sh
# install_outside.sh BUILD: `cmake --install` into a temporary prefix, then, outside the tree,
# (1) a program of one's own (examples/hello_allreduce.c) builds with pkg-config alone and runs
# a scenario that names a preset; (2) the installed `rehearsal` reads the installed presets;
# (3) a copy of the program in another tree reads that tree's presets, not this one's.
set -eu
build=$1
src=$(pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rh-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
pc=$(dirname "$(find "$tmp/prefix" -name rehearsal.pc | head -n 1)")
[ -f "$pc/rehearsal.pc" ] || fail "no rehearsal.pc installed"
[ -f "$tmp/prefix/include/rehearsal/rehearsal.h" ] || fail "no header installed"
[ -x "$tmp/prefix/bin/rehearsal" ] || fail "no rehearsal installed"
presets="$tmp/prefix/share/rehearsal/presets"
[ -f "$presets/node/dgx-h100.yaml" ] || fail "no presets installed"

# A scenario of one's own, in a folder of its own, whose cluster is a preset.
mkdir "$tmp/job" "$tmp/job/out"
cat > "$tmp/job/mine.yaml" <<'YAML'
name: mine
cluster: {node: only-installed, nodes: 2}
model: {name: m, parameters: 1000000, forward_gflops_per_sample: 1}
data: {train_samples: 6400}
recipe: {batch_per_worker: 32, epochs: 1}
YAML
# a preset that exists only in the installed copy
cp "$presets/node/dgx-h100.yaml" "$presets/node/only-installed.yaml"

# (1) pkg-config alone builds the program; it finds the presets where RH_PRESETS says
cp "$src/examples/hello_allreduce.c" "$tmp/job/"
cd "$tmp/job"
cc hello_allreduce.c $(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs rehearsal) -o hello \
  || fail "cc with pkg-config --cflags --libs rehearsal"
RH_PRESETS="$presets" ./hello --scenario mine.yaml > hello.out 2>&1 || { cat hello.out; fail "hello_allreduce"; }
grep -q "rank 0 of 16 .*(right)" hello.out || { cat hello.out; fail "hello_allreduce's result"; }

# (2) the installed program reads the installed presets, with no RH_PRESETS
env -u RH_PRESETS "$tmp/prefix/bin/rehearsal" run mine.yaml --no-what-if --out out > run.out 2>&1 \
  || { cat run.out; fail "installed rehearsal run"; }

# (3) a program copied into another tree's build folder reads that tree's presets
mkdir -p "$tmp/copy/build/tool"
cp "$build/tool/rehearsal" "$tmp/copy/build/tool/"
cp -R "$src/presets" "$tmp/copy/presets"
cp "$presets/node/dgx-h100.yaml" "$tmp/copy/presets/node/only-in-the-copy.yaml"
sed 's/only-installed/only-in-the-copy/' mine.yaml > copy.yaml
env -u RH_PRESETS "$tmp/copy/build/tool/rehearsal" run copy.yaml --no-what-if > copy.out 2>&1 \
  || { cat copy.out; fail "a copy of the program in another tree"; }
echo "install_outside: 3 passed, 0 failed"
