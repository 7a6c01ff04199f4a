#!/bin/bash
# Writes the PTX of the 8192^2 bench kernels of the stream, reduction and transpose lowerings
# to .dev/simt/ptx (run here, before gpurun_simt.sh carries .dev/simt to the GPU machine).
set -e
B=.dev/simt
mkdir -p $B/ptx $B/graphs
g() { # name, input decl, op line
  printf 'graph %s {\n  input %%x: %s\n  %s\n  output %%y\n}\n' "$1" "$2" "$3" > $B/graphs/$1.tg
  $B/tessera-qa compile --target ptx $B/graphs/$1.tg > $B/ptx/$1.ptx
}
g copy_f32 'f32[8192,8192]' '%y = reshape(%x) {shape=[67108864]}'
g copy_bf16 'bf16[8192,8192]' '%y = reshape(%x) {shape=[67108864]}'
g cast_f32_bf16 'f32[8192,8192]' '%y = cast(%x) {to=bf16}'
g cast_bf16_f32 'bf16[8192,8192]' '%y = cast(%x) {to=f32}'
g gelu_bf16 'bf16[8192,8192]' '%y = gelu(%x) {approx="tanh"}'
g add_bf16 'bf16[8192,8192]' '%y = add(%x, %x)'
g reduce_sum_rows 'f32[8192,8192]' '%y = reduce_sum(%x) {axes=[1]}'
g reduce_sum_cols 'f32[8192,8192]' '%y = reduce_sum(%x) {axes=[0]}'
g reduce_max_rows 'f32[8192,8192]' '%y = reduce_max(%x) {axes=[1]}'
g transpose_bf16 'bf16[8192,8192]' '%y = transpose(%x) {perm=[1,0]}'
grep -h "path" $B/ptx/*.ptx | head -20
