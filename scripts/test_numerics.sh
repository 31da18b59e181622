#!/usr/bin/env bash
# The tests under other CPUs' rounding. Which BLAS and convolution kernels run — and so the last bits of every
# matmul, distance and convolution — depends on the CPU: OpenBLAS (numpy, scipy) and MKL (torch's matmuls) pick a
# kernel per CPU family, oneDNN (torch's convolutions) per instruction set. A test that passes only with this CPU's
# rounding (a tie broken by the last bit, a threshold at the edge) passes here and fails on the next CI machine.
# This runs the tests again under two other kernel sets, forced on this CPU:
#   sse   OpenBLAS Prescott kernels, MKL's compatible branch, oneDNN capped at SSE4.1 (any x86-64)
#   avx2  OpenBLAS Haswell kernels, MKL's AVX2 branch, oneDNN capped at AVX2 (CPUs with AVX2 only)
# Found this way: the degenerate-eigenspace homology test of before fe0ac84 passed under the SSE kernels and failed
# under the Haswell ones on one AMD EPYC (docs/benchmarks.md, "The tests under other kernels").
# Usage: scripts/test_numerics.sh [pytest paths ...]   (default: tests/unit; ~3 min a set on 2 cores)
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
[ "$#" -gt 0 ] || set -- tests/unit

fingerprint() {  # the last bits of a numpy matmul, a torch matmul and a torch convolution under the kernel set
    env "$@" OMP_NUM_THREADS=1 "$PY" - <<'EOF'
import numpy as np
import torch

rng = np.random.default_rng(0)
a, b = rng.standard_normal((300, 200)), rng.standard_normal((200, 100))
torch.manual_seed(0)
x, w = torch.randn(300, 200), torch.randn(200, 100)
image, kernel = torch.randn(8, 32, 16, 16), torch.randn(64, 32, 3, 3)
conv = torch.nn.functional.conv2d(image, kernel, padding=1)
print(" ".join(float(v).hex() for v in ((a @ b).sum(), (x @ w).double().sum(), conv.double().sum())))
EOF
}

native=$(fingerprint)
failed=()
for set in sse avx2; do
    case $set in
        sse) vars=(OPENBLAS_CORETYPE=Prescott MKL_CBWR=COMPATIBLE ONEDNN_MAX_CPU_ISA=SSE41) ;;
        avx2)
            if ! grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
                echo "test_numerics: no AVX2 on this CPU: the avx2 set is not tried" >&2
                continue
            fi
            vars=(OPENBLAS_CORETYPE=Haswell MKL_CBWR=AVX2 ONEDNN_MAX_CPU_ISA=AVX2) ;;
    esac
    print=$(fingerprint "${vars[@]}")
    same=$([ "$print" = "$native" ] && echo " (the same bits as this CPU's own kernels)" || echo "")
    echo "== $set: ${vars[*]}; fingerprint $print$same" >&2
    if ! env "${vars[@]}" OMP_NUM_THREADS=1 "$PY" -m pytest -q -n 2 --dist loadgroup -p no:cacheprovider "$@"; then
        failed+=("$set")
    fi
done
echo "test_numerics: this CPU's own kernels: fingerprint $native" >&2
if [ "${#failed[@]}" -gt 0 ]; then
    echo "test_numerics: failed under ${failed[*]}: a test depends on the CPU's rounding" >&2
    exit 1
fi
echo "test_numerics: passed under every kernel set tried" >&2
