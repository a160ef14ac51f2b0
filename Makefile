# probformer: `make train` runs the main job, `make test` passes the tests.
GO      ?= go
BIN     := bin/trainer
FUZZ    ?= 10s
# Each `make train` starts a new run directory; earlier runs are kept.
RUN     := checkpoints/maxnorm-$(shell date +%Y%m%d-%H%M%S)

.PHONY: build install build-mpi test train bench bench-mpi reproduce variants pretrain fuzz clean

build:
	$(GO) build -o $(BIN) ./cmd/trainer

# Put trainer on the PATH: go install writes it to $(go env GOBIN), or
# $(go env GOPATH)/bin when GOBIN is unset; that folder must be on PATH.
install:
	$(GO) install ./cmd/trainer
	@bin=$$($(GO) env GOBIN); bin=$${bin:-$$($(GO) env GOPATH)/bin}; \
	case ":$$PATH:" in *":$$bin:"*) echo "installed $$bin/trainer";; \
	*) echo "installed $$bin/trainer; add it to PATH: export PATH=\"$$bin:\$$PATH\"";; esac

# The trainer with MPI data-parallel training (mpirun -np N bin/trainer-mpi
# train …): needs Open MPI's headers and library (apt-get install -y
# openmpi-bin libopenmpi-dev).
build-mpi:
	$(GO) build -tags mpi -o bin/trainer-mpi ./cmd/trainer

# Unit, gradient, property and CLI tests, plus a short run of each fuzz
# target. The whole suite takes about 5 minutes on 2 cores with the
# optional tools installed; TIMEOUT leaves room for a busy machine (go
# test's default of 10 minutes per package did not).
TIMEOUT ?= 20m
test:
	$(GO) vet ./...
	$(GO) test -timeout $(TIMEOUT) ./...
	GO=$(GO) bash configs/fuzz.sh ./configs FuzzParse $(FUZZ)
	GO=$(GO) bash configs/fuzz.sh ./graph/ckpt FuzzDecodeCheckpoint $(FUZZ)
	GO=$(GO) bash configs/fuzz.sh ./graph/ckpt FuzzReadSafetensors $(FUZZ)
	GO=$(GO) bash configs/fuzz.sh ./datasets FuzzParallelTSV $(FUZZ)
	GO=$(GO) bash configs/fuzz.sh ./datasets FuzzVocabJSON $(FUZZ)
	GO=$(GO) bash configs/fuzz.sh ./losses FuzzBLEU $(FUZZ)
	GO=$(GO) bash configs/fuzz.sh ./cmd/trainer/tasks FuzzCheckpointState $(FUZZ)

# Train the default preset (maxnorm) and score it on its test set.
train: build
	$(BIN) train --config maxnorm --out $(RUN)
	$(BIN) eval --checkpoint $(RUN)

# One training step of the reference models, timed by go test -bench:
# every EM and Bayesian row beside its softmax twin of the same size
# (BenchmarkSetTransformerStepEM, BenchmarkMaxNormStep, and the
# alternating BenchmarkEMAttentionRatio and BenchmarkBayesAttentionRatio;
# BenchmarkEMAttention for one op), then, where
# Debian's python3-torch is installed, the PyTorch 1.13 models of the
# reference scripts (TORCH_BENCH), in the same run (install Debian's
# libopenblas0-pthread with python3-torch: on the reference BLAS PyTorch
# is several times slower).
TORCH_BENCH ?= ../shared/bench
# OpenBLAS named for the CPU, so PyTorch is timed at its best: Debian's
# OpenBLAS falls back to a generic kernel on CPUs it does not recognise.
OPENBLAS_CORE ?= $(shell grep -q avx512f /proc/cpuinfo 2>/dev/null && echo SkylakeX || echo Haswell)
# First the two softmax steps beside PyTorch in interleaved rounds
# (BENCH_ROUNDS), with their GFLOP/s and share of the sgemm peak
# (configs/bench-steps.sh says how each is measured), then every step
# benchmark once.
BENCH_ROUNDS ?= 3
bench:
	GO=$(GO) TORCH_BENCH=$(TORCH_BENCH) OPENBLAS_CORE=$(OPENBLAS_CORE) bash configs/bench-steps.sh $(BENCH_ROUNDS)
	$(GO) test ./layers ./cmd/trainer/tasks -run '^$$' -bench . -benchtime 50x
	$(GO) test ./graph -run '^$$' -bench 'EMAttention' -benchtime 50x
	@if /usr/bin/python3 -c 'import torch' 2>/dev/null && test -d $(TORCH_BENCH); then \
		for m in setstep-softmax setstep-em maxnorm-softmax maxnorm-em-k1v0; do \
			printf 'PyTorch 1.13 %s: ' $$m; OPENBLAS_CORETYPE=$(OPENBLAS_CORE) OPENBLAS_NUM_THREADS=1 /usr/bin/python3 $(TORCH_BENCH)/torch_em_bench.py $$m 2>/dev/null; \
		done; \
	else echo "no PyTorch rows: apt-get install -y python3-torch libopenblas0-pthread, and TORCH_BENCH=<the reference scripts' folder>"; fi
	@if command -v mpirun >/dev/null && pkg-config --exists ompi-c; then $(MAKE) --no-print-directory bench-mpi; \
	else echo "no MPI rows: apt-get install -y openmpi-bin libopenmpi-dev"; fi

