# The dependency rule between the project's folders (README "Layout", ARCHITECTURE.md), checked on the text of
# every #include "<folder>/..." in every .h/.cpp/.inc of a source folder, bench/ and tests/:
#   core     includes only core
#   kernels  includes core and kernels
#   data, memory, model   include core, kernels and themselves
#   train    includes core, data, memory, model, train
#   storage  includes core, data, memory, model, storage (never train)
#   sweep    includes core, data, memory, model, train, sweep
#   infer    includes core, data, memory, model, train, storage, infer
#   eval     includes core, data, memory, model, train, eval (held-out analyses of trained checkpoints)
#   cli      includes anything; nothing includes cli
#   bench, tests        include anything but cli
# and the print rule (ARCHITECTURE.md): no library folder (all but cli, bench, tests) writes to stderr or stdout
# itself; it reports through core/progress.h (Note, ProgressLine). Exceptions, each for a reason: the trainer's own
# progress line (train/trainer.cpp, a terminal line rewritten in place) and the tokenizer's heartbeat while
# sentencepiece has stderr redirected to its log (data/tokenizer.cpp).
# cmake -DSRC_DIR=<repo> -P include_rule.cmake checks the repository (exit code 1 and one line per violation);
# cmake -DSCRATCH=<dir> -P include_rule.cmake writes a scratch tree that breaks each rule once and checks that the
# check reports exactly those violations.
cmake_minimum_required(VERSION 3.25)

set(PG_FOLDERS core kernels data memory model train storage sweep infer eval cli)
set(allowed_core core)
set(allowed_kernels core kernels)
set(allowed_data core kernels data)
set(allowed_memory core kernels memory)
set(allowed_model core kernels model)
set(allowed_train core kernels data memory model train)
set(allowed_storage core kernels data memory model storage)
set(allowed_sweep core kernels data memory model train sweep)
set(allowed_infer core kernels data memory model train storage infer)
set(allowed_eval core kernels data memory model train eval)
set(allowed_cli ${PG_FOLDERS})
set(allowed_bench core kernels data memory model train storage sweep infer eval)
set(allowed_tests core kernels data memory model train storage sweep infer eval)

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
  # The print rule.
  set(print_ok "train/trainer.cpp" "data/tokenizer.cpp")
  foreach(folder ${PG_FOLDERS})
    if(folder STREQUAL "cli")
      continue()
    endif()
    file(GLOB_RECURSE files "${root}/${folder}/*.h" "${root}/${folder}/*.cpp" "${root}/${folder}/*.inc")
    foreach(f ${files})
      file(RELATIVE_PATH rel "${root}" "${f}")
      list(FIND print_ok "${rel}" exempt)
      if(exempt GREATER -1)
        continue()
      endif()
      file(STRINGS "${f}" lines REGEX "std::cerr|std::cout|std::clog|[^n]printf\\(|fprintf\\((stderr|stdout)|puts\\(")
      foreach(line ${lines})
        if(line MATCHES "^[ \t]*//")
          continue()  # a comment
        endif()
        string(STRIP "${line}" shown)
        string(REPLACE ";" "," shown "${shown}")  # a CMake list separator
        list(APPEND bad "${rel}: prints (${shown}) (a library reports through core/progress.h: Note() << ...)")
      endforeach()
    endforeach()
  endforeach()
  set(${out} "${bad}" PARENT_SCOPE)
endfunction()

if(DEFINED SCRATCH)
  file(REMOVE_RECURSE "${SCRATCH}")
  set(cases
      "core/a.h|train/trainer.h"
      "core/b.cpp|kernels/gemm.h"
      "kernels/a.cpp|data/pipeline.h"
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
  # The print rule: one planted print in a library, none counted in cli/ or in a comment.
  file(WRITE "${SCRATCH}/storage/prints.cpp" "#include <cstdio>\nvoid f() { std::fprintf(stderr, \"x\\n\"); }\n// std::cerr in a comment\n")
  math(EXPR expected "${expected} + 1")
  file(WRITE "${SCRATCH}/cli/prints.cpp" "#include <iostream>\nvoid g() { std::cerr << 1; }\n")
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
