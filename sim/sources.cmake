# The sources of pplab_sim, in one list for the main build and the fuzz
# harnesses (tests/fuzz/CMakeLists.txt), so that neither can miss a file.
set(PPLAB_SIM_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/analytic.cc
  ${CMAKE_CURRENT_LIST_DIR}/cost_model.cc
  ${CMAKE_CURRENT_LIST_DIR}/cost_model_json.cc
  ${CMAKE_CURRENT_LIST_DIR}/measured_costs.cc
  ${CMAKE_CURRENT_LIST_DIR}/percentiles.cc
  ${CMAKE_CURRENT_LIST_DIR}/precision.cc
  ${CMAKE_CURRENT_LIST_DIR}/profile_meta.cc
  ${CMAKE_CURRENT_LIST_DIR}/recompute.cc
  ${CMAKE_CURRENT_LIST_DIR}/simulator_engine.cc
  ${CMAKE_CURRENT_LIST_DIR}/simulator_finish.cc
  ${CMAKE_CURRENT_LIST_DIR}/simulator_memory.cc
  ${CMAKE_CURRENT_LIST_DIR}/zb_auto.cc
  ${CMAKE_CURRENT_LIST_DIR}/step_samples.cc
)
