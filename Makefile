# RL for language models: the labs of source/, their grading and their student edition.  `make help` lists the targets.
# Everything runs inside .venv at the repo root, created on first use.

SHELL  := /bin/bash
VENV   := .venv
BIN    := $(CURDIR)/$(VENV)/bin
PY     := $(BIN)/python
SYSTEM_PATH := $(PATH)
export PATH := $(BIN):$(PATH)
STAMP  := $(VENV)/.installed
# the interpreter that makes .venv (PYTHON=python3.12 picks another); the course needs 3.11 or newer
PYTHON ?= python3
PYTHON_CHECK = $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
  echo "The course needs Python 3.11 or newer; '$(PYTHON)' is $$($(PYTHON) --version 2>&1 || echo missing)."; \
  echo "Install Python 3.11+ (python.org; apt install python3.11-venv; brew install python@3.12; conda)"; \
  echo "and run make again with it, e.g. make PYTHON=python3.12 ...; then it makes .venv."; exit 1; }
# the labs this class assigns: those labs.txt lists, else every source/<lab>/<lab>.ipynb (course_staff.course,
# asked when a recipe needs them, after set-up; docs/ta_guide.md, "Leaving a lab out"); release/ holds every lab
LABS      = $(or $(shell $(PY) -m course_staff.course),$(error no labs to work on: see the message above))
EVERY_LAB = $(shell $(PY) -m course_staff.course --every)
LAB    ?= lab11
PORT   ?= 8888
ROSTER ?= $(wildcard roster.csv)
JOBS   ?= 1
SHARD  ?= 1/1
PGDIR  := .postgres
# JupyterLab refuses to run as root (containers, CI) unless told to
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: help setup system-install test-install repair labs lab student-edition test test-fast check-config release autograde feedback grades bench science figures sft lab13-data browser clean
.PHONY: science-verify record clear-manual postgres postgres-install postgres-stop bench-class hub hub-install hub-stop sandbox-install sandbox

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

# jsonschema's "format-nongpl" extra (asked for by jupyter-events and jupyterhub) brings rfc3987-syntax,
# and jsonschema then builds its RFC 3987 grammar at import: 1.5-2 CPU-s in every process that imports
# nbformat (each nbgrader command, JupyterLab, a test worker), for the "iri" string format, which nothing
# of the course's nbgrader and Jupyter checks. Every pip run into .venv is followed by this.
DROP_RFC3987 = $(PY) -m pip uninstall --quiet --yes rfc3987-syntax 2>&1 | grep -v "^WARNING: Skipping" || true

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON_CHECK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch pinned (its CPU build is what every course machine runs) and the rest, in one resolver call;
	# byte-compiled here, as the grading sandbox and the hub's users import from a .venv they cannot write
	$(PY) -m pip install --quiet torch==2.13.0 -e '.[dev]'
	$(DROP_RFC3987)
	touch $(STAMP)

setup: $(STAMP)  ## create .venv with the pinned packages and course_utils (editable)

repair:  ## install the pinned packages into .venv again (setup does nothing once .venv is installed)
	rm -f $(STAMP)
	$(MAKE) setup

labs: setup  ## the labs this class assigns (labs.txt, else every lab of source/): record, lab, the edition, the hub
	@echo $(LABS)

lab: setup  ## open JupyterLab on the instructor's notebooks (source/: solutions and hidden tests)
	$(BIN)/jupyter lab --notebook-dir=$(CURDIR) --port=$(PORT) $(ROOT_FLAG) $(foreach lab,$(LABS),source/$(lab)/$(lab).ipynb)

student-edition: setup  ## write the student edition to DEST=<new folder> (GIT=1: as a git repository)
	@test -n "$(DEST)" || { echo "usage: make student-edition DEST=<new or empty folder> [GIT=1]"; exit 2; }
	$(PY) -m course_staff.edition.student_edition "$(DEST)" $(if $(GIT),--git)

# $(call apt_install,PACKAGES,WHAT FOR): as root on Debian, one apt-get update and one apt-get install of the
# (missing) PACKAGES with what Debian recommends beside them (chromium's fonts and sandbox helper: the
# browser tests ran with them); elsewhere, say what to install (the tests that need them skip, or fail on CI: .ci/run)
apt_install = if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "apt-get install$(1)"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq $(1) >/dev/null; \
	else echo "missing:$(1): install (apt-get install$(1), or your system's packages) $(2)"; fi
# the Debian packages `make test` needs, each with the test that finds it (one table for system-install and the
# targets that install one of them): chromium (the browser tests), bubblewrap (the grading sandbox), postgresql
# (class grading, the hub's gradebook), npm and nodejs (the hub's proxy). Tested with the system's Python, as
# .venv may be in the making at the same time.
SYSTEM_PACKAGES := chromium bubblewrap postgresql npm
have_chromium   = command -v chromium >/dev/null
have_bubblewrap = command -v bwrap >/dev/null
have_postgresql = PATH="$(SYSTEM_PATH)" $(PYTHON) -m course_staff.grading.postgres check >/dev/null 2>&1
have_npm        = command -v npm >/dev/null
debian_npm      = nodejs npm
debian_names    = $(or $(debian_$(1)),$(1))
MISSING_PACKAGES = $(foreach p,$(SYSTEM_PACKAGES),$$($(have_$(p)) || echo " $(call debian_names,$(p))"))
# $(call install_missing,PACKAGE,WHAT FOR): apt-get install PACKAGE (of the table above) when its test fails
install_missing = @$(have_$(1)) || { $(call apt_install, $(call debian_names,$(1)),$(2)); }

