#!/usr/bin/env bash
# bench-steps.sh [ROUNDS]: the two softmax training steps that ../shared/bench
# times in PyTorch 1.13, side by side in interleaved rounds, with each
# step's rate and its share of the machine's sgemm peak. `make bench`
# runs it.
#
# Each round runs the Set Transformer step with LayerNorm
# (BenchmarkSetTransformerStepLN, torch_quick.py maxnorm), then the
# Transformer step (BenchmarkSeq2SeqStep, torch_quick.py seq2seq), each
# followed at once by its PyTorch twin, so that the machine's drift (up to
# 2× within minutes on these shared machines) hits both alike. The summary
# takes each side's best round. A step's GFLOP/s is graph.MatMulFlops'
# count over the step (every matrix product, attention heads included)
# divided by its time; the peak is OpenBLAS's float32 product at 2048³
# (gemm_ref.py, with OPENBLAS_CORETYPE named for the CPU as that folder's
# README says), or probformer's own (BenchmarkGemmPeak) where Python's
# numpy is missing; either is measured before and after the rounds, and
# the shares are of the higher.
#
# Environment: GO (go), TORCH_BENCH (../shared/bench), OPENBLAS_CORE
# (SkylakeX where the CPU has AVX-512, Haswell elsewhere), OUT (bin).
set -euo pipefail
rounds=${1:-3}
case $rounds in '' | *[!0-9]*) echo "bench-steps.sh: ROUNDS must be a positive integer, not '$rounds'" >&2; exit 2;; esac
[ "$rounds" -ge 1 ] || { echo "bench-steps.sh: ROUNDS must be at least 1" >&2; exit 2; }
go=${GO:-go}
torch=${TORCH_BENCH:-../shared/bench}
core=${OPENBLAS_CORE:-$(grep -q avx512f /proc/cpuinfo 2>/dev/null && echo SkylakeX || echo Haswell)}
out=${OUT:-bin}
mkdir -p "$out"
"$go" test -c -o "$out/layers.test" ./layers
"$go" test -c -o "$out/tasks.test" ./cmd/trainer/tasks

python=
if /usr/bin/python3 -c 'import numpy' 2>/dev/null && [ -f "$torch/gemm_ref.py" ]; then python=/usr/bin/python3; fi
havetorch=
if [ -n "$python" ] && /usr/bin/python3 -c 'import torch' 2>/dev/null && [ -f "$torch/torch_quick.py" ]; then havetorch=1; fi

# peak: the best GFLOP/s at 2048³, from OpenBLAS or from our own GEMM,
# measured before the rounds and again after them, and the higher of the
# two kept: a shared machine sometimes gives a whole measurement one core
# (OpenBLAS once printed 236 against 429–452 in the runs around it), and
# a share of a peak measured low would flatter the steps.
if [ -n "$python" ]; then
	measure_peak() { OPENBLAS_CORETYPE=$core "$python" "$torch/gemm_ref.py" 2048x2048x2048 | awk '/GFLOP\/s/ {print $(NF-1)}'; }
	peakfrom="OpenBLAS (gemm_ref.py 2048x2048x2048, OPENBLAS_CORETYPE=$core)"
else
	"$go" test -c -o "$out/kernels.test" ./graph/internal/kernels
	measure_peak() { "$out/kernels.test" -test.run '^$' -test.bench 'GemmPeak$' -test.benchtime 5x | awk '{for (i = 2; i <= NF; i++) if ($i == "best-GFLOP/s") print $(i-1)}'; }
	peakfrom="probformer's own GEMM at 2048³ (BenchmarkGemmPeak): no numpy for gemm_ref.py"
fi
peak0=$(measure_peak)
echo "sgemm peak before the rounds: $peak0 GFLOP/s, $peakfrom"

# gobench BINARY PATTERN: "ms GFLOP/s" of one go benchmark run.
gobench() {
	"$1" -test.run '^$' -test.bench "$2" -test.benchtime 50x | awk '/^Benchmark/ {
		for (i = 2; i <= NF; i++) { if ($i == "ns/op") ms = $(i-1) / 1e6; if ($i == "GFLOP/s") g = $(i-1) }
		printf "%.2f %.1f\n", ms, g }'
}
# torchbench MODEL: PyTorch's median ms per step.
torchbench() {
	if [ -n "$havetorch" ]; then OPENBLAS_CORETYPE=$core OPENBLAS_NUM_THREADS=1 /usr/bin/python3 "$torch/torch_quick.py" "$1" 2>/dev/null | tail -1
	else echo -; fi
}

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for r in $(seq "$rounds"); do
	for row in "maxnorm:$out/layers.test:SetTransformerStepLN$" "seq2seq:$out/tasks.test:Seq2SeqStep$"; do
		name=${row%%:*} rest=${row#*:}
		read -r ms gf < <(gobench "${rest%%:*}" "${rest#*:}")
		pt=$(torchbench "$name")
		printf 'round %d  %-8s probformer %7.2f ms  %6.1f GFLOP/s   PyTorch %s ms\n' "$r" "$name" "$ms" "$gf" "$pt"
		echo "$name $ms $gf $pt" >>"$results"
	done
done
peak1=$(measure_peak)
peak=$(awk -v a="$peak0" -v b="$peak1" 'BEGIN { m = (b + 0 > a + 0) ? b : a; print m }')
echo "sgemm peak after the rounds: $peak1 GFLOP/s; the shares below are of the higher, $peak GFLOP/s"
echo
printf '%-52s %10s %8s %8s %11s %7s\n' step "ms (best)" GFLOP/s "of peak" "PyTorch ms" ratio
awk -v peak="$peak" '
	{ if (!($1 in ms) || $2 < ms[$1]) { ms[$1] = $2; gf[$1] = $3 }
	  if ($4 != "-" && (!($1 in pt) || $4 < pt[$1])) pt[$1] = $4 }
	END {
		label["maxnorm"] = "Set Transformer with LayerNorm (torch_quick maxnorm)"
		label["seq2seq"] = "Transformer 2+2 layers (torch_quick seq2seq)"
		n = split("maxnorm seq2seq", order, " ")
		for (i = 1; i <= n; i++) { s = order[i]
			share = peak > 0 ? sprintf("%.1f%%", 100 * gf[s] / peak) : "-"
			if (s in pt) printf "%-52s %10.2f %8.1f %8s %11.2f %7.2f\n", label[s], ms[s], gf[s], share, pt[s], ms[s] / pt[s]
			else printf "%-52s %10.2f %8.1f %8s %11s %7s\n", label[s], ms[s], gf[s], share, "-", "-" }
	}' "$results"
[ -n "$havetorch" ] || echo "no PyTorch column: apt-get install -y python3-torch python3-numpy libopenblas0-pthread, and TORCH_BENCH=<the reference scripts' folder>"
