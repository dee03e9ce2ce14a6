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
