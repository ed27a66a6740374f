# check_exports.cmake -- fails unless libcollgen.so exports exactly the
# functions that collgen.h declares with COLLGEN_API.
#
#   cmake -DNM=<nm> -DLIBRARY=<libcollgen.so> -DHEADER=<src/collgen.h>
#         -P tests/check_exports.cmake
#
# The API is read from the header: every line that starts with COLLGEN_API
# names one function (the first identifier followed by "("). A line that
# declares a collgen_* function without the marker is an error too, since
# such a function would silently stay hidden. The exports are the defined
# dynamic symbols, `nm -D --defined-only`.
cmake_minimum_required(VERSION 3.21)
foreach(v NM LIBRARY HEADER)
  if(NOT ${v})
    message(FATAL_ERROR "check_exports: -D${v}=... is required")
  endif()
endforeach()

# ---- The API, from the header ------------------------------------------
file(STRINGS ${HEADER} lines REGEX "^[A-Za-z].*[ *]collgen_[a-z0-9_]+[ \t]*\\(")
set(api)
set(bad)
foreach(line IN LISTS lines)
  string(REPLACE ";" "" line "${line}") # a ";" would split it as a list
  if(line MATCHES "^(typedef|#)")
    continue()
  endif()
  if(NOT line MATCHES "^COLLGEN_API ")
    list(APPEND bad "${line}")
    continue()
  endif()
  string(REGEX MATCH "([A-Za-z_][A-Za-z0-9_]*)[ \t]*\\(" m "${line}")
  list(APPEND api ${CMAKE_MATCH_1})
endforeach()
if(bad)
  list(JOIN bad "\n  " text)
  message(FATAL_ERROR "collgen.h declares functions without COLLGEN_API:\n  ${text}")
endif()
list(LENGTH api napi)
if(napi EQUAL 0)
  message(FATAL_ERROR "no COLLGEN_API function found in ${HEADER}")
endif()

# ---- The exports, from the library -------------------------------------
execute_process(COMMAND ${NM} -D --defined-only ${LIBRARY}
  OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIBRARY} failed: ${err}")
endif()
string(REPLACE "\n" ";" out "${out}")
set(exported)
foreach(line IN LISTS out)
  # "<address> <type> <name>[@@version]"
  if(line MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^ @]+)")
    list(APPEND exported ${CMAKE_MATCH_1})
  endif()
endforeach()

# ---- Compare -------------------------------------------------------------
set(extra ${exported})
list(REMOVE_ITEM extra ${api})
set(missing ${api})
if(exported)
  list(REMOVE_ITEM missing ${exported})
endif()
set(msg)
if(extra)
  list(JOIN extra " " text)
  string(APPEND msg "exported but not COLLGEN_API in collgen.h: ${text}\n")
endif()
if(missing)
  list(JOIN missing " " text)
  string(APPEND msg "COLLGEN_API in collgen.h but not exported: ${text}\n")
endif()
if(msg)
  message(FATAL_ERROR "${LIBRARY}:\n${msg}")
endif()
list(LENGTH exported nexp)
message(STATUS "check_exports: ${nexp} exports, all COLLGEN_API (${napi} in collgen.h)")
