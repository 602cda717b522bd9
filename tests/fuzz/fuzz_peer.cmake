# fuzz_peer: the peer state machine under arbitrary event sequences
# (fuzz_peer.c). Included from tests/fuzz/CMakeLists.txt after
# fuzz_master.cmake (which defines pccl_fuzz_core). Like fuzz_master: a corpus
# replay test with any compiler, and a libFuzzer binary with PCCL_FUZZ=ON and
# clang.
if(NOT PCCL_WASM)
  add_executable(fuzz_replay_peer ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_peer.c
                 ${CMAKE_CURRENT_SOURCE_DIR}/replay_main.c)
  target_link_libraries(fuzz_replay_peer PRIVATE pccl_core pccl_warnings)
  target_compile_definitions(fuzz_replay_peer PRIVATE _POSIX_C_SOURCE=200809L)
  add_test(NAME fuzz_replay_peer
    COMMAND fuzz_replay_peer ${CMAKE_CURRENT_SOURCE_DIR}/corpus/peer)
  set_tests_properties(fuzz_replay_peer PROPERTIES LABELS "unit")
endif()
if(PCCL_FUZZ)
  add_executable(fuzz_peer ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_peer.c)
  target_link_libraries(fuzz_peer PRIVATE pccl_fuzz_core pccl_warnings)
  target_compile_options(fuzz_peer PRIVATE -fsanitize=fuzzer,address,undefined
                         -fno-sanitize-recover=all -g)
  target_link_options(fuzz_peer PRIVATE -fsanitize=fuzzer,address,undefined)
endif()
