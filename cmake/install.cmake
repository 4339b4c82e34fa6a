# install.cmake - what `cmake --install` puts under the prefix, and how users find it:
#
#     lib/libic-llvm.so.0.1.0, .so.0, .so   the shared library (soname libic-llvm.so.<major>)
#     lib/libic-llvm.a                      the static library
#     include/ic/*.h, *.def                 the public headers
#     bin/ic-run ic-dump ic-cache ic-export the tools (ic-export: Python, needs torch)
#     share/ic-llvm/python/ic_export/       the package ic-export imports
#     lib/cmake/ic-llvm/                    find_package(ic-llvm): ic-llvm::ic-llvm (shared),
#                                           ic-llvm::ic-llvm-static, version file
#     lib/pkgconfig/ic-llvm.pc              pkg-config
#
# Nothing installed names the source or build folder: the link needs of the static library are
# looked up again on the user's machine (ic-llvm-config.cmake, Libs.private of the .pc), and
# the include path is the prefix's. A sanitized build (IC_SANITIZE) is only usable by programs
# linked with the same sanitizers: the package and the .pc say so with their link flags.
include(CMakePackageConfigHelpers)

set(IC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ic-llvm)
set(IC_PY_DIR ${CMAKE_INSTALL_DATADIR}/ic-llvm/python)
set(IC_SANITIZE_LINK -fsanitize=address,undefined)

if(IC_SANITIZE)
  # The library calls the sanitizer runtime, which must come first in the program: the
  # program links it.
  target_link_options(ic-llvm INTERFACE $<INSTALL_INTERFACE:${IC_SANITIZE_LINK}>)
  target_link_options(ic-llvm-static INTERFACE $<INSTALL_INTERFACE:${IC_SANITIZE_LINK}>)
endif()

install(TARGETS ic-llvm ic-llvm-static EXPORT ic-llvm-targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/ic DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.def")

foreach(tool ic-run ic-dump ic-cache)
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

# ic-export finds its package through the path in its IC_EXPORT_PYTHON_DIR line, relative to
# its real location: "." in the source tree, the bin -> share path once installed.
install(DIRECTORY tools/ic_export DESTINATION ${IC_PY_DIR}
        PATTERN "__pycache__" EXCLUDE PATTERN "*.pyc" EXCLUDE)
file(RELATIVE_PATH _ic_py_rel ${CMAKE_INSTALL_FULL_BINDIR}
     ${CMAKE_INSTALL_FULL_DATADIR}/ic-llvm/python)
file(READ ${CMAKE_CURRENT_SOURCE_DIR}/tools/ic-export _ic_export)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS tools/ic-export)
set(_ic_line "IC_EXPORT_PYTHON_DIR = \".\"")
string(FIND "${_ic_export}" "${_ic_line}" _ic_at)
if(_ic_at LESS 0)
  message(FATAL_ERROR "tools/ic-export: no line '${_ic_line}' to point at ${IC_PY_DIR}")
endif()
string(REPLACE "${_ic_line}" "IC_EXPORT_PYTHON_DIR = \"${_ic_py_rel}\"" _ic_export "${_ic_export}")
file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/install/ic-export CONTENT "${_ic_export}"
     @ONLY)
install(PROGRAMS ${CMAKE_CURRENT_BINARY_DIR}/install/ic-export DESTINATION ${CMAKE_INSTALL_BINDIR})

# ---- the CMake package ----
# Where the link needs were found here: hints for the same search on the user's machine.
get_filename_component(IC_LLVM_LIB_DIR ${IC_LLVM_LIB} DIRECTORY)
set(IC_OMP_LIB_DIR "")
if(IC_ENABLE_OPENMP)
  get_filename_component(IC_OMP_LIB_DIR ${IC_OMP_LIB} DIRECTORY)
endif()
install(EXPORT ic-llvm-targets NAMESPACE ic-llvm:: FILE ic-llvm-targets.cmake
        DESTINATION ${IC_CMAKE_DIR})
configure_package_config_file(cmake/ic-llvm-config.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/install/ic-llvm-config.cmake
  INSTALL_DESTINATION ${IC_CMAKE_DIR} NO_SET_AND_CHECK_MACRO NO_CHECK_REQUIRED_COMPONENTS_MACRO)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/install/ic-llvm-config-version.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/install/ic-llvm-config.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/install/ic-llvm-config-version.cmake
        DESTINATION ${IC_CMAKE_DIR})

# ---- pkg-config ----
# "-L<dir> -l<name>" for a library file found here (-l:<file> when it is not lib<name>.so).
function(ic_pc_lib path out)
  get_filename_component(dir ${path} DIRECTORY)
  get_filename_component(file ${path} NAME)
  if(file MATCHES "^lib(.+)\\.so$")
    set(${out} "-L${dir} -l${CMAKE_MATCH_1}" PARENT_SCOPE)
  else()
    set(${out} "-L${dir} -l:${file}" PARENT_SCOPE)
  endif()
endfunction()
ic_pc_lib(${IC_LLVM_LIB} _ic_pc_llvm)
set(IC_PC_LIBS_PRIVATE "${_ic_pc_llvm}")
if(IC_ENABLE_OPENMP)
  ic_pc_lib(${IC_OMP_LIB} _ic_pc_omp)
  # Generated code calls __kmpc_*: keep libomp although no object of the program refers to it.
  string(APPEND IC_PC_LIBS_PRIVATE " -Wl,--push-state,--no-as-needed ${_ic_pc_omp} -Wl,--pop-state")
endif()
string(APPEND IC_PC_LIBS_PRIVATE " -pthread -l${CMAKE_DL_LIBS} -lm")
set(IC_PC_LIBS_SANITIZE "")
if(IC_SANITIZE)
  set(IC_PC_LIBS_SANITIZE " ${IC_SANITIZE_LINK}")
endif()
foreach(d LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${d}}")
    set(IC_PC_${d} "${CMAKE_INSTALL_${d}}")
  else()
    set(IC_PC_${d} "\${prefix}/${CMAKE_INSTALL_${d}}")
  endif()
endforeach()
# The prefix is the one given to `cmake --install --prefix`, known only at install time, so
# the file is written there and then (and added to install_manifest.txt).
set(IC_PC_PREFIX "@IC_PC_PREFIX@")  # kept for the install-time pass
configure_file(cmake/ic-llvm.pc.in ${CMAKE_CURRENT_BINARY_DIR}/install/ic-llvm.pc.in @ONLY)
install(CODE "
  set(IC_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(_pc \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig/ic-llvm.pc\")
  if(IS_ABSOLUTE \"${CMAKE_INSTALL_LIBDIR}\")
    set(_pc \"\$ENV{DESTDIR}${CMAKE_INSTALL_LIBDIR}/pkgconfig/ic-llvm.pc\")
  endif()
  message(STATUS \"Installing: \${_pc}\")
  configure_file(\"${CMAKE_CURRENT_BINARY_DIR}/install/ic-llvm.pc.in\" \"\${_pc}\" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${_pc}\")
")

# ---- tests ----
if(IC_BUILD_TESTS)
  # Every public header alone, with only include/ on the path, as C11 and as C++17.
  add_test(NAME Tools_check_headers
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/unittests/Tools/check_headers.sh
                   ${CMAKE_CURRENT_SOURCE_DIR}/include)
  set_tests_properties(Tools_check_headers PROPERTIES TIMEOUT 300 ENVIRONMENT
    "CC=${CMAKE_C_COMPILER};CXX=${CMAKE_CXX_COMPILER}")
endif()
