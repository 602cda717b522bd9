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
  # The core once more, instrumented (coverage for libFuzzer, ASan, UBSan):
  # linking the plain pccl_core would leave the fuzzer blind inside it.
  if(NOT TARGET pccl_fuzz_core)
    get_target_property(pccl_fuzz_core_sources pccl_core SOURCES)
    add_library(pccl_fuzz_core STATIC ${pccl_fuzz_core_sources})
    target_include_directories(pccl_fuzz_core PUBLIC ${CMAKE_SOURCE_DIR}/core
                               ${CMAKE_SOURCE_DIR}/schema/gen ${CMAKE_BINARY_DIR}/third_include
                               PRIVATE ${CMAKE_SOURCE_DIR}/core/internal)
    target_link_libraries(pccl_fuzz_core PUBLIC pccl_headers m PRIVATE pccl_warnings pccl_fp)
    target_compile_options(pccl_fuzz_core PRIVATE
                           -fsanitize=fuzzer-no-link,address,undefined
                           -fno-sanitize-recover=all -g)
  endif()
  add_executable(fuzz_master ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_master.c)
  target_link_libraries(fuzz_master PRIVATE pccl_fuzz_core pccl_warnings)
  target_compile_options(fuzz_master PRIVATE -fsanitize=fuzzer,address,undefined
                         -fno-sanitize-recover=all -g)
  target_link_options(fuzz_master PRIVATE -fsanitize=fuzzer,address,undefined)
endif()
