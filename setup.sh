#!/usr/bin/env bash
# Set-up for a fresh Debian 12 machine. Two commands:
#   ./setup.sh run    install, build, and run the main job
#   ./setup.sh test   install, build, and run every test (host and VMs)
# and, for CI jobs (none compiles the test suite): ./setup.sh build (memrun
# only, e.g. to merge reports), ./setup.sh specs (memrun and what the
# example specs run: the workload binary, Node.js and DuckDB) and
# ./setup.sh install (memrun built, then installed in /usr/local with cmake
# --install: memrun on PATH, its man page and CMake package; what the GitHub
# Action does without a release). As root it installs packages itself; as
# another user (a hosted CI runner's, with passwordless sudo) through sudo,
# and says so.
set -euo pipefail
cd "$(dirname "$0")"

# Package installs need root: sudo when not root.
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; return; fi
  command -v sudo > /dev/null || { echo "setup: installing packages needs root, and sudo is missing" >&2; exit 1; }
  echo "setup: not root: installing through sudo"
  sudo DEBIAN_FRONTEND=noninteractive "$@"
}

build_packages=(g++ cmake ninja-build pkg-config bc libcli11-dev libyaml-cpp-dev
  libsystemd-dev libfmt-dev nlohmann-json3-dev libgtest-dev libpugixml-dev libre2-dev)
# The VM tests boot Debian's kernel under qemu (tests/vm/).
vm_packages=(qemu-system-x86 linux-image-amd64 busybox-static cpio)
# xmllint checks the JUnit output against tests/junit.xsd; clang builds the
# libFuzzer target (tests/fuzz/); tmux gives the live-view test a terminal;
# python3-pytest runs the example pytest suite (tests/suites/pytest).
# dpkg-dev's dpkg-shlibdeps gives the .deb its Depends (tests/install).
# sudo, curl and python3-yaml: the CI templates walked as a runner's user (tests/ci).
# heaptrack: explain profiles native programs with it (tests/explain_test.cc).
# chromium and cmark-gfm: explain's HTML and Markdown looked at (tests/browser).
test_packages=(libxml2-utils clang libclang-rt-14-dev tmux python3-pytest python3-venv dpkg-dev sudo curl python3-yaml heaptrack
  chromium cmark-gfm "${vm_packages[@]}")

# Installs what is missing; apt-get update only when something is.
install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -q
  as_root apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# Node.js runs the DuckDB workloads of specs/parquet.yaml; Debian's nodejs
# package lacks npm where the machine's does not.
install_node() {
  command -v node > /dev/null || install nodejs
  command -v npm > /dev/null || install npm
}

# DuckDB (@duckdb/node-api, the engine inside) as pinned by the lockfile.
install_duckdb() {
  local dir=specs/parquet
  if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
    npm ci --prefix "$dir" --no-audit --no-fund
  fi
}

# The Python environments of specs/polars.yaml and of the Polars regression
# test, one per lock file of specs/python (exact versions, with hashes), in
# .venv/NAME inside the checkout: made, or remade, only when missing or when
# its lock changed.
install_python() {
  local lock name venv stamp
  for lock in specs/python/*.lock; do
    name=$(basename "$lock" .lock)
    venv=.venv/$name
    stamp=$(sha256sum "$lock" | cut -d' ' -f1)
    [ "$(cat "$venv/.lock-sha256" 2>/dev/null)" = "$stamp" ] && continue
    echo "setup: Python environment $venv from $lock"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --require-hashes -r "$lock"
    echo "$stamp" > "$venv/.lock-sha256"
  done
}

# What the Python wheel's test (tests/python/check) installs beside the wheel,
# and scikit-build-core that builds it: python/test.lock's packages, fetched
# into .venv/wheelhouse so that the test installs from there offline.
install_wheelhouse() {
  local stamp
  stamp=$(sha256sum python/test.lock | cut -d' ' -f1)
  [ "$(cat .venv/wheelhouse/.lock-sha256 2>/dev/null)" = "$stamp" ] && return
  echo "setup: Python wheelhouse .venv/wheelhouse from python/test.lock"
  rm -rf .venv/wheelhouse
  python3 -m pip download -q --disable-pip-version-check --no-deps --require-hashes -r python/test.lock \
    -d .venv/wheelhouse
  echo "$stamp" > .venv/wheelhouse/.lock-sha256
}

# The targets named (a CI job need not compile the test suite: memrun, and
# for the example specs the workload specs/parquet.yaml runs), or everything.
build() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
  cmake --build build ${1:+--target "$@"}
}

case "${1:-}" in
  run)
    install "${build_packages[@]}"
    install_node
    build memrun memrun-workload
    install_duckdb
    exec build/memrun specs/parquet.yaml
    ;;
  build)
    install "${build_packages[@]}"
    build memrun
    ;;
  install)
    install "${build_packages[@]}"
    build memrun
    as_root cmake --install build --prefix /usr/local
    ;;
  specs)
    install "${build_packages[@]}"
    install_node
    build memrun memrun-workload
    install_duckdb
    ;;
  test)
    install "${build_packages[@]}" "${test_packages[@]}"
    install_node
    build
    install_duckdb
    install_python
    install_wheelhouse
    cd build
    exec ctest --output-on-failure -j2
    ;;
  *)
    echo "usage: ./setup.sh run|test|build|specs|install" >&2
    exit 2
    ;;
esac
