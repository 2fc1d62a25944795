#!/bin/sh
# Builds syscalls.bpf.o from syscalls.bpf.c: the object committed beside it, which the crate
# embeds (include_bytes!), so that `cargo build` needs no C compiler. Run from anywhere; .ci/run
# runs it into a temporary file and checks that the bytes equal the committed object's.
# Needs clang (Debian's clang-14), llvm-strip and libbpf's headers (libbpf-dev).
#
#   -g: BTF (.BTF, .BTF.ext), which the CO-RE relocations and the maps' definitions need; the
#       DWARF sections are then stripped (llvm-strip -g), keeping BTF, so that the object holds
#       no build directory.
#   Paths are relative and the compilation directory is `.`, so the output does not depend on
#   where the tree is checked out.
set -eu
cd "$(dirname "$0")"
out="${1:-syscalls.bpf.o}"
CLANG="${CLANG:-clang}"
STRIP="${LLVM_STRIP:-llvm-strip}"
"$CLANG" -target bpf -O2 -g -fdebug-compilation-dir=. -fno-ident \
    -Wall -Werror -I. -c syscalls.bpf.c -o "$out.tmp"
"$STRIP" -g "$out.tmp"
mv "$out.tmp" "$out"
