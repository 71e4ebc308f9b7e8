#!/bin/sh
# Runs a command (normally /usr/bin/python3 bench/dit-forward/torch_driver.py ...) under PyTorch's best setup on
# these machines (docs/benchmarks.md, FACTS.md): AVX-512 kernels, the OpenMP build of OpenBLAS first so torch and
# BLAS share one OpenMP pool, passive OpenMP waiting, and glibc malloc tunables that keep freed memory mapped.
# Without them the same model runs 5–13× slower here.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OMP_WAIT_POLICY=PASSIVE
export ATEN_CPU_CAPABILITY=avx512
export GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
OPENBLAS_OPENMP_DIR=/usr/lib/x86_64-linux-gnu/openblas-openmp
if [ ! -e "$OPENBLAS_OPENMP_DIR/libopenblas.so.0" ]; then
  echo "torch-env.sh: $OPENBLAS_OPENMP_DIR/libopenblas.so.0 is missing (apt-get install -y libopenblas0-openmp); torch will be slower" >&2
fi
export LD_LIBRARY_PATH="$OPENBLAS_OPENMP_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$@"
