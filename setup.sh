#!/bin/sh
# README's two set-up commands. Everything Python goes into a virtual environment, .venv next to
# this file; the system Python is never installed into (Debian's refuses: externally-managed-environment).
#
#   sh setup.sh tool         install porttrack into .venv and run `porttrack status --offline` (the
#                            recorded state, saying how old it is: no network to GitHub needed)
#   sh setup.sh test [ARG…]  install porttrack with its [test] extra into .venv, and quilt (which
#                            the tests run for real), run `ruff check` and `mypy` (pyproject.toml
#                            configures both; either failing fails the run), then the whole suite
#                            on every core: pytest -q -n auto ARG… (pytest-xdist; `-n 0` among
#                            ARG… runs it in one process)
#
# Only on Debian/Ubuntu as root does it install system packages itself (apt-get): python3-venv
# where `python3 -m venv` cannot bootstrap pip, quilt where it is missing. Anywhere else it stops
# before installing anything and says what to install.
set -eu
cd "$(dirname "$0")"

say() { printf 'setup.sh: %s\n' "$*" >&2; }

apt_install() {
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || return 1
    say "installing $* with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

check_python() {
    command -v python3 >/dev/null 2>&1 || { say "python3 not found: install Python 3.10 or newer"; exit 2; }
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' || {
        say "porttrack needs Python 3.10 or newer; python3 is $(python3 -c 'import platform; print(platform.python_version())')"
        exit 2
    }
}

check_quilt() {  # the tests push the queue with a real quilt
    command -v quilt >/dev/null 2>&1 && return 0
    apt_install quilt && command -v quilt >/dev/null 2>&1 && return 0
    say "the tests need quilt and it is not installed. Install it, then run this again:"
    say "  Debian/Ubuntu: apt-get install quilt (as root)   Fedora: dnf install quilt   macOS: brew install quilt"
    exit 2
}

make_venv() {
    # Debian's python3 keeps ensurepip, which `venv` needs to put pip in, in python3.X-venv
    if ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
        pkg="python3.$(python3 -c 'import sys; print(sys.version_info[1])')-venv"
        apt_install "$pkg" && python3 -c 'import ensurepip' >/dev/null 2>&1 || {
            say "python3 cannot make a virtual environment (no ensurepip): install $pkg (Debian/Ubuntu: apt-get install $pkg)"
            exit 2
        }
    fi
    [ -x .venv/bin/python ] && .venv/bin/python -m pip --version >/dev/null 2>&1 || python3 -m venv .venv
}

mode="${1:-}"
[ $# -gt 0 ] && shift
case "$mode" in
tool)
    check_python
    make_venv
    say "installing porttrack into .venv"
    .venv/bin/python -m pip install -q .
    .venv/bin/porttrack status --offline && rc=0 || rc=$?
    say "to poll GitHub live: .venv/bin/porttrack status (no token needed for a public upstream: 60 requests an hour; GITHUB_TOKEN or GH_TOKEN raises it)"
    exit "$rc"
    ;;
test)
    check_python
    check_quilt
    make_venv
    say "installing porttrack and its [test] extra into .venv"
    .venv/bin/python -m pip install -q -e '.[test]'
    # as if activated: a test that runs `porttrack` or `python` finds this environment's
    PATH="$PWD/.venv/bin:$PATH" VIRTUAL_ENV="$PWD/.venv"
    export PATH VIRTUAL_ENV
    say "ruff check (import order, pyflakes, no relative imports)"
    python -m ruff check --quiet || { say "ruff check failed: see above (.venv/bin/ruff check --fix sorts imports)"; exit 1; }
    say "mypy (porttrack/)"
    python -m mypy || { say "mypy failed: see above"; exit 1; }
    exec python -m pytest -q -n auto "$@"
    ;;
*)
    say "usage: sh setup.sh tool | sh setup.sh test [pytest arguments]"
    exit 2
    ;;
esac
