# Warnings and sanitizers apply to autoloco's own targets only (never to LibTorch's headers,
# which are included as SYSTEM).
add_library(autoloco_warnings INTERFACE)
target_compile_options(autoloco_warnings INTERFACE -Wall -Wextra -Wpedantic -Wshadow
                       -Wnon-virtual-dtor -Wcast-align -Wunused -Woverloaded-virtual
                       -Wnull-dereference -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough)
if(AUTOLOCO_WERROR)
  target_compile_options(autoloco_warnings INTERFACE -Werror)
endif()
if(AUTOLOCO_SANITIZE)
  target_compile_options(autoloco_warnings INTERFACE -fsanitize=address,undefined
                         -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(autoloco_warnings INTERFACE -fsanitize=address,undefined)
endif()
if(AUTOLOCO_SANITIZE_THREAD)
  # ThreadSanitizer for the communication thread of the overlapped sync (preset tsan). Only our
  # code is instrumented: races inside LibTorch, OpenMP or Open MPI are out of its sight, and
  # their internals need scripts/tsan.supp.
  target_compile_options(autoloco_warnings INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(autoloco_warnings INTERFACE -fsanitize=thread)
endif()
