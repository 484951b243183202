#!/usr/bin/env bash
# What `make setup` cannot install by itself: Python 3.11+, Java 17+, Maven.
set -euo pipefail
fail() { echo "preflight: $*" >&2; exit 1; }

python="${PYTHON:-python3}"
command -v "$python" >/dev/null || fail "$python not found: install Python 3.11+ (Debian: apt-get install python3 python3-venv)"
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || fail "$("$python" --version) is too old: mirrorstack needs Python 3.11+"
"$python" -c 'import venv, ensurepip' 2>/dev/null \
  || fail "$python has no venv/ensurepip module (Debian: apt-get install python3-venv)"

java="${JAVA_HOME:+$JAVA_HOME/bin/}java"
command -v "$java" >/dev/null || fail "java not found: install Java 17+ (Debian: apt-get install openjdk-17-jdk-headless)"
major=$("$java" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
[ "${major:-0}" -ge 17 ] 2>/dev/null || fail "Java $major found: Kafka 4 needs Java 17+"

command -v mvn >/dev/null || fail "mvn not found: install Maven (Debian: apt-get install maven)"
