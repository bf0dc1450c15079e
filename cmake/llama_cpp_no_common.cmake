# Read by llama.cpp's project() inside llama-cpp-python's build (the Makefile passes it as
# CMAKE_PROJECT_llama.cpp_INCLUDE): turn off llama.cpp's "common" library.
#
# Why: nothing loads it. llama-cpp-python's ctypes bindings open libllama, libggml* and libmtmd only (mtmd refuses to
# link common, by its own CMake check); the wheel carries libllama-common only in a top-level lib/ beside the package
# (3 x 4.7 MB), where nothing looks. Yet llama-cpp-python forces LLAMA_BUILD_COMMON ON (a CACHE FORCE, so
# -DLLAMA_BUILD_COMMON=OFF on the command line is overwritten), and common is 51 of the build's 178 objects plus
# cpp-httplib and OpenSSL: a third of a build that took 28 minutes on a loaded 2-core CI machine. This file runs
# after that FORCE and before llama.cpp reads the option.
#
# llama.cpp's tests, examples, tools and server (LLAMA_BUILD_TESTS/EXAMPLES/TOOLS/SERVER) need nothing here: they
# default to OFF when llama.cpp is a subproject, as in llama-cpp-python. mtmd (vision, backends/llama_cpp/vision.py)
# is built by llama-cpp-python itself (LLAVA_BUILD), not through common.
set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama: build common utils library" FORCE)