# Data parallelism on this machine: the allreduce of gradient-sized
# buffers between 2 processes, then the maxnorm preset's steps per second
# on 1 process of 1 thread, on 2 processes of 1 thread each, with the
# allreduce's time per step (metrics.jsonl's allreduce_ms), and on 1
# process of 2 threads.
MPIRUN  ?= mpirun --oversubscribe $(if $(filter 0,$(shell id -u)),--allow-run-as-root)
MPISTEPS ?= 400
MPIBENCH := -test.run '^$$' -test.bench Allreduce -test.benchtime 300x
MPISET  := --set training.steps=$(MPISTEPS) --set training.eval_every=0 --set training.checkpoint_every=0
bench-mpi: build-mpi
	$(GO) test -c -tags mpi -o bin/mpi.test ./cmd/trainer/train/mpi
	$(MPIRUN) -np 2 sh -c 'if [ "$$OMPI_COMM_WORLD_RANK" = 0 ]; then exec bin/mpi.test $(MPIBENCH); else exec bin/mpi.test $(MPIBENCH) >/dev/null; fi' | grep '^Benchmark'
	rm -rf bin/bench-mpi
	GOMAXPROCS=1 bin/trainer-mpi train --config maxnorm $(MPISET) --out bin/bench-mpi/np1 --progress lines >/dev/null 2>&1
	$(MPIRUN) -np 2 bin/trainer-mpi train --config maxnorm $(MPISET) --out bin/bench-mpi/np2 --progress lines >/dev/null 2>&1
	bin/trainer-mpi train --config maxnorm $(MPISET) --out bin/bench-mpi/threads2 --progress lines >/dev/null 2>&1
	@for r in np1:'1 process × 1 thread' np2:'2 processes × 1 thread' threads2:'1 process × 2 threads'; do printf 'maxnorm, %s: ' "$${r#*:}"; \
		grep '"steps_per_sec"' bin/bench-mpi/$${r%%:*}/metrics.jsonl | tail -1 | grep -o '"\(allreduce_ms\|steps_per_sec\)":[0-9.]*' | tr '\n' ' '; echo; done

# The long runs behind the README's results table (make train, make variants
# and make pretrain are the others).
# Each run goes to checkpoints/reproduce/<name>; a run that has a best
# checkpoint is only evaluated again (finish an interrupted one with
# `trainer train --resume DIR`). About two hours on the 2-core machine.
REP     := checkpoints/reproduce
ENGFRA  ?= ../shared/data/eng-fra
reproduce: build
	for p in maxregression-paper seq2seq-toy segment-em maxnorm-em; do \
		test -f $(REP)/$$p/best.ckpt || $(BIN) train --config $$p --out $(REP)/$$p --progress lines || exit 1; \
		$(BIN) eval --checkpoint $(REP)/$$p || exit 1; done
	test -f $(REP)/maxnorm-em-softmax/best.ckpt || $(BIN) train --config maxnorm-em --out $(REP)/maxnorm-em-softmax \
		--set model.attention.kind=softmax --progress lines
	for p in maxnorm-bayes seq2seq-toy-bayes; do \
		test -f $(REP)/$$p/best.ckpt || $(BIN) train --config $$p --out $(REP)/$$p --progress lines || exit 1; \
		$(BIN) eval --checkpoint $(REP)/$$p --samples 8 || exit 1; done
	test -f $(REP)/eng-fra/best.ckpt || $(BIN) train --config seq2seq-tsv --out $(REP)/eng-fra --progress lines \
		--set data.train_file=$(ENGFRA)/simple.train.tsv --set data.valid_file=$(ENGFRA)/simple.valid.tsv \
		--set data.test_file=$(ENGFRA)/simple.test.tsv
	$(BIN) eval --checkpoint $(REP)/eng-fra

# seq2seq-toy once per score function and once with relative positions:
# test BLEU and ms/step of each (README, "Attention variants"). Finished
# variants are reused; delete checkpoints/variants to start over.
# SWEEP_FLAGS=--retime times the finished variants' steps again.
SWEEP_FLAGS ?=
variants: build
	$(BIN) sweep --config seq2seq-toy --out checkpoints/variants $(SWEEP_FLAGS) \
		--variant scaled_dot \
		--variant dot:model.attention.score=dot \
		--variant bilinear:model.attention.score=bilinear \
		--variant additive:model.attention.score=additive \
		--variant relative:model.attention.relative_positions=8

# Masked-LM pretraining of the toy encoder, then seq2seq-toy from scratch and
# from the pretrained encoder, validated every 250 steps; prints both BLEU
# curves, the step each first reaches 95, and draws pretrain.png (README,
# "Masked-LM pretraining").
PRE     := checkpoints/pretrain
PRESETS := --set training.steps=2000 --set training.eval_every=250 --set training.checkpoint_every=1000
pretrain: build
	test -f $(PRE)/mlm/step-00003000.ckpt || $(BIN) train --config mlm-toy --out $(PRE)/mlm
	$(BIN) eval --checkpoint $(PRE)/mlm
	test -f $(PRE)/scratch/step-00002000.ckpt || $(BIN) train --config seq2seq-toy --out $(PRE)/scratch $(PRESETS)
	test -f $(PRE)/pretrained/step-00002000.ckpt || $(BIN) train --config seq2seq-toy --out $(PRE)/pretrained $(PRESETS) \
		--set init.encoder_from=$(PRE)/mlm
	$(BIN) curves $(PRE)/scratch $(PRE)/pretrained --metric valid_bleu --reach 95 --out $(PRE)/pretrain.png

clean:
	rm -rf bin
