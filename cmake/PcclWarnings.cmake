# Warning flags for the project's own code (STYLE.md): an INTERFACE target
# that every project target links. PCCL_WERROR (CI) turns them into errors.
add_library(pccl_warnings INTERFACE)
target_compile_options(pccl_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion -Wvla -Wundef
  -Wcast-align -Wpointer-arith -Wwrite-strings -Wformat=2
  $<$<COMPILE_LANGUAGE:C>:-Wstrict-prototypes -Wmissing-prototypes -Wold-style-definition>)
if(PCCL_WERROR)
  target_compile_options(pccl_warnings INTERFACE -Werror)
endif()

# Deterministic floating point for anything that touches reduced data
# (DESIGN.md §2 rule 9): no FMA contraction.
add_library(pccl_fp INTERFACE)
target_compile_options(pccl_fp INTERFACE -ffp-contract=off)
