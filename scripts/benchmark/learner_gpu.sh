#!/usr/bin/env bash
# The learner on one CUDA card, in one short device call (about 5 minutes on an H100 / H200):
#   1. the captured update (CUDA graphs over compiled losses) trains as the eager update does, on this card
#      (tests/test_sac_update_numerics.py, its CUDA test);
#   2. `unilab-bench learner --device cuda` at the `sac` sizes (batch 8192, critics [768, 384, 192] x 2 with 501
#      atoms, actor [512, 256, 128], bf16 autocast): unilab's update against holosoma 0.0.3's, both compiled (ours
#      also captured), then both eager (algo.compile=false);
#   3. one table: ms per update, ratio, host syncs and launches per update, captured or not.
#
# Needs: a Python whose torch has CUDA, with unilab's dependencies (the device machine reaches no package index;
# unilab itself is installed from this tree with --no-deps if it is missing), and the holosoma wheel at
# $UNILAB_HOLOSOMA_WHEEL (carry it: cp ~/.cache/unilab/downloads/holosoma-0.0.3-py3-none-any.whl into the tree),
# from which the G1 assets are extracted without a download.
#
# Usage: bash scripts/benchmark/learner_gpu.sh [OUT_DIR]      (ALGOS="sac sac_loco" to add the loco sizes)
set -euo pipefail
out=${1:-${OUT:-logs/bench_learner_gpu}}
algos=${ALGOS:-sac}
mkdir -p "$out"
python -c "import unilab" 2>/dev/null || python -m pip install -q --no-deps --no-build-isolation -e .
python -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.__version__, torch.cuda.get_device_name(0))"
unilab-assets fetch
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader || true

timeout 240 python -m pytest -q -p no:cacheprovider tests/test_sac_update_numerics.py -k cuda 2>&1 | tail -3 \
    | tee "$out/cuda_equivalence.txt" || true

for algo in $algos; do
    unilab-bench learner --device cuda --algo "$algo" --rounds 5 --iterations 5 --warmup 8 \
        --out "$out/${algo}_compiled.json"
    unilab-bench learner --device cuda --algo "$algo" --rounds 5 --iterations 5 --warmup 3 \
        --out "$out/${algo}_eager.json" algo.compile=false
done

python - "$out" <<'EOF'
import json, pathlib, sys
rows = []
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    r = json.loads(path.read_text())
    rows.append((path.stem, r["device_name"], r["ms_per_update"], r["reference_ms_per_update"], r["ratio"],
                 r["syncs_per_update"], r["ops_per_update"], r["reference_ops_per_update"], r["captured"]))
head = ("run", "card", "unilab ms", "holosoma ms", "ratio", "syncs", "launches", "holosoma launches", "captured")
print(" | ".join(head))
for row in rows:
    print(" | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row))
EOF
