# Installs the built tree into a temporary prefix, then configures and
# builds docs/example/ against it with find_package(collgen) and runs it;
# then moves the install and builds the examples with pkg-config alone.
set(prefix ${BUILD_DIR}/install-test/prefix)
set(work ${BUILD_DIR}/install-test/build)
file(REMOVE_RECURSE ${BUILD_DIR}/install-test)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix}
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "install failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/docs/example -B ${work}
                -DCMAKE_PREFIX_PATH=${prefix} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the example against the install failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${work} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the example failed")
endif()
execute_process(COMMAND ${work}/collgen_example RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the example failed (${rc})")
endif()

# The installed collgen.pc is relocatable: it derives its prefix from
# ${pcfiledir}, so an install tree moved elsewhere (a container layer, a
# tarball unpacked under another root) still compiles and links through
# pkg-config. And it is enough: docs/example/example.c (collgen plus the
# CUDA runtime) and rank_example.c compile and link with
# `pkg-config --cflags --libs collgen` alone, and the example runs.
find_program(PKG_CONFIG NAMES pkg-config pkgconf)
find_program(CC NAMES cc gcc clang)
if(NOT PKG_CONFIG OR NOT CC)
  message(WARNING "pkg-config or a C compiler not found: collgen.pc not checked")
  return()
endif()
set(moved ${BUILD_DIR}/install-test/moved)
file(RENAME ${prefix} ${moved})
file(GLOB_RECURSE pcs ${moved}/*/collgen.pc)
list(LENGTH pcs npc)
if(NOT npc EQUAL 1)
  message(FATAL_ERROR "expected one installed collgen.pc, found: ${pcs}")
endif()
get_filename_component(pcdir ${pcs} DIRECTORY)
set(ENV{PKG_CONFIG_LIBDIR} ${pcdir})
set(ENV{PKG_CONFIG_PATH} "")
foreach(var prefix includedir libdir)
  execute_process(COMMAND ${PKG_CONFIG} --variable=${var} collgen RESULT_VARIABLE rc
                  OUTPUT_VARIABLE value OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc OR NOT IS_DIRECTORY "${value}")
    message(FATAL_ERROR "collgen.pc: ${var} '${value}' is not a directory of the moved "
                        "install ${moved} (rc ${rc})")
  endif()
  file(REAL_PATH "${value}" real)
  file(REAL_PATH "${moved}" real_moved)
  string(FIND "${real}" "${real_moved}" at)
  if(NOT at EQUAL 0)
    message(FATAL_ERROR "collgen.pc: ${var} '${value}' is outside the moved install ${moved}")
  endif()
  set(pc_${var} "${value}")
endforeach()
if(NOT EXISTS ${pc_includedir}/collgen.h)
  message(FATAL_ERROR "collgen.pc: no collgen.h in includedir ${pc_includedir}")
endif()
execute_process(COMMAND ${PKG_CONFIG} --variable=cuda_libdir collgen
                OUTPUT_VARIABLE pc_cuda_libdir OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND ${PKG_CONFIG} --cflags --libs collgen RESULT_VARIABLE rc
                OUTPUT_VARIABLE flags OUTPUT_STRIP_TRAILING_WHITESPACE)
if(rc)
  message(FATAL_ERROR "pkg-config --cflags --libs collgen failed")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
foreach(example example rank_example)
  execute_process(COMMAND ${CC} ${SOURCE_DIR}/docs/example/${example}.c
                  -o ${BUILD_DIR}/install-test/pc_${example} ${flags}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(rc)
    message(FATAL_ERROR "docs/example/${example}.c does not compile and link with "
                        "`pkg-config --cflags --libs collgen` (${flags}) alone:\n${out}")
  endif()
endforeach()
# Prepend, not replace: a staged Lua (the GPU machine's .deps) is found
# through the caller's LD_LIBRARY_PATH.
set(ENV{LD_LIBRARY_PATH} "${pc_libdir}:${pc_cuda_libdir}:$ENV{LD_LIBRARY_PATH}")
execute_process(COMMAND ${BUILD_DIR}/install-test/pc_example RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the example built with pkg-config failed (${rc}): ${out}")
endif()
message("the example built with pkg-config, from the moved install: ${out}")
