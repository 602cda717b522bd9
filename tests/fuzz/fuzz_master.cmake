# fuzz_master: the master state machine under arbitrary event sequences
# (core owner). Included from tests/fuzz/CMakeLists.txt with
#   include(${CMAKE_CURRENT_SOURCE_DIR}/fuzz_master.cmake)
# Like the codec targets: a corpus replay test with any compiler, and a
# libFuzzer binary with PCCL_FUZZ=ON and clang.
if(NOT PCCL_WASM)
  add_executable(fuzz_replay_master ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_master.c
                 ${CMAKE_CURRENT_SOURCE_DIR}/replay_main.c)
  target_link_libraries(fuzz_replay_master PRIVATE pccl_core pccl_warnings)
  target_compile_definitions(fuzz_replay_master PRIVATE _POSIX_C_SOURCE=200809L)
  add_test(NAME fuzz_replay_master
    COMMAND fuzz_replay_master ${CMAKE_CURRENT_SOURCE_DIR}/corpus/master)
  set_tests_properties(fuzz_replay_master PROPERTIES LABELS "unit")
endif()
if(PCCL_FUZZ)
  add_executable(fuzz_master ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_master.c)
  target_link_libraries(fuzz_master PRIVATE pccl_core pccl_warnings)
  target_compile_options(fuzz_master PRIVATE -fsanitize=fuzzer,address,undefined
                         -fno-sanitize-recover=all -g)
  target_link_options(fuzz_master PRIVATE -fsanitize=fuzzer,address,undefined)
endif()
