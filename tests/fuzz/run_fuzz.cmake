# cmake -DFUZZER=... -DCORPUS=... -DDICT=... -DWORK=... -DSECONDS=... -P run_fuzz.cmake
# Runs the fuzzer on a copy of CORPUS for SECONDS; fails on any finding.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/corpus ${WORK}/artifacts)
file(GLOB seeds ${CORPUS}/*)
if(NOT seeds)
  message(FATAL_ERROR "no seed corpus in ${CORPUS}")
endif()
file(COPY ${seeds} DESTINATION ${WORK}/corpus)
set(cmd ${FUZZER} ${WORK}/corpus -dict=${DICT} -max_total_time=${SECONDS} -timeout=10
        -rss_limit_mb=2048 -artifact_prefix=${WORK}/artifacts/ -print_final_stats=1)
string(REPLACE ";" " " shown "${cmd}")
message(STATUS "fuzz: ${shown}")
if(SYMBOLIZER AND NOT DEFINED ENV{ASAN_SYMBOLIZER_PATH})
  set(ENV{ASAN_SYMBOLIZER_PATH} ${SYMBOLIZER})
endif()
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(GLOB found ${WORK}/artifacts/*)
  message(FATAL_ERROR "segment_fuzz failed (exit ${rc}); reproducer: ${found}\n"
                      "  replay it with: ${FUZZER} <reproducer>")
endif()
