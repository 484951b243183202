# mirrorstack — `make setup` installs every tool the project runs; `make test` runs the suite.
# Versions: components/versions.env (Kafka, JMX exporter) and requirements.txt (pulumi, pyspark).
SHELL := /bin/bash
.DEFAULT_GOAL := help

include components/versions.env
PULUMI_VERSION := $(shell sed -n 's/^pulumi==//p' requirements.txt)
SPARK_VERSION := $(shell sed -n 's/^pyspark==//p' requirements.txt)

PYTHON ?= python3
VENV := $(CURDIR)/.venv
TOOLS := $(CURDIR)/.tools
MVN := tools/maven.sh -f tools/pom.xml -Dtools.dir=$(TOOLS)
PYTEST_ARGS ?=
# Three test modules at once (pytest-xdist, tests/support/scheduling.py): two workers take the
# modules that compute; the third, a waiting lane at nice 3, takes those that mostly wait first
# (Prometheus windows, back-offs, checkpoints, Spark starts), then any with one stack at a time.
# Fresh clones on the 2-core machine (2026-11-29): two workers 43:19 (the CPUs idle 18%); the lane at
# nice 0 41:32, at 5 39:33 (its own bounded waits starved), at 3 35:00. Three equal workers
# (2026-11-26 and -28) failed two tests (a kubectl port-forward unanswered; two stacks in one port
# range, since given five ranges). TEST_WORKERS=-n0: one at a time.
TEST_WORKERS ?= -n 3

.PHONY: demo down plugins kube versions help lock setup setup-local preflight venv kafka class-archives jmx-exporter spark-kafka prometheus engine toxiproxy docker-engine images test unit bench docs clean

help:
	@echo "make setup        install everything below (idempotent; seconds when nothing changed)"
	@echo "  make preflight    check Python >= 3.11, Java >= 17, Maven"
	@echo "  make venv         .venv: this checkout installed editable (mirrorstack) with its extras, at requirements.txt's versions"
	@echo "  make kafka        Kafka $(KAFKA_VERSION) broker, tools, Connect, MirrorMaker 2 -> .tools/kafka"
	@echo "  make jmx-exporter Prometheus JMX exporter agent $(JMX_EXPORTER_VERSION) -> .tools/jmx"
	@echo "  make spark-kafka  spark-sql-kafka for Spark $(SPARK_VERSION) -> .tools/spark-kafka"
	@echo "  make prometheus   prometheus + promtool from Debian packages, if missing"
	@echo "  make engine       Pulumi CLI $(PULUMI_VERSION) + Python language host -> .tools/bin (built from Go modules)"
	@echo "  make toxiproxy    Toxiproxy $(TOXIPROXY_VERSION) (emulated WAN links for benchmarks) -> .tools/bin (built from Go modules)"
	@echo "  make docker-engine Debian's docker.io (if no engine answers) + mmdebstrap, if missing"
	@echo "  make images       mirrorstack/kafka:$(KAFKA_VERSION), mirrorstack/spark:$(SPARK_VERSION), mirrorstack/prometheus:$(DEBIAN_PROMETHEUS_VERSION)"
	@echo "                    from Debian $(DEBIAN_SUITE) packages + .tools (unchanged ones skipped; first run ~1.5 min)"
	@echo "make plugins      the pinned docker + kubernetes provider plugins (get.pulumi.com; else kubernetes's built from Go modules)"
	@echo "make kube         the private single-node cluster's pieces (Kubernetes $(KUBERNETES_VERSION), etcd, CoreDNS) -> $(KUBE_CACHE)"
	@echo "                    then: python -m tools.kube_cluster start|status|stop"
	@echo "make demo         setup (the local platform's part), then \`pulumi up --stack aggregation\`: us + uk mirrored into central, records shown arriving"
	@echo "make down         destroy the aggregation stack"
	@echo "make test         setup, then the whole test suite, three modules at once (PYTEST_ARGS=... to narrow it; TEST_WORKERS=-n0: one at a time)"
	@echo "make bench        setup, then the replication benchmark (LAN, WAN pull, WAN push; ~35 min) -> benchmarks/replication-last-run.json"
	@echo "make unit         setup, then tests/unit only"
	@echo "make schema       regenerate components/schema/topology.schema.json from components/model/spec.py"
	@echo "make diagrams     regenerate the topology diagrams of docs/guides/topologies.md from stacks/*.yaml"
	@echo "make lock         rewrite requirements.txt (the lock) from pyproject.toml's ranges"
	@echo "make docs         the docs site (MkDocs Material, mkdocs.yml) -> build/site; reference pages generated"

setup: setup-local toxiproxy docker-engine images kube

