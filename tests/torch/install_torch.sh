#!/usr/bin/env bash
# install_torch.sh — installs numpy (for tests/check_graphref.py) and PyTorch for the importer's tests
# (tests/torch/roundtrip.py) from PyPI alone, the small way: the torch wheel without its dependency tree
# (which would pull ~3 GB of CUDA wheels), plus the pure-Python packages torch imports and the four CUDA
# libraries its CPU build still links that the CUDA 13 toolkit on these machines lacks or has too old
# (cuFile, cuSPARSELt, NVSHMEM, NCCL); cuBLAS, cuDNN and the runtime come from the toolkit. Measured on the
# development machine: 107 s into a fresh venv with no pip cache, 1.8 GB.
# Nothing in tsopt itself needs torch; skip this and `make test` skips the importer's tests.
set -euo pipefail
# numpy for bench/graphref.py's check against the interpreter (tests/check_graphref.py, skipped without it)
python3 -c 'import numpy' 2>/dev/null || pip install -q numpy || echo "numpy did not install: make test skips the graphref check"
# one import (about 4 s on CI's 2 cores) both tells whether torch is there and which version
if v=$(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null); then echo "torch is installed: $v"; exit 0; fi
pip install -q filelock typing-extensions sympy networkx jinja2 fsspec
pip install -q --no-deps torch==2.15.0 nvidia-cufile==1.20.0.107 nvidia-cusparselt-cu13==0.8.1 \
  nvidia-nvshmem-cu13==3.7.2 nvidia-nccl-cu13==2.30.7
python3 -c "import torch; print('torch', torch.__version__, 'installed')" 2>/dev/null
