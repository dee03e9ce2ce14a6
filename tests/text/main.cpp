// Catch2 entry point of the text suite: corpus preparation and tokenizers, in an executable
// without LibTorch, so that it can load SentencePiece (lib/CMakeLists.txt says why).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