# What the local platform (make demo) runs: no Docker engine, no root needed for images.
setup-local: preflight venv kafka class-archives jmx-exporter spark-kafka prometheus engine

preflight:
	@tools/preflight.sh

# The checkout installed editable (import name mirrorstack: components/ and spark/),
# with the extras the suite and the docs need, at the lock's exact versions.
venv: $(VENV)/.installed
$(VENV)/.installed: requirements.txt pyproject.toml
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet -c requirements.txt -e '.[tests,docs]'
	@touch $@

# Rewrite the lock from pyproject.toml's ranges: the newest versions inside them.
lock:
	@rm -rf $(CURDIR)/build/lock-venv && $(PYTHON) -m venv $(CURDIR)/build/lock-venv
	@$(CURDIR)/build/lock-venv/bin/pip install --quiet -e '.[tests,docs]'
	@{ sed -n '/^#/p' requirements.txt; $(CURDIR)/build/lock-venv/bin/pip freeze --exclude-editable; } > requirements.txt.new
	@mv requirements.txt.new requirements.txt && rm -rf $(CURDIR)/build/lock-venv
	@echo "requirements.txt: $$(grep -vc '^#' requirements.txt) packages locked; review the diff, then make venv"

# Each stamp carries the version, so changing a pin reinstalls that folder.
kafka: $(TOOLS)/kafka/.installed-$(KAFKA_VERSION)
$(TOOLS)/kafka/.installed-$(KAFKA_VERSION): tools/pom.xml
	@rm -rf $(TOOLS)/kafka
	@$(MVN) -P kafka -Dkafka.version=$(KAFKA_VERSION) package
	@touch $@

# Class-data archives of the broker's, Connect's and the local validation job's Spark driver
# JVMs (tools/class_archives.py), made from the jars just installed: each local JVM starts on
# about half the CPU (~60 s, once).
class-archives: $(TOOLS)/class-archives/.built
$(TOOLS)/class-archives/.built: $(TOOLS)/kafka/.installed-$(KAFKA_VERSION) $(TOOLS)/spark-kafka/.installed-$(SPARK_VERSION) tools/class_archives.py $(VENV)/.installed
	@PYTHONPATH=$(CURDIR) $(VENV)/bin/python -m tools.class_archives $(TOOLS)/class-archives
	@touch $@

jmx-exporter: $(TOOLS)/jmx/.installed-$(JMX_EXPORTER_VERSION)
$(TOOLS)/jmx/.installed-$(JMX_EXPORTER_VERSION): tools/pom.xml
	@rm -rf $(TOOLS)/jmx
	@$(MVN) -P jmx -Djmx.version=$(JMX_EXPORTER_VERSION) package
	@touch $@

spark-kafka: $(TOOLS)/spark-kafka/.installed-$(SPARK_VERSION)
$(TOOLS)/spark-kafka/.installed-$(SPARK_VERSION): tools/pom.xml
	@rm -rf $(TOOLS)/spark-kafka
	@$(MVN) -P spark-kafka -Dspark.version=$(SPARK_VERSION) package
	@touch $@

prometheus:
	@tools/install-prometheus.sh

ENGINE_SOURCES := tools/build-pulumi.sh $(wildcard tools/pulumi/*/go.mod tools/pulumi/*/tools.go)
engine: $(TOOLS)/bin/.engine-$(PULUMI_VERSION)
$(TOOLS)/bin/.engine-$(PULUMI_VERSION): $(ENGINE_SOURCES)
	@MIRRORSTACK_CACHE=$(KUBE_CACHE) tools/build-pulumi.sh $(PULUMI_VERSION) $(TOOLS)/bin $(TOOLS)/pulumi-build
	@rm -f $(TOOLS)/bin/.engine-* && touch $@

toxiproxy: $(TOOLS)/bin/toxiproxy-server-$(TOXIPROXY_VERSION)
$(TOOLS)/bin/toxiproxy-server-$(TOXIPROXY_VERSION):
	@command -v go >/dev/null || { echo "toxiproxy: Go not found; install Go (Debian: apt-get install golang)" >&2; exit 1; }
	@echo "toxiproxy: building v$(TOXIPROXY_VERSION) from Go modules (~40 s, then cached)"
	@rm -rf $(TOOLS)/toxiproxy-build && mkdir -p $(TOOLS)/toxiproxy-build $(TOOLS)/bin
	@cd $(TOOLS)/toxiproxy-build && GOFLAGS=-mod=mod GOTOOLCHAIN=local GOBIN=$(TOOLS)/toxiproxy-build \
	  go install github.com/Shopify/toxiproxy/v2/cmd/server@v$(TOXIPROXY_VERSION)
	@mv $(TOOLS)/toxiproxy-build/server $@ && rm -rf $(TOOLS)/toxiproxy-build

