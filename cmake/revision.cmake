# Writes OUT (a C++ source defining pg::build::kRevision) from `git` in SRC_DIR, at every build; the file is
# replaced only when the revision changed, so an unchanged tree recompiles nothing. A tree with uncommitted
# changes to tracked files gets "-dirty"; outside a git checkout the revision is "unknown".
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC_DIR}
                OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT rev)
  set(rev "unknown")
else()
  execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SRC_DIR}
                  OUTPUT_VARIABLE changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(changes)
    set(rev "${rev}-dirty")
  endif()
endif()
file(WRITE ${OUT}.tmp "// Generated at build time by cmake/revision.cmake.\n#include \"core/build_info.h\"\nnamespace pg::build {\nconst char kRevision[] = \"${rev}\";\n}  // namespace pg::build\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.tmp ${OUT})
file(REMOVE ${OUT}.tmp)
