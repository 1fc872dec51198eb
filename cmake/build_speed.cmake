# Build time: where it goes and what cuts it (tools/README.md, "Build time",
# has the measurements). A clean build of the actorps program is mostly the
# compiler's back end on CAF's templates (typed actors, requests, message
# types), spdlog/fmt and the protobuf classes, emitted and optimized again in
# every file that uses them. So:
#   - unity builds: each target's files compiled as one unit (CMake's
#     UNITY_BUILD), so those headers are parsed and their templates optimized
#     once per target, not once per file (-45% to -50% per target);
#   - -O2 instead of Release's -O3 for the control plane: the coordinator, the
#     program's commands, node, launch, config, tests (-20% more).
# Left as they were, so that their objects stay byte for byte what they were:
#   - the kernels (and the CUDA module): the compute loops, one object per
#     file (ACTORPS_SEPARATE_TARGETS);
#   - -O3 on the data path: kernels, shard, worker, wire (messages, variables),
#     dataset pipeline, network layer, metrics (ACTORPS_HOT_TARGETS).
# Every other target of the project, whatever its name or folder, gets both:
# a target added or renamed is covered. Files of one target share a unit, so
# their file-local names (anonymous namespace, static) must differ.
# Precompiled headers were measured and left out: in a unity build they saved
# nothing, and per file ~13% for a 216 MB header image.

option(ACTORPS_UNITY "Unity builds (cmake/build_speed.cmake); OFF: one object per file" ON)
set(ACTORPS_UNITY_BATCH 0 CACHE STRING
    "Files per unity unit; 0: a whole target (fastest clean build), e.g. 4: faster rebuilds after an edit")
set(ACTORPS_SEPARATE_TARGETS actorps_kernels actorps_cuda CACHE STRING "Targets built one object per file")
set(ACTORPS_HOT_TARGETS
    actorps_kernels actorps_cuda actorps_messages actorps_variables actorps_shard actorps_worker
    actorps_dataset actorps_net actorps_metrics
    CACHE STRING "Targets on the data path: Release's -O3 kept")

# Every target defined in DIR and the folders below it, into OUT.
function(_actorps_targets_below dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _actorps_targets_below("${sub}" more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Called once, at the end of the top CMakeLists.txt, when every target exists.
function(actorps_speed_up_build)
  _actorps_targets_below("${PROJECT_SOURCE_DIR}" targets)
  set(unity 0)
  set(o2 0)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    # Our own sources: protoc's (*.pb.cc) each define the same file-local
    # tables, so they stay one object per file.
    get_target_property(sources ${t} SOURCES)
    set(generated ${sources})
    list(FILTER generated INCLUDE REGEX "\\.pb\\.cc$")
    list(FILTER sources EXCLUDE REGEX "\\.pb\\.cc$")
    list(FILTER sources INCLUDE REGEX "\\.(cpp|cc)$")
    list(LENGTH sources files)
    if(ACTORPS_UNITY AND files GREATER 1 AND NOT t IN_LIST ACTORPS_SEPARATE_TARGETS)
      set(batch ${ACTORPS_UNITY_BATCH})
      if((type STREQUAL "EXECUTABLE" OR t STREQUAL "actorps_cli") AND batch EQUAL 0)
        # The program's commands are what ninja compiles last, on one core
        # while the other idles: two units, so that two cores share them.
        math(EXPR batch "(${files} + 1) / 2")
      endif()
      set_target_properties(${t} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${batch})
      if(generated)
        set_source_files_properties(${generated} TARGET_DIRECTORY ${t} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      endif()
      math(EXPR unity "${unity} + 1")
    endif()
    if(NOT t IN_LIST ACTORPS_HOT_TARGETS)
      # After Release's -O3 on the command line, so this one wins.
      target_compile_options(${t} PRIVATE "$<$<AND:$<CONFIG:Release>,$<COMPILE_LANGUAGE:CXX>>:-O2>")
      math(EXPR o2 "${o2} + 1")
    endif()
  endforeach()
  message(STATUS "build speed: ${unity} targets as unity builds, ${o2} control-plane targets at -O2 in Release (cmake/build_speed.cmake)")
endfunction()
