{
  "targets": [
    {
      "target_name": "omnirx_native",
      "sources": [
        "src/addon.cc",
        "src/storage.cc",
        "src/tensor.cc",
        "src/thread_pool.cc",
        "src/executor.cc",
        "src/plan.cc",
        "src/ops.cc",
        "src/kernels/gemm.cc",
        "src/kernels/gemm_bf16.cc",
        "src/kernels/attention.cc",
        "src/kernels/norm.cc",
        "src/kernels/elementwise.cc",
        "src/kernels/layout.cc",
        "src/kernels/conv.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")", "src"],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_DISABLE_DEPRECATED", "NAPI_CPP_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++17"],
      "cflags_cc": ["-std=c++17", "-fexceptions", "-march=native", "-mtune=native", "-ffp-contract=fast", "-fno-math-errno", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "ldflags": ["-pthread"]
    }
  ]
}