# The Docker engine (tools/docker_engine.py starts a private dockerd when none answers) and
# the mirrorstack/* images built into it from Debian packages (tools/images.py).
docker-engine: venv
	@tools/install-docker-engine.sh $(VENV)/bin/python

images: venv kafka jmx-exporter spark-kafka docker-engine
	@PYTHONPATH=$(CURDIR) $(VENV)/bin/python -m tools.images

# The Pulumi engine with local state (see env.sh for every variable).
WITH_ENGINE := . ./env.sh &&

# Not part of setup: platform docker/kubernetes only. Downloads each plugin from
# get.pulumi.com (env.sh turns automatic downloads off); where that cannot be reached,
# builds the kubernetes one from the Go module proxy (~13 min once, cached in
# KUBE_CACHE). Fails naming the plugin and the reason.
KUBE_CACHE ?= $(or $(MIRRORSTACK_CACHE),$(HOME)/.cache/mirrorstack)
plugins: venv engine
	@$(WITH_ENGINE) MIRRORSTACK_CACHE=$(KUBE_CACHE) PYTHONPATH=$(CURDIR) $(VENV)/bin/python -m tools.plugins

# Part of setup (tests/integration/test_kubernetes_platform.py starts and stops a cluster of them through
# tests/support/kube.py): the private single-node cluster's pieces (python -m tools.kube_cluster)
# and the kubernetes provider the tests run (uninstalled: `make plugins` installs it),
# built from the Go module proxy (~9 min cold on 2 idle cores; the provider ~7 more), cached outside
# the checkout in KUBE_CACHE, keyed by version: another clone on this machine reuses them.
kube: venv
	@tools/install-kube-packages.sh
	@tools/build-kube.sh $(KUBE_CACHE) $(KUBERNETES_VERSION) $(ETCD_VERSION) $(COREDNS_VERSION) $(LOCAL_PATH_PROVISIONER_VERSION)
	@MIRRORSTACK_CACHE=$(KUBE_CACHE) PYTHONPATH=$(CURDIR) $(VENV)/bin/python -m tools.plugins --build-kubernetes

demo: setup-local
	@$(WITH_ENGINE) PYTHONPATH=$(CURDIR) $(VENV)/bin/python tools/demo.py

# The demo's stack config: a git-ignored copy of stacks/Pulumi.aggregation.yaml (tools/demo.py).
DEMO_CONFIG := .mirrorstack/demo/Pulumi.aggregation.yaml

down:
	@$(WITH_ENGINE) pulumi destroy --stack aggregation --yes --non-interactive --skip-preview \
	  $(if $(wildcard $(DEMO_CONFIG)),--config-file $(DEMO_CONFIG))

test: setup
	$(VENV)/bin/python -m pytest $(TEST_WORKERS) $(PYTEST_ARGS)

# The whole comparison (see benchmarks/replication.py); BENCH_ARGS=--quick for a smoke run.
BENCH_ARGS ?=
bench: setup
	$(VENV)/bin/python -m benchmarks.replication --out benchmarks/replication-last-run.json $(BENCH_ARGS)

unit: setup
	$(VENV)/bin/python -m pytest tests/unit $(PYTEST_ARGS)

# The committed JSON Schema of the stack's topology; a unit test fails when it is stale.
.PHONY: schema
schema: venv
	$(VENV)/bin/python -m mirrorstack.model.spec

# The topology guide's Mermaid diagrams, from the stack files; a unit test fails when one is stale.
.PHONY: diagrams
diagrams: venv
	$(VENV)/bin/python -m mirrorstack.diagram docs/guides/topologies.md

# The docs site (MkDocs, Material theme; mkdocs.yml) into build/site. --strict: a broken link
# fails; tests/unit/test_docs.py builds it the same way. The reference pages are generated.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/python -m mkdocs build --strict --site-dir build/site

clean:
	rm -rf $(TOOLS) $(VENV) tools/target

versions:
	@echo "KAFKA_VERSION=$(KAFKA_VERSION)"
	@echo "JMX_EXPORTER_VERSION=$(JMX_EXPORTER_VERSION)"
	@echo "TOXIPROXY_VERSION=$(TOXIPROXY_VERSION)"
	@echo "SPARK_VERSION=$(SPARK_VERSION)"
	@echo "DEBIAN_SUITE=$(DEBIAN_SUITE)"
	@echo "DEBIAN_PROMETHEUS_VERSION=$(DEBIAN_PROMETHEUS_VERSION)"
	@echo "DEBIAN_PROMETHEUS_CLIENT_VERSION=$(DEBIAN_PROMETHEUS_CLIENT_VERSION)"
	@echo "PULUMI_VERSION=$(PULUMI_VERSION)"
