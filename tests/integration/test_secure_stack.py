"""`pulumi up --stack secure` through the real engine: edge (SASL_SSL, SCRAM)
replicated exactly-once into central (SASL_SSL, PLAIN, mTLS), with every
secret checked for leaks: state, Connect's config topic, `ps`, logs, files."""
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
import requests
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from tests.support.kafka_clients import consume, create_topic, produce
from tests.support.secured import jaas_credentials, librdkafka_client, private_key_bodies
from tests.support.stacks import deployed_stack

pytestmark = pytest.mark.integration

RECORDS = 5_000


def _refused(conf: dict) -> bool:
    try:
        AdminClient({**conf, "log_level": 0}).list_topics(timeout=8)
    except KafkaException:
        return True
    return False


def _secrets(local: Path) -> dict[str, str]:
    """Every secret the stack generated, from the 0600 files that hold them."""
    found = {f"{alias} password": jaas_credentials(local / "clients" / alias)[1] for alias in ("edge", "central")}
    for pem in [*local.glob("*/secrets/server.pem"), local / "clients" / "central" / "client.pem"]:
        for i, line in enumerate(private_key_bodies(pem.read_text())):
            found[f"{pem.relative_to(local)} key line {i}"] = line
    return found


def _leaks(text: str, secrets: dict[str, str]) -> list[str]:
    return [name for name, value in secrets.items() if value in text]


def test_secure_stack_replicates_over_sasl_ssl_and_leaks_no_secret(tmp_path):
    with deployed_stack("secure", tmp_path) as (project, out):
        local = project.local_dir
        edge, central = out["clusters"]["edge"], out["clusters"]["central"]
        edge_client = librdkafka_client(local, "edge", "SCRAM-SHA-512")
        central_client = librdkafka_client(local, "central", "PLAIN")

        # Only authenticated clients get in: no TLS, a wrong password, no client certificate.
        assert _refused({"bootstrap.servers": edge})
        assert _refused({**edge_client, "bootstrap.servers": edge, "sasl.password": "wrong"})
        no_cert = {k: v for k, v in central_client.items() if not k.startswith(("ssl.certificate", "ssl.key"))}
        assert _refused({**no_cert, "bootstrap.servers": central})

        # Connect's REST API wants the generated credentials (stack output, a secret).
        rest, creds = out["connect"]["central"], out["connect_credentials"]["central"]
        assert requests.get(f"{rest}/connectors", timeout=10).status_code == 401
        assert requests.get(f"{rest}/connectors", timeout=10, auth=("mirrorstack", "wrong")).status_code == 401
        listed = requests.get(f"{rest}/connectors", timeout=10, auth=(creds["username"], creds["password"]))
        assert sorted(listed.json()) == ["edge->central.MirrorCheckpointConnector",
                                         "edge->central.MirrorHeartbeatConnector", "edge->central.MirrorSourceConnector"]

        create_topic(edge, "orders", partitions=3, replication_factor=1, client=edge_client)
        sent = produce(edge, "orders", RECORDS, prefix="secure", client=edge_client)
        arrived = consume(central, "edge.orders", expected=RECORDS, timeout=300,
                          client={**central_client, "isolation.level": "read_committed"})
        assert sorted(r.value for r in arrived) == sorted(r.value for r in sent)

        again = project.run("up", "--yes", "--skip-preview", "--config", "mirrorstack:validationRunId=secure-1",
                            timeout=900)
        # The replication plan read the SASL_SSL source through the flow's own client files.
        again_output = again.stdout + again.stderr
        assert re.search(r"orders +-> edge\.orders", again_output), again_output[-3000:]
        assert "not checked" not in again_output
        report = project.outputs()["validation"]
        counts = report["flows"]["edge->central"]
        assert report["passed"] is True, report
        assert (counts["source_records"], counts["matched"], counts["missing"], counts["duplicates"]) == \
            (RECORDS, RECORDS, 0, 0)

        secrets = {**_secrets(local), "Connect REST password": creds["password"]}
        assert len(secrets) >= 5  # two passwords and at least the brokers' and a client's key
        # 1. Pulumi state (and its backups/history): only ciphertext.
        state = "".join(p.read_text(errors="ignore") for p in (tmp_path / "pulumi").rglob("*") if p.is_file())
        assert _leaks(state, secrets) == []
        assert '"secure":' in state or "ciphertext" in state  # the secrets are there, encrypted
        # 2. Connect's config topic: references, never values.
        configs = consume(central, f"{out['connect_groups']['central']}-configs", expected=10 ** 6, timeout=15, client=central_client)
        config_text = "\n".join((r.value or b"").decode(errors="ignore") for r in configs)
        assert "${file:" in config_text and "sasl.jaas.config" in config_text
        assert _leaks(config_text, secrets) == []
        # 3. Command lines of every process on the host.
        ps = subprocess.run(["ps", "-ww", "-eo", "args"], capture_output=True, text=True, check=True).stdout
        assert str(local) in ps  # the stack's JVMs are there to look at
        assert _leaks(ps, secrets) == []
        # 4. Logs: the services', and what `pulumi up` printed.
        logs = "".join(p.read_text(errors="ignore") for p in local.rglob("*.log"))
        assert logs and _leaks(logs + project.up_output + again_output, secrets) == []
        # 5. Files: a secret only in 0600 files of 0700 folders.
        for path in (p for p in local.rglob("*") if p.is_file()):
            if _leaks(path.read_text(errors="ignore"), secrets):
                assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
                assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700, path.parent
        assert os.access(local / "clients" / "edge" / "client.properties", os.R_OK)
