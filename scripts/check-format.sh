#!/usr/bin/env bash
# Fails when a C/C++ source of the project is not clang-format 14 clean.
# Generated code (schema/gen/) is produced formatted by its generator and
# checked by its own regeneration test, so it is skipped here.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files -co --exclude-standard -- '*.c' '*.h' '*.cpp' \
  | grep -v -E '^(schema/gen/|build)' || true)
if [[ ${#files[@]} -eq 0 ]]; then echo "format: no files"; exit 0; fi
if clang-format --dry-run --Werror "${files[@]}"; then
  echo "format: ${#files[@]} files clean"
  echo "1 passed, 0 failed"
else
  echo "format: run clang-format -i on the files above"
  echo "0 passed, 1 failed"
  exit 1
fi
