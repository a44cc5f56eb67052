# Compiler flags shared by every minfer target (applied through minfer_options).
add_library(minfer_options INTERFACE)
target_compile_options(minfer_options INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wno-missing-field-initializers)
# GCC 12's -Wrestrict / -Wstringop-overflow fire on std::string and std::vector internals (GCC bugs 105329,
# 105651), more so with sanitizers; they are off for GCC < 13 only. Every other warning stays an error.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(minfer_options INTERFACE -Wno-restrict -Wno-stringop-overflow)
endif()
if(MINFER_WERROR)
  target_compile_options(minfer_options INTERFACE -Werror)
endif()
if(MINFER_NATIVE)
  target_compile_options(minfer_options INTERFACE -march=native)
endif()
if(MINFER_SANITIZE)
  target_compile_options(minfer_options INTERFACE -fsanitize=${MINFER_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(minfer_options INTERFACE -fsanitize=${MINFER_SANITIZE})
endif()
if(MINFER_FUZZ)
  # Coverage instrumentation for every library a fuzzer links (the fuzz targets add -fsanitize=fuzzer):
  # without it libFuzzer sees only the harness's own branches and mutates blind.
  target_compile_options(minfer_options INTERFACE -fsanitize=fuzzer-no-link)
endif()
target_include_directories(minfer_options INTERFACE ${PROJECT_SOURCE_DIR}/src)

# minfer_layer(NAME [UNITY] SOURCES... DEPS ...): one static library per source folder.
# Linking only the lower layers a folder may use makes a wrong include a build error.
# UNITY (with MINFER_UNITY, on by default): the sources compile a few per translation unit, for folders whose
# files each pay for the same heavy headers (CLI11 2.1 alone costs 5-10 s per file, at every -O level) and
# whose speed does not matter. The asan preset turns it off, so each file is still checked on its own
# includes there.
function(minfer_layer name)
  cmake_parse_arguments(L "UNITY" "" "SOURCES;DEPS" ${ARGN})
  add_library(minfer_${name} STATIC ${L_SOURCES})
  target_link_libraries(minfer_${name} PUBLIC minfer_options ${L_DEPS})
  if(L_UNITY AND MINFER_UNITY)
    set_target_properties(minfer_${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()
