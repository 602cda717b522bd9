# fuzz_transport: the runtime's frame handling on bytes a stranger sends over TCP to every port
# pccl opens (fuzz_transport.c; issue 19). Included from tests/fuzz/CMakeLists.txt after
# fuzz_master.cmake (which defines pccl_fuzz_core). Native only. A corpus replay test with any
# compiler (label hostile: real sockets on 127.0.0.1, seconds), and a libFuzzer binary with
# PCCL_FUZZ=ON and clang. tests/fuzz is added before transport/: sources by path, targets by
# name (resolved at generation).
if(NOT PCCL_WASM)
  add_executable(fuzz_replay_transport ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_transport.c
                 ${CMAKE_CURRENT_SOURCE_DIR}/replay_main.c)
  target_link_libraries(fuzz_replay_transport PRIVATE pccl_transport pccl_warnings)
  target_compile_definitions(fuzz_replay_transport PRIVATE _POSIX_C_SOURCE=200809L
                             FUZZ_REPLAY_PREFIXES=0)
  add_test(NAME fuzz_replay_transport
    COMMAND fuzz_replay_transport ${CMAKE_CURRENT_SOURCE_DIR}/corpus/transport)
  set_tests_properties(fuzz_replay_transport PROPERTIES LABELS "hostile" TIMEOUT 120)
  # The same seeds against an authenticated master and peer (a run token in the environment):
  # every data port challenges first and closes what carries no proof (docs/security.md).
  add_test(NAME fuzz_replay_transport_auth
    COMMAND fuzz_replay_transport ${CMAKE_CURRENT_SOURCE_DIR}/corpus/transport)
  set_tests_properties(fuzz_replay_transport_auth PROPERTIES LABELS "hostile" TIMEOUT 120
    ENVIRONMENT "PCCL_RUN_TOKEN=fuzz-transport-run-token-0123456789")
endif()
if(PCCL_FUZZ AND NOT PCCL_WASM)
  # The transport once more, instrumented like pccl_fuzz_core (coverage, ASan, UBSan).
  file(GLOB pccl_fuzz_transport_sources ${CMAKE_SOURCE_DIR}/transport/pt_*.c)
  add_library(pccl_fuzz_transport STATIC ${pccl_fuzz_transport_sources})
  target_include_directories(pccl_fuzz_transport PUBLIC ${CMAKE_SOURCE_DIR}/transport)
  target_link_libraries(pccl_fuzz_transport PUBLIC pccl_fuzz_core nng::nng Threads::Threads
                        PRIVATE pccl_warnings pccl_fp)
  target_compile_options(pccl_fuzz_transport PRIVATE -fsanitize=fuzzer-no-link,address,undefined
                         -fno-sanitize-recover=all -g)
  add_executable(fuzz_transport ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_transport.c)
  target_link_libraries(fuzz_transport PRIVATE pccl_fuzz_transport pccl_warnings)
  target_compile_options(fuzz_transport PRIVATE -fsanitize=fuzzer,address,undefined
                         -fno-sanitize-recover=all -g)
  target_link_options(fuzz_transport PRIVATE -fsanitize=fuzzer,address,undefined)
endif()
