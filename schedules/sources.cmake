# The sources of pplab_schedules, in one list for the main build and the
# fuzz harnesses (tests/fuzz/CMakeLists.txt), so that neither can miss a file.
set(PPLAB_SCHEDULES_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/action.cc
  ${CMAKE_CURRENT_LIST_DIR}/action_kinds.cc
  ${CMAKE_CURRENT_LIST_DIR}/controllable_memory.cc
  ${CMAKE_CURRENT_LIST_DIR}/dependencies.cc
  ${CMAKE_CURRENT_LIST_DIR}/file_io.cc
  ${CMAKE_CURRENT_LIST_DIR}/dualpipe.cc
  ${CMAKE_CURRENT_LIST_DIR}/generators.cc
  ${CMAKE_CURRENT_LIST_DIR}/int_list.cc
  ${CMAKE_CURRENT_LIST_DIR}/interleaved_zero_bubble.cc
  ${CMAKE_CURRENT_LIST_DIR}/json_reader.cc
  ${CMAKE_CURRENT_LIST_DIR}/lowering.cc
  ${CMAKE_CURRENT_LIST_DIR}/one_line.cc
  ${CMAKE_CURRENT_LIST_DIR}/schedule.cc
  ${CMAKE_CURRENT_LIST_DIR}/schedule_io.cc
  ${CMAKE_CURRENT_LIST_DIR}/units.cc
  ${CMAKE_CURRENT_LIST_DIR}/validate.cc
  ${CMAKE_CURRENT_LIST_DIR}/zero_bubble.cc
)
