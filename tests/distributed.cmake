# sg::distributed beyond the GoogleTest file: the launcher's own test (no GPU needed), and
# gaussian_precision_ddp --check under scripts/launch.sh on 1 and 2 GPUs; tests/distributed_gpus.sh
# exits 77 (reported as skipped) where fewer GPUs exist.
add_test(NAME distributed_launcher COMMAND bash ${PROJECT_SOURCE_DIR}/tests/distributed_launcher_test.sh)
set_tests_properties(distributed_launcher PROPERTIES TIMEOUT 120)
if(SG_BUILD_EXAMPLES AND SG_WITH_NCCL)
  foreach(gpus 1 2)
    foreach(dtype float64 float32)
      set(name distributed_ddp_check_${gpus}gpu_${dtype})
      add_test(NAME ${name} COMMAND bash ${PROJECT_SOURCE_DIR}/tests/distributed_gpus.sh ${gpus}
                                    $<TARGET_FILE:gaussian_precision_ddp> --check --dtype ${dtype})
      set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
    endforeach()
  endforeach()
endif()
