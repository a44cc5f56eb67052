# Third-party dependencies, all from Debian packages (scripts/setup.sh installs them).
find_package(fmt REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 QUIET CONFIG)
if(NOT CLI11_FOUND)
  find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp REQUIRED)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  target_include_directories(CLI11::CLI11 INTERFACE ${CLI11_INCLUDE_DIR})
endif()
find_package(Threads REQUIRED)
if(MINFER_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(MINFER_BUILD_BENCH)
  find_package(benchmark QUIET)
endif()
# Downloads (src/hub): libcurl4-openssl-dev; sha256 from OpenSSL's libcrypto (libssl-dev).
find_package(CURL REQUIRED)
find_package(OpenSSL REQUIRED)
# cpp-httplib: Debian builds it as a library (libcpp-httplib.so); its pkg-config flags (TLS/zlib/brotli
# defines) must match that build, so they come from pkg-config. Only server/http.cpp and tests include it.
find_package(PkgConfig REQUIRED)
pkg_check_modules(CPP_HTTPLIB REQUIRED IMPORTED_TARGET GLOBAL cpp-httplib)
add_library(minfer::httplib ALIAS PkgConfig::CPP_HTTPLIB)
