# Sourced by the build scripts: compile through ccache (Debian package, installed by setup.sh) when it is
# there. CCACHE_BASEDIR makes the cached commands relative to the checkout, so the same tree built again
# in another folder (a fresh clone, a worktree) reuses the objects. Explicit settings win.
if command -v ccache >/dev/null 2>&1; then
  export CMAKE_C_COMPILER_LAUNCHER="${CMAKE_C_COMPILER_LAUNCHER:-ccache}"
  export CMAKE_CXX_COMPILER_LAUNCHER="${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}"
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
fi
