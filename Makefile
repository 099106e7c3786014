# Two commands do all set-up on a fresh machine:  `make lab`  opens the course,  `make test`  runs the tests.
# Both create ./.venv first if it is missing.  Override the interpreter or torch with
#   make lab PYTHON=python3.12 TORCH="torch==2.13.0"
PYTHON ?= python3
# A pinned torch. On Linux, pip's default torch is the CUDA build (several GB, of no use without an NVIDIA GPU):
#   make lab TORCH_INDEX=cpu     installs the CPU build from https://download.pytorch.org/whl/cpu (any index of
#                                that site works the same way: TORCH_INDEX=cu126). macOS and Windows get CPU builds.
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
TORCH_PIP := $(if $(TORCH_INDEX),--index-url https://download.pytorch.org/whl/$(TORCH_INDEX))
NO_NVIDIA_LINUX := $(if $(filter Linux,$(shell uname -s 2>/dev/null)),$(if $(shell command -v nvidia-smi 2>/dev/null),,yes))
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: lab lab-instructor test lint images release grade class nbgrader feedback handout clean-venv

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(if $(NO_NVIDIA_LINUX),$(if $(TORCH_INDEX),,@echo "note: no NVIDIA GPU here, and pip's torch for Linux is the CUDA build (several GB); make lab TORCH_INDEX=cpu installs the CPU build"))
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet $(TORCH_PIP) "$(TORCH)"
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(STAMP)

# A learner's JupyterLab: each student version is copied once into the git-ignored work/ (an existing file is never
# overwritten, so `make release`, nbgrader and `git pull` never touch a learner's work) and JupyterLab opens
# there, without nbgrader's instructor tools (jupyter/learner/ comes first on the config path; ~/.jupyter is not
# changed). Jupyter refuses to run as root unless told: containers and CI machines often are root.
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)
LEARNER_CONFIG := $(CURDIR)/jupyter/learner$(if $(JUPYTER_CONFIG_PATH),:$(JUPYTER_CONFIG_PATH))
WORK ?= $(CURDIR)/work
lab: $(STAMP)
	$(PY) -m course_lib.workflow.workspace "$(WORK)"
	cd "$(WORK)" && JUPYTER_CONFIG_PATH="$(LEARNER_CONFIG)" $(CURDIR)/$(VENV)/bin/jupyter lab $(LAB_ARGS)

# An instructor's JupyterLab: in notebooks/ (the nbgrader course root), with nbgrader's extensions. The environment's
# programs come first on the PATH: formgrader runs `alembic` to make a new gradebook.
lab-instructor: $(STAMP)
	cd notebooks && PATH="$(CURDIR)/$(VENV)/bin:$$PATH" ../$(VENV)/bin/jupyter lab $(LAB_ARGS)

# Two workers (CI has 2 cores); the 12 slowest tests are listed at the end, to see where CI's time goes.
test: $(STAMP)
	@test -d tests || { echo "no tests/ here: this is the students' hand-out of the course (the tests hold the solutions)"; exit 1; }
	$(PY) -m pytest -n 2 --dist loadgroup --durations=12

lint: $(STAMP)
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check course_lib tests

# Redraw the diagrams in images/ from course_lib/diagrams/ (commit the PNGs; then `make release` inlines them).
images: $(STAMP)
	$(PY) -m course_lib.diagrams

# Regenerate the student versions from the instructor sources (commit the result).
release: $(STAMP)
	$(PY) -m course_lib release

# Grade your own notebook (any path; the lesson id comes from the file name), e.g. your copy made by make lab:
#   make grade NB=work/01_tokenization/01_tokenization.ipynb
grade: $(STAMP)
	$(PY) -m course_lib grade "$(NB)"

# Grade a class (instructors; see the README):  make class LESSON=04_attention FROM=path/to/submissions
# (FROM: a folder of <student>.ipynb files or <student>/ folders; a changed file is a resubmission, graded again;
# EXCHANGE=1 collects from the nbgrader exchange; DEADLINE=2026-12-01T23:59 marks later submissions as late;
# COPY_THRESHOLD=0.5: how alike a reference an answer must be to be flagged for you to look at;
# MEMORY=2G: memory limit of each process running a submission, instead of nbgrader_config.py's;
# REGRADE=1 grades every submission again, also those unchanged since they were graded or found ungradable).
WORKERS ?= $(shell nproc 2>/dev/null || echo 2)
class: $(STAMP)
	$(PY) -m course_lib class $(LESSON) --workers $(WORKERS) $(if $(FROM),--from "$(FROM)") $(if $(EXCHANGE),--exchange) $(if $(MEMORY),--memory $(MEMORY)) $(if $(DEADLINE),--deadline $(DEADLINE)) $(if $(COPY_THRESHOLD),--copy-threshold $(COPY_THRESHOLD)) $(if $(REGRADE),--regrade)

# Each student's feedback for a lesson, one folder per student, to hand back:  make feedback LESSON=04_attention DEST=out
feedback: $(STAMP)
	$(PY) -m course_lib feedback $(LESSON) --to "$(DEST)"

# What students get, as a git repository to publish (no instructor sources, no hidden tests), its Colab links pointing
# at where you will publish it:  make handout DEST=../course URL=https://github.com/<owner>/<name>
# (ARCHIVE=1: also a .tar.gz of it)
handout: $(STAMP)
	$(PY) -m course_lib handout "$(DEST)" $(if $(URL),--url "$(URL)") $(if $(ARCHIVE),--archive)

# Any nbgrader command in the course root with the course's environment:  make nbgrader ARGS="export"
# (through a guard that refuses the commands that would replace the committed student versions, and explains).
nbgrader: $(STAMP)
	$(PY) -m course_lib nbgrader $(ARGS)

clean-venv:
	rm -rf $(VENV)
