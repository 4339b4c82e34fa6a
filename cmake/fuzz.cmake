# Fuzz harnesses (unittests/Fuzz/fuzz_<name>.c, each defining LLVMFuzzerTestOneInput).
#
# IC_FUZZ=ON (clang-19 only; scripts/ci-fuzz.sh): the library is compiled with
# -fsanitize=fuzzer-no-link,address,undefined and each harness becomes a libFuzzer binary
# fuzz_<name>. In every other build each harness is linked with replay_main.c instead
# (fuzz_<name>_replay) and, with the tests, ctest Fuzz_<name> replays its seed corpus and its
# regression inputs (unittests/Fuzz/regress/<name>/: the crashes found, fixed since).
option(IC_FUZZ "ic: build the libFuzzer harnesses (needs clang-19 as C and C++ compiler)" OFF)

file(GLOB IC_FUZZ_HARNESSES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/unittests/Fuzz/fuzz_*.c)
set(_fz_dir ${CMAKE_CURRENT_SOURCE_DIR}/unittests/Fuzz)

if(IC_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "IC_FUZZ needs clang (-DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19)")
  endif()
  set(_fz_flags -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                -fno-omit-frame-pointer)
  foreach(l ${IC_LAYERS})
    target_compile_options(${l} PRIVATE ${_fz_flags})
  endforeach()
endif()

# The seeds of the runtime formats, made by this build (make_seeds.c; scripts/ci-fuzz.sh).
list(APPEND IC_FUZZ_HARNESSES ${_fz_dir}/make_seeds.c)

foreach(h ${IC_FUZZ_HARNESSES})
  get_filename_component(exe ${h} NAME_WE)           # fuzz_<name>
  string(REGEX REPLACE "^fuzz_" "" name ${exe})
  if(exe STREQUAL "make_seeds")
    set(exe fuzz_make_seeds)
    add_executable(${exe} ${h})
    if(IC_FUZZ)
      target_compile_options(${exe} PRIVATE ${_fz_flags})
      target_link_options(${exe} PRIVATE -fsanitize=address,undefined)
    endif()
  elseif(IC_FUZZ)
    add_executable(${exe} ${h})
    target_compile_options(${exe} PRIVATE ${_fz_flags})
    target_link_options(${exe} PRIVATE -fsanitize=fuzzer,address,undefined)
  else()
    set(exe ${exe}_replay)
    add_executable(${exe} ${h} ${_fz_dir}/replay_main.c)
  endif()
  target_include_directories(${exe} PRIVATE ${_fz_dir} ${CMAKE_CURRENT_SOURCE_DIR}/lib/Graph
                             ${CMAKE_CURRENT_SOURCE_DIR}/lib/Runtime ${CMAKE_CURRENT_SOURCE_DIR}/lib/LLVMGen
                             ${CMAKE_CURRENT_SOURCE_DIR}/lib/PTX ${CMAKE_CURRENT_SOURCE_DIR}/lib/Lower
                             ${IC_LLVM_INCLUDE})
  target_link_libraries(${exe} PRIVATE ic-llvm-static)
  if(IC_BUILD_TESTS AND NOT IC_FUZZ AND NOT exe STREQUAL "fuzz_make_seeds")
    add_test(NAME Fuzz_${name} COMMAND ${exe} ${_fz_dir}/corpus/${name} ${_fz_dir}/regress/${name})
    set_tests_properties(Fuzz_${name} PROPERTIES TIMEOUT 600
      FAIL_REGULAR_EXPRESSION "ERROR: (Leak|Address)Sanitizer|runtime error:")
  endif()
endforeach()
