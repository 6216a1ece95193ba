# Thin wrapper over CMake presets. The two commands of the quick start:
#   make run    install what is missing, build, run the main job on examples/
#   make test   the same set-up, then the whole suite (unit, e2e, asan, fuzz smoke, packages)
#   make deb    the Debian packages, in build/deb/

JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 10

.PHONY: all deps build run test test-dev test-asan fuzz-smoke bench bench-ab install deb deb-check clean

all: build

deps:
	@sh scripts/deps.sh

build: deps
	@cmake --preset dev >/dev/null
	@MAKEFLAGS= cmake --build --preset dev -j $(JOBS)

run: build
	@sh scripts/run-examples.sh build/dev

test: build
	@sh scripts/test-all.sh

test-dev: build
	@ctest --preset dev

test-asan: deps
	@cmake --preset asan >/dev/null
	@MAKEFLAGS= cmake --build --preset asan -j $(JOBS)
	@ctest --preset asan

fuzz-smoke: deps
	@cmake --preset fuzz >/dev/null
	@MAKEFLAGS= cmake --build --preset fuzz -j $(JOBS)
	@sh scripts/fuzz-smoke.sh build/fuzz $(FUZZ_SECONDS)

bench: deps
	@cmake --preset release -B build/bench -DPINHOLE_BUILD_BENCH=ON -DPINHOLE_BUILD_TESTS=ON >/dev/null
	@MAKEFLAGS= cmake --build build/bench -j $(JOBS)
	@sh scripts/bench.sh build/bench

# bench_proxy A/B in one run: OLD's pinhole-proxy (a git revision, built in
# build/ab/OLD) against this tree's, the same rounds interleaved.
OLD ?= 4acfad0
bench-ab: deps
	@cmake --preset release -B build/bench -DPINHOLE_BUILD_BENCH=ON -DPINHOLE_BUILD_TESTS=ON >/dev/null
	@MAKEFLAGS= cmake --build build/bench -j $(JOBS)
	@sh scripts/bench.sh --ab $(OLD) build/bench

install: build
	@cmake --install build/dev

# The Debian packages (debian/), built in build/deb/src; the .deb files in
# build/deb/ (docs/deploy.md).
deb: deps
	@sh scripts/deb.sh build/deb

# The packages installed into a fresh Debian 12 chroot (debootstrap, root):
# the proxy started there (scripts/deb-chroot-check.sh).
deb-check: deb
	@sh scripts/deb-chroot-check.sh build/deb

clean:
	@rm -rf build
