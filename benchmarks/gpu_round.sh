#!/usr/bin/env bash
# One lease's GPU measurements of the scoring engine, in one call (docs/performance.md, "GPU").
#
#   bash benchmarks/gpu_round.sh TOKENIZER_DIR BENCHDATA_DIR [OLD_SRC] [STAGES]
#
# TOKENIZER_DIR: a saved tokenizer (the SmolLM2 one: the random-weight 1B model uses its
# vocabulary); BENCHDATA_DIR: a folder with mmlu/ and cmb_example_1000.json; OLD_SRC: another
# checkout's src/ to time side by side (the baseline, stage old); STAGES: a comma list of tests,
# eager (fused kernels off), profile (the defaults: fused), speed, accuracy, pipeline (the
# permutation pipeline against the engine, pipeline_gap.py), cli (the permutation command end
# to end, twice; CLI_ITEMS items, 2048), generation (generation_speed.py on the random 1B
# model in float32 and bfloat16, GEN_ITEMS GSM8K items, 100; needs gsm8k/), old, alloc (default:
# tests,eager,profile,speed), each its own process, in the order given; PIPELINE_WORKERS: the
# pipeline stage's detector worker counts (comma list, "default"), PIPELINE_BATCHES its items
# per call (comma list), PIPELINE_OVERLAP its calls overlapped or not (on,off: both),
# PIPELINE_ITEMS its items (1024), PIPELINE_TIMEOUT its limit (260 s). Logs go to $OUT (or
# ./gpu_round_out), with TRACE=1 a trace of the profiled call. EXTRA_PATH: a folder of packages
# the machine lacks (added to PYTHONPATH).
set -u
TOK=$1
DATA=$2
OLD=${3:-}
STAGES=${4:-tests,eager,profile,speed}
OUT=${OUT:-gpu_round_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader
$PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
model="--device cuda --dtype bfloat16 --random-init llama-1b --tokenizer $TOK --benchdata $DATA"
# the engine's GPU defaults first (profiled), then other subtree sizes and a planning process;
# VARIANTS / OLD_VARIANTS (BUDGET:TREE_NODES:PAD:PLAN_WORKERS, comma-separated) override them
variants=${VARIANTS:-131072:1024:0.5:0,131072:512:0.5:0,131072:256:0.5:0,131072:1024:0.5:1}
old_variants=${OLD_VARIANTS:-131072:1024:0.5:0,131072:1024:0.5:1}

X=${EXTRA_PATH:+:$EXTRA_PATH}


run_tests() {
    echo "== the CUDA tests (tokenizer from $TOK)"
    CONTAMSCOPE_TEST_TOKENIZER=$TOK PYTHONPATH=src$X timeout 150 $PY -m pytest -q -m gpu \
        -p no:cacheprovider tests/backends/test_cuda.py tests/backends/test_hf_architectures.py \
        2>&1 | tee "$OUT/tests.log"
}
run_profile() {
    echo "== this checkout: variants, where the host waits, kernels (TRACE=1: a trace)"
    PYTHONPATH=src$X timeout 200 $PY benchmarks/engine_profile.py $model --items 400 --repeats 2 \
        --variants "$variants" --sync-sites --kernels ${TRACE:+--trace "$OUT/trace.json.gz"} \
        2>&1 | tee "$OUT/profile.log"
}
run_pipeline() {
    echo "== pipeline_gap: the permutation pipeline against the engine, same model and items"
    CONTAMSCOPE_CACHE_DIR=${CONTAMSCOPE_CACHE_DIR:-/tmp/contamscope-cache} PYTHONPATH=src$X \
        timeout ${PIPELINE_TIMEOUT:-260} $PY benchmarks/pipeline_gap.py $model \
        --items "${PIPELINE_ITEMS:-1024}" --detector-workers "${PIPELINE_WORKERS:-default}" \
        ${PIPELINE_BATCHES:+--pipeline-batches $PIPELINE_BATCHES} \
        ${PIPELINE_OVERLAP:+--overlap $PIPELINE_OVERLAP} 2>&1 | tee "$OUT/pipeline.log"
}
save_random_model() {  # the random 1B Llama shape saved as a folder (a model spec for commands)
    [[ -f "$1/config.json" ]] && return 0
    PYTHONPATH=src:benchmarks$X timeout 120 $PY - "$TOK" "$1" <<'PYEOF'
import sys

import torch
from permutation_speed import SHAPES
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

tok = AutoTokenizer.from_pretrained(sys.argv[1])
torch.manual_seed(0)
config = LlamaConfig(
    vocab_size=len(tok), max_position_embeddings=8192, tie_word_embeddings=True, **SHAPES["llama-1b"]
)
with torch.device("cuda"):
    model = LlamaForCausalLM(config).to(torch.bfloat16)
model.save_pretrained(sys.argv[2])
tok.save_pretrained(sys.argv[2])
PYEOF
}
run_cli() {
    echo "== the permutation command end to end: the random 1B Llama shape saved as a folder"
    local model_dir=/tmp/random-llama-1b items=${CLI_ITEMS:-2048}
    save_random_model "$model_dir"
    # twice, each with an empty cache and run folder: the second shows the machine warm
    for i in 1 2; do
        local t0=$(date +%s%N)
        CONTAMSCOPE_CACHE_DIR=/tmp/cli-cache-$i PYTHONPATH=src$X timeout 200 $PY -m contamscope \
            permutation --model "hf:$model_dir" -M bos='<|endoftext|>' \
            --benchmark "$DATA/mmlu/test" --sample "$items" --out "/tmp/cli-run-$i" 2>&1 \
            | tail -8 | tee -a "$OUT/cli.log"
        echo "command $i: $(( ($(date +%s%N) - t0) / 1000000 )) ms wall" | tee -a "$OUT/cli.log"
        $PY -c "import json,sys; t=json.load(open(sys.argv[1]))['timings']; print({k: t[k] for k in ('scoring_seconds','items_per_second','batch_items','detector_workers')})" \
            "/tmp/cli-run-$i/summary.json" | tee -a "$OUT/cli.log"
    done
    $PY - /tmp/cli-run-1/items.jsonl /tmp/cli-run-2/items.jsonl <<'PYEOF' | tee -a "$OUT/cli.log"
import json
import sys

a, b = ([json.loads(x) for x in open(p)] for p in sys.argv[1:])
diff = max(
    (abs(x - y) for r, s in zip(a, b) for x, y in zip(r.get("logprobs") or [], s.get("logprobs") or [])),
    default=0.0,
)
print(f"records {len(a)} / {len(b)}, same ids in order {[r['id'] for r in a] == [r['id'] for r in b]}, max |log-prob difference| {diff:.3g}")
PYEOF
}
run_generation() {
    echo "== generation_speed: shared-prefix greedy generation (hf_decode) vs model.generate"
    local model_dir=/tmp/random-llama-1b
    save_random_model "$model_dir"
    for dtype in float32 bfloat16; do  # float32: every generation identical; bfloat16: speed
        PYTHONPATH=src:benchmarks$X timeout 150 $PY benchmarks/generation_speed.py \
            --model "hf:$model_dir" --device cuda --dtype $dtype --data "$DATA/gsm8k/test.jsonl" \
            --items "${GEN_ITEMS:-100}" 2>&1 | tee -a "$OUT/generation.log"
    done
}
run_old() {
    [[ -n "$OLD" ]] || return 0
    echo "== baseline ($OLD)"
    PYTHONPATH=$OLD$X timeout 150 $PY benchmarks/engine_profile.py $model --items 400 --repeats 2 \
        --variants "$old_variants" 2>&1 | tee "$OUT/old.log"
}
run_alloc() {
    echo "== this checkout, expandable allocator segments"
    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True PYTHONPATH=src$X timeout 200 \
        $PY benchmarks/engine_profile.py $model --items 400 --repeats 2 --variants "$variants" \
        2>&1 | tee "$OUT/alloc.log"
}
run_speed() {
    echo "== permutation_speed: reference vs engine"
    PYTHONPATH=src$X timeout 200 $PY benchmarks/permutation_speed.py $model --items 100 \
        --long-items 20 --cmb-items 5 2>&1 | tee "$OUT/speed.log"
}
run_eager() {
    echo "== this checkout, fused kernels off (-M fuse=off): the eager model, same variants"
    PYTHONPATH=src$X timeout 100 $PY benchmarks/engine_profile.py $model --items 400 --repeats 2 \
        --variants "$variants" --fuse off 2>&1 | tee -a "$OUT/eager.log"
}
run_accuracy() {
    echo "== fused_accuracy: bfloat16 eager and fused against float32 of the same weights"
    PYTHONPATH=src$X timeout 150 $PY benchmarks/fused_accuracy.py --device cuda --dtype bfloat16 \
        --random-init llama-1b --tokenizer "$TOK" --benchdata "$DATA" --items 60 \
        2>&1 | tee "$OUT/accuracy.log"
}
for s in ${STAGES//,/ }; do
    "run_$s"
done
echo "== summary"
grep -h "passed\|failed\|speedup\|identical\|command \|records \|scoring_seconds\|detectors:\|main thread\|items/s\|busy\|waited\|warm-up\|fused kernels\|max |diff|" "$OUT"/*.log