system-install:  ## install the Debian packages make test needs when missing (as root; one apt-get for all)
	@missing=$$(echo $(MISSING_PACKAGES)); [ -z "$$missing" ] || { $(call apt_install, $$missing,for make test); }

test-install:  ## set up all make test needs: .venv (pip) and the system packages (apt-get) at once, then the hub
	@echo "setting up .venv (pip) and the missing system packages (apt-get) at once"
	@$(MAKE) --no-print-directory -j2 --output-sync=target setup system-install
	@$(MAKE) --no-print-directory hub-install

browser:  ## install Debian's chromium for the browser tests when it is missing
	$(call install_missing,chromium,to run the browser tests)

test: test-install  ## run every test: course_utils, labs, mutants, nbgrader lifecycle, browser
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder -rfEs --durations=15   # two workers, a file each, longest first (tests/conftest.py); failures, errors and skip reasons named, the 15 slowest

test-fast: setup  ## the unit tests only: nothing starts nbgrader, a kernel, a venv, a browser or training
	$(PY) -m pytest -q -n 2 --dist loadfile -m "not slow" -rfEs --durations=5   # both cores

sandbox-install: setup  ## install Debian's bubblewrap (the grading sandbox) when it is missing (as root)
	$(call install_missing,bubblewrap,to grade in the sandbox)

sandbox: sandbox-install  ## is the grading sandbox on here? start one and print what student code sees
	$(PY) -m course_staff.grading.sandbox

check-config: setup  ## fail loudly if nbgrader_config.py has an error (nbgrader would only log it)
	$(PY) -m course_staff.grading.nbgrader_plugins nbgrader_config.py

release: check-config  ## regenerate release/ from source/ (run after editing a lab)
	for lab in $(EVERY_LAB); do $(BIN)/nbgrader generate_assignment $$lab --force --create; done
	$(PY) -m course_staff.edition.lab_cells    # the labs' cell ids, for students' pre-submission check

record: check-config  ## TA, once per term: record the labs in the gradebook (release/ untouched)
	$(PY) -m course_staff.grading.class_grading record $(LABS)

autograde: check-config sandbox-install  ## TA: grade what is collected and not graded yet (LAB=, JOBS=n, SHARD=k/n)
	$(PY) -m course_staff.grading.class_grading autograde $(LAB) --jobs $(JOBS) --shard $(SHARD)

feedback: check-config  ## TA: write feedback HTML for every autograded submission (LAB=...)
	$(BIN)/nbgrader generate_feedback $(LAB)

grades: check-config  ## TA: grades.csv, grades_by_task_<lab>.csv, and with ROSTER=<LMS export> the LMS import file
	$(BIN)/nbgrader export --to grades.csv
	$(PY) -m course_staff.grading.task_grades
	@$(if $(ROSTER),$(PY) -m course_staff.grading.lms_export "$(ROSTER)" $(if $(KEY),--key "$(KEY)"),\
	  echo "No roster: for Canvas or Moodle, run make grades ROSTER=<the gradebook CSV exported from the LMS> (docs/ta_guide.md)")

clear-manual: check-config  ## TA: drop STUDENT's manual scores in LAB (a resubmission counts)
	$(PY) -m course_staff.grading.manual_scores clear $(LAB) $(STUDENT)

postgres-install: setup  ## install Debian's PostgreSQL server when it is missing (as root)
	$(call install_missing,postgresql,for the class-grading tests)

postgres: postgres-install  ## start a throwaway local PostgreSQL gradebook (a TA's dry run)
	$(PY) -m course_staff.grading.postgres start $(PGDIR)

postgres-stop: setup  ## stop it and delete its data
	$(PY) -m course_staff.grading.postgres stop $(PGDIR)

hub-install: setup postgres-install sandbox-install  ## install the hub's pinned jupyterhub (PyPI) and configurable-http-proxy (npm) when missing
	$(call install_missing,npm,for the hub)
	$(PY) -m course_staff.hub install
	$(DROP_RFC3987)

hub: hub-install  ## a local JupyterHub (root): 1 instructor, 3 students, the exchange, PostgreSQL; prints URL and passwords
	$(PY) -m course_staff.hub start

hub-stop: setup  ## stop it and remove its users, their homes, the exchange, its processes and state
	$(PY) -m course_staff.hub stop

bench: setup  ## time every path students, TAs and instructors wait on (then render the figures the docs quote)
	$(PY) -m benchmarks.bench

bench-class: postgres-install sandbox-install  ## a class of 40 graded on PostgreSQL with JOBS=1, then JOBS=2
	$(PY) -m benchmarks.bench_class

science: setup  ## every lab's lessons and the Beyond PPO notebook's claims over 5 seeds, each against a negative control
	$(PY) -m benchmarks.science; status=$$?; $(PY) -m benchmarks.figures; exit $$status

science-verify: setup  ## after a change that should move no number: rerun seed 0 in both settings; if identical, re-stamp the science table
	$(PY) -m benchmarks.science_verify; status=$$?; $(PY) -m benchmarks.figures; exit $$status

figures: setup  ## render the figures README, docs and benchmarks/README quote from benchmarks/results; name the stale ones
	$(PY) -m benchmarks.figures

sft: setup  ## rebuild the shipped SFT checkpoint (deterministic, a few seconds)
	$(PY) -m course_staff.edition.build_sft

lab13-data: setup  ## rebuild Lab 13's starting world (Lab 12's RM, offset, rankings and pairs) from Lab 12's reference
	$(PY) -m course_staff.edition.build_lab13_world

clean:  ## remove grading products (keeps .venv)
	rm -rf submitted autograded feedback exchange gradebook.db grades.csv artifacts .pytest_cache
	rm -f grades_by_task_*.csv grades_canvas.csv grades_moodle.csv lms_report.txt
