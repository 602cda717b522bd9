# fuzz_trace: the trace file decoder (core/ccoip_trace.h) on arbitrary bytes
# (sim owner). Included from tests/fuzz/CMakeLists.txt with
#   include(${CMAKE_CURRENT_SOURCE_DIR}/fuzz_trace.cmake)
# Like the codec targets: a corpus replay test with any compiler, and a
# libFuzzer binary with PCCL_FUZZ=ON and clang.
if(NOT PCCL_WASM)
  add_executable(fuzz_replay_trace ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_trace.c
                 ${CMAKE_CURRENT_SOURCE_DIR}/replay_main.c)
  target_link_libraries(fuzz_replay_trace PRIVATE pccl_core pccl_warnings)
  target_compile_definitions(fuzz_replay_trace PRIVATE _POSIX_C_SOURCE=200809L)
  add_test(NAME fuzz_replay_trace
    COMMAND fuzz_replay_trace ${CMAKE_CURRENT_SOURCE_DIR}/corpus/trace)
  set_tests_properties(fuzz_replay_trace PROPERTIES LABELS "unit")
endif()
if(PCCL_FUZZ)
  add_executable(fuzz_trace ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_trace.c)
  target_link_libraries(fuzz_trace PRIVATE pccl_core pccl_warnings)
  target_compile_options(fuzz_trace PRIVATE -fsanitize=fuzzer,address,undefined
                         -fno-sanitize-recover=all -g)
  target_link_options(fuzz_trace PRIVATE -fsanitize=fuzzer,address,undefined)
endif()
