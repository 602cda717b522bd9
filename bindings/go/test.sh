#!/usr/bin/env bash
# bindings/go/test.sh BUILD_DIR — vet and test the Go binding against the
# libpccl.so of an existing CMake build (target pccl; builds no C code).
# Offline: GOFLAGS=-mod=mod GOPROXY=off; Go caches live under BUILD_DIR/go.
# Exit status: 0 pass, 1 failure, 2 usage, 77 Go is not installed.
set -euo pipefail
if [ $# -ne 1 ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
build="$(cd "$1" && pwd)"
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
if ! command -v go >/dev/null 2>&1; then
    echo "go binding: SKIP: go is not installed (apt-get install golang-go)" >&2
    exit 77
fi
export GOCACHE="$build/go/cache" GOPATH="$build/go/path" GOFLAGS=-mod=mod GOPROXY=off GO111MODULE=on
export CGO_ENABLED=1 CGO_LDFLAGS="-L$libdir -Wl,-rpath,$libdir"
mkdir -p "$GOCACHE" "$GOPATH"
cd "$here"
echo "go binding: $(go version), libpccl from $libdir"
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
