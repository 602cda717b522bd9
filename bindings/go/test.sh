#!/usr/bin/env bash
# bindings/go/test.sh DIR — vet and test the Go binding against an installed
# libpccl found through pkg-config (the package's default, cgo_pkgconfig.go).
# DIR is an install prefix (DIR/lib*/pkgconfig/pccl.pc) or an existing CMake
# build (target pccl and friends built; builds no C code), which is first
# installed into DIR/go/prefix with cmake --install.
# PCCL_GO_NO_PKGCONFIG=1 tests the fallback instead: -tags pccl_no_pkgconfig,
# the checkout's include/ and CGO_LDFLAGS at DIR's libpccl.so.
# Offline: GOFLAGS=-mod=mod GOPROXY=off; Go caches live under DIR/go (the build
# cache under PCCL_GO_CACHE when set, to share it between runs).
# Exit status: 0 pass, 1 failure, 2 usage, 77 Go is not installed.
set -euo pipefail
if [ $# -ne 1 ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "$1" && pwd)"
if ! command -v go >/dev/null 2>&1; then
    echo "go binding: SKIP: go is not installed (apt-get install golang-go)" >&2
    exit 77
fi
export GOCACHE="${PCCL_GO_CACHE:-$build/go/cache}" GOPATH="$build/go/path" GOFLAGS=-mod=mod GOPROXY=off GO111MODULE=on
export CGO_ENABLED=1
mkdir -p "$GOCACHE" "$GOPATH"
if [ "${PCCL_GO_NO_PKGCONFIG:-0}" = 1 ]; then
    libdir=""
    for d in "$build/bindings/libpccl" "$build/lib" "$build"; do
        if [ -e "$d/libpccl.so" ]; then
            libdir="$d"
            break
        fi
    done
    if [ -z "$libdir" ]; then
        echo "go binding: no libpccl.so under $build (build the target pccl first)" >&2
        exit 1
    fi
    # in GOFLAGS so that the tests' own `go build`s of cmd/ get the tag too
    export GOFLAGS="$GOFLAGS -tags=pccl_no_pkgconfig"
    export CGO_LDFLAGS="-L$libdir -Wl,-rpath,$libdir"
    how="without pkg-config, libpccl from $libdir"
else
    if [ -f "$build/CMakeCache.txt" ]; then
        rm -rf "$build/go/prefix"
        cmake --install "$build" --prefix "$build/go/prefix" >/dev/null
        pc=$(find "$build/go/prefix" -path '*/pkgconfig/pccl.pc' | head -1)
    else
        pc=$(find "$build" -maxdepth 4 -path '*/pkgconfig/pccl.pc' -not -path "$build/go/*" | head -1)
    fi
    if [ -z "$pc" ]; then
        echo "go binding: no pccl.pc under $build (an install prefix or a built CMake tree)" >&2
        exit 1
    fi
    export PKG_CONFIG_PATH="$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    libdir=$(pkg-config --variable=libdir pccl)
    # pkg-config gives -L only; the tests run from a prefix the loader does not search
    export CGO_LDFLAGS="-Wl,-rpath,$libdir"
    how="pkg-config pccl: $(pkg-config --cflags --libs pccl)"
fi
cd "$here"
echo "go binding: $(go version), $how"
unformatted="$(gofmt -l .)"
if [ -n "$unformatted" ]; then
    echo "go binding: gofmt needed for: $unformatted" >&2
    exit 1
fi
go vet ./...
status=0
timeout 110 go test -count=1 -timeout 100s -v ./... >"$build/go/test.log" 2>&1 || status=$?
grep -E '^(--- |ok|FAIL|panic)' "$build/go/test.log" || true
if [ "$status" -ne 0 ] || ! grep -Eq '^ok[[:space:]]+pccl.dev/pccl[[:space:]]' "$build/go/test.log"; then
    echo "go binding: FAILED with status $status (log: $build/go/test.log)" >&2
    tail -40 "$build/go/test.log" >&2
    exit 1
fi
echo "go binding: all tests passed"
