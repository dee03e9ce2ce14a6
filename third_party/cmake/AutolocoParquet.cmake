# Parquet for autoloco-prepare, included by the project and by tests/fuzz. Sets
# AUTOLOCO_HAVE_PARQUET and, when ON, the INTERFACE target autoloco_parquet.
#
# Parquet: Arrow's own C++ reader, from the pinned pyarrow wheel (scripts/hf-env.sh installs it
# into the torch venv; Debian 12 packages no Arrow). The wheel ships headers and versioned
# libraries (libarrow.so.2600) but no CMake config, so the targets are made here. Optional: a
# build without it refuses parquet inputs with a message. AUTOLOCO_PYARROW_DIR points elsewhere.
set(AUTOLOCO_HAVE_PARQUET OFF)
if(NOT DEFINED AUTOLOCO_PARQUET)
  set(AUTOLOCO_PARQUET AUTO)
endif()
if(NOT AUTOLOCO_PARQUET STREQUAL "OFF")
  set(_autoloco_pyarrow "$ENV{AUTOLOCO_PYARROW_DIR}")
  if(NOT _autoloco_pyarrow)
    set(_autoloco_venv "$ENV{AUTOLOCO_TORCH_VENV}")
    if(NOT _autoloco_venv)
      set(_autoloco_venv "$ENV{HOME}/.cache/autoloco/torch-2.11.0")
    endif()
    file(GLOB _autoloco_pyarrow "${_autoloco_venv}/lib/python3*/site-packages/pyarrow")
  endif()
  file(GLOB _autoloco_arrow_lib "${_autoloco_pyarrow}/libarrow.so.[0-9]*")
  file(GLOB _autoloco_parquet_lib "${_autoloco_pyarrow}/libparquet.so.[0-9]*")
  if(_autoloco_arrow_lib AND _autoloco_parquet_lib
     AND EXISTS "${_autoloco_pyarrow}/include/parquet/arrow/reader.h")
    list(GET _autoloco_arrow_lib 0 AUTOLOCO_ARROW_LIBRARY)
    list(GET _autoloco_parquet_lib 0 AUTOLOCO_PARQUET_LIBRARY)
    add_library(autoloco_parquet INTERFACE)
    target_include_directories(autoloco_parquet SYSTEM INTERFACE "${_autoloco_pyarrow}/include")
    target_link_libraries(autoloco_parquet INTERFACE ${AUTOLOCO_PARQUET_LIBRARY}
                          ${AUTOLOCO_ARROW_LIBRARY})
    # Linked by full path, so CMake puts the wheel's directory in the executables' RPATH.
    set(AUTOLOCO_HAVE_PARQUET ON)
  elseif(AUTOLOCO_PARQUET STREQUAL "ON")
    message(FATAL_ERROR "AUTOLOCO_PARQUET=ON but the pyarrow wheel's Arrow and Parquet libraries "
                        "were not found under '${_autoloco_pyarrow}'; run scripts/hf-env.sh "
                        "(it installs the pinned pyarrow), set AUTOLOCO_PYARROW_DIR to a pyarrow "
                        "package directory, or configure with -DAUTOLOCO_PARQUET=OFF")
  endif()
endif()
