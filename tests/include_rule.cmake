# The dependency rule between the project's folders (README "Layout", ARCHITECTURE.md), checked on the text of
# every #include "<folder>/..." in every .h/.cpp/.inc of a source folder, bench/ and tests/:
#   core     includes only core
#   data, memory, model   include core and themselves
#   train    includes core, data, memory, model, train
#   storage  includes core, data, memory, model, storage (never train)
#   sweep    includes core, data, memory, model, train, sweep
#   infer    includes core, data, memory, model, train, storage, infer
#   eval     includes core, data, memory, model, train, eval (held-out analyses of trained checkpoints)
#   cli      includes anything; nothing includes cli
#   bench, tests        include anything but cli
# cmake -DSRC_DIR=<repo> -P include_rule.cmake checks the repository (exit code 1 and one line per violation);
# cmake -DSCRATCH=<dir> -P include_rule.cmake writes a scratch tree that breaks each rule once and checks that the
# check reports exactly those violations.
cmake_minimum_required(VERSION 3.25)

set(PG_FOLDERS core data memory model train storage sweep infer eval cli)
set(allowed_core core)
set(allowed_data core data)
set(allowed_memory core memory)
set(allowed_model core model)
set(allowed_train core data memory model train)
set(allowed_storage core data memory model storage)
set(allowed_sweep core data memory model train sweep)
set(allowed_infer core data memory model train storage infer)
set(allowed_eval core data memory model train eval)
set(allowed_cli ${PG_FOLDERS})
set(allowed_bench core data memory model train storage sweep infer eval)
set(allowed_tests core data memory model train storage sweep infer eval)

# Appends "file: includes "x"" lines to ${out} for every forbidden project include below ${root}.
function(pg_check_tree root out)
  set(bad "")
  foreach(folder ${PG_FOLDERS} bench tests)
    file(GLOB_RECURSE files "${root}/${folder}/*.h" "${root}/${folder}/*.cpp" "${root}/${folder}/*.inc"
         "${root}/${folder}/*.h.in")
    foreach(f ${files})
      file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]+\"[^\"]+\"")
      foreach(line ${lines})
        string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([^\"]+)\".*$" "\\1" inc "${line}")
        string(FIND "${inc}" "/" slash)
        if(slash LESS 1)
          continue()  # a header of the same directory or a third-party one
        endif()
        string(SUBSTRING "${inc}" 0 ${slash} target)
        list(FIND PG_FOLDERS "${target}" is_project)
        if(is_project LESS 0)
          continue()  # not a project folder (e.g. CLI/CLI.hpp)
        endif()
        list(FIND allowed_${folder} "${target}" ok)
        if(ok LESS 0)
          file(RELATIVE_PATH rel "${root}" "${f}")
          list(JOIN allowed_${folder} ", " may)
          list(APPEND bad "${rel}: includes \"${inc}\" (${folder}/ may include: ${may})")
        endif()
      endforeach()
    endforeach()
  endforeach()
  set(${out} "${bad}" PARENT_SCOPE)
endfunction()

if(DEFINED SCRATCH)
  file(REMOVE_RECURSE "${SCRATCH}")
  set(cases
      "core/a.h|train/trainer.h"
      "data/a.cpp|memory/layout.h"
      "memory/a.h|model/transformer.h"
      "model/a.cpp|data/pipeline.h"
      "train/a.cpp|storage/nf4.h"
      "storage/a.cpp|train/checkpoint.h"
      "sweep/a.cpp|storage/nf4.h"
      "eval/a.cpp|storage/nf4.h"
      "train/b.cpp|eval/collision_class.h"
      "tests/a.cpp|cli/commands.h"
      "bench/a.cpp|cli/commands.h")
  set(expected 0)
  foreach(c ${cases})
    string(REPLACE "|" ";" parts "${c}")
    list(GET parts 0 file)
    list(GET parts 1 inc)
    file(WRITE "${SCRATCH}/${file}" "#include \"${inc}\"\n#include \"core/error.h\"\n#include <vector>\n")
    math(EXPR expected "${expected} + 1")
  endforeach()
  file(WRITE "${SCRATCH}/cli/ok.cpp" "#include \"train/trainer.h\"\n#include \"storage/nf4.h\"\n#include \"sweep/spec.h\"\n")
  file(WRITE "${SCRATCH}/sweep/ok.cpp" "#include \"train/config.h\"\n#include \"sweep/spec.h\"\n")
  pg_check_tree("${SCRATCH}" bad)
  list(LENGTH bad n)
  file(REMOVE_RECURSE "${SCRATCH}")
  if(NOT n EQUAL expected)
    string(REPLACE ";" "\n  " shown "${bad}")
    message(FATAL_ERROR "include rule: expected ${expected} violations in the scratch tree, found ${n}:\n  ${shown}")
  endif()
  message(STATUS "include rule: all ${n} planted violations found")
  return()
endif()

if(NOT DEFINED SRC_DIR)
  message(FATAL_ERROR "usage: cmake -DSRC_DIR=<repository> -P include_rule.cmake")
endif()
pg_check_tree("${SRC_DIR}" bad)
if(bad)
  string(REPLACE ";" "\n  " shown "${bad}")
  message(FATAL_ERROR "include rule violated:\n  ${shown}")
endif()
message(STATUS "include rule: every folder's includes follow the dependency rule")
