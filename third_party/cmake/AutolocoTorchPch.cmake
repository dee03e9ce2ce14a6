# LibTorch's umbrella header <torch/torch.h> is most of the compile time of a translation unit
# that includes it (15 of about 20 s here), and over a third of autoloco's translation units do.
# It is precompiled once, for autoloco_core, and the targets that link autoloco::core reuse it;
# a translation unit that reaches no LibTorch header (directly or through autoloco's own
# headers) skips it, since loading the 700 MB precompiled header costs it more (about 5 s) than
# it would save. The scan only decides speed: a stale answer compiles the same code.

# Sets `out` to TRUE when `file` includes a LibTorch header (torch/, ATen/, c10/), directly or
# through autoloco's own headers ("autoloco/..." under `include_root`, other quoted ones beside
# the including file). Answers are memoised per file.
function(autoloco_reaches_torch file include_root out)
  get_property(known GLOBAL PROPERTY "autoloco_torch:${file}" SET)
  if(known)
    get_property(answer GLOBAL PROPERTY "autoloco_torch:${file}")
    set(${out} ${answer} PARENT_SCOPE)
    return()
  endif()
  set(answer FALSE)
  if(EXISTS "${file}")
    file(STRINGS "${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
    foreach(line IN LISTS includes)
      if(line MATCHES "[<\"](torch|ATen|c10)/")
        set(answer TRUE)
        break()
      endif()
      # "autoloco/..." from lib/, any other quoted header beside the file (tests' support/).
      set(header "")
      if(line MATCHES "[<\"](autoloco/[^>\"]+)[>\"]")
        set(header "${include_root}/${CMAKE_MATCH_1}")
      elseif(line MATCHES "\"([^\"]+)\"")
        get_filename_component(dir "${file}" DIRECTORY)
        get_filename_component(header "${dir}/${CMAKE_MATCH_1}" ABSOLUTE)
      endif()
      if(header)
        # Marked first, so that headers including each other end the recursion.
        set_property(GLOBAL PROPERTY "autoloco_torch:${file}" FALSE)
        autoloco_reaches_torch("${header}" "${include_root}" nested)
        if(nested)
          set(answer TRUE)
          break()
        endif()
      endif()
    endforeach()
  endif()
  set_property(GLOBAL PROPERTY "autoloco_torch:${file}" ${answer})
  set(${out} ${answer} PARENT_SCOPE)
endfunction()

# autoloco_torch_pch(TARGET)                 precompiles <torch/torch.h> for TARGET
# autoloco_torch_pch(TARGET REUSE_FROM OTHER) uses OTHER's, which needs the same compile flags
# Either way, TARGET's sources that reach no LibTorch header are compiled without it.
function(autoloco_torch_pch target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "REUSE_FROM" "")
  if(NOT AUTOLOCO_PCH)
    return()
  endif()
  if(arg_REUSE_FROM)
    target_precompile_headers(${target} REUSE_FROM ${arg_REUSE_FROM})
  else()
    target_precompile_headers(${target} PRIVATE <torch/torch.h>)
  endif()
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  foreach(src IN LISTS sources)
    get_filename_component(path "${src}" ABSOLUTE BASE_DIR "${source_dir}")
    autoloco_reaches_torch("${path}" "${PROJECT_SOURCE_DIR}/lib" reaches)
    if(NOT reaches)
      set_source_files_properties("${src}" TARGET_DIRECTORY ${target}
                                  PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
endfunction()
