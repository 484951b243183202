"""Certificate lifecycle on the ClusterCertificates provider itself (its
create/diff/update are plain Python): one certificate per node, renewal in the
window (the clock hook), a node added under the same CA, CA rotation phases;
the model's rules; the renewal alert under promtool."""
from __future__ import annotations

import datetime

import pytest
import yaml
from cryptography import x509

from mirrorstack.certificates.resource import CLOCK_OFFSET_ENV, ClusterCertificatesProvider
from mirrorstack.certificates import lifecycle as life
from mirrorstack.certificates import tls
from mirrorstack.monitoring.alerts import (
    CERT_RENEWAL_DUE, alert_rules_file, certificate_expiry_records, certificate_rule,
)
from mirrorstack.model.spec import TopologyError, load_topology
from mirrorstack.platforms.local.platform import LocalPlatform
from tests.support.promtool import promtool
from tests.support.pulumi_mocks import ROOT, deploy

NODES = {"edge-controller": ["127.0.0.1", "localhost"], "edge-broker-0": ["edge-b0.example", "localhost"]}
POLICY = {"validity_days": 365, "renew_before_days": 30, "ca_validity_days": 3650, "ca_generation": 1}


def props(nodes=NODES, **policy) -> dict:
    return {"cluster": "edge", "nodes": nodes, **POLICY, **policy}


def created(**policy) -> tuple[ClusterCertificatesProvider, dict]:
    provider = ClusterCertificatesProvider()
    return provider, provider.create(props(**policy)).outs


def up(provider, olds: dict, news: dict) -> dict:
    """What an `up` does: diff, then update when the diff found something."""
    if not provider.diff("id", olds, news).changes:
        return olds
    return provider.update("id", olds, news).outs


def leaf(outs: dict, name: str) -> x509.Certificate:
    return tls.leaf_of(outs["leaves"][name])


def ca_fingerprint(outs: dict) -> str:
    return outs["certificates"]["ca"]["fingerprint_sha256"]


def test_each_node_has_its_own_certificate_for_its_own_hosts():
    _, outs = created()
    assert set(outs["leaves"]) == {*NODES, life.CLIENT}
    for name, hosts in NODES.items():
        cert = leaf(outs, name)
        assert sorted(tls.host_names(cert)) == sorted(hosts)
        assert cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value == name
        assert tls.signed_by(cert, outs["ca_cert"])
        days = (cert.not_valid_after_utc - datetime.datetime.now(datetime.timezone.utc)).days
        assert days in (364, 365)
    assert tls.host_names(leaf(outs, life.CLIENT)) == []
    assert outs["truststore"] == outs["ca_cert"] and "PRIVATE KEY" in outs["ca_key"]
    assert outs["certificates"]["certificates"]["edge-broker-0"]["not_after"].endswith("Z")


def test_nothing_changes_outside_the_window(monkeypatch):
    provider, outs = created()
    monkeypatch.setenv(CLOCK_OFFSET_ENV, "334")  # 31 days before expiry: not yet
    assert provider.diff("id", outs, props()).changes is False


def test_an_up_inside_the_window_renews_with_the_same_ca(monkeypatch, capfd):
    provider, outs = created()
    monkeypatch.setenv(CLOCK_OFFSET_ENV, "336")  # 29 days before expiry
    diff = provider.diff("id", outs, props())
    assert diff.changes is True and diff.replaces == []
    assert "pending: renew edge-broker-0's certificate" in capfd.readouterr().err
    renewed = provider.update("id", outs, props()).outs
    assert "mirrorstack: edge certificates: done: renew edge-broker-0" in capfd.readouterr().err
    assert ca_fingerprint(renewed) == ca_fingerprint(outs) and renewed["ca_key"] == outs["ca_key"]
    for name in [*NODES, life.CLIENT]:
        assert leaf(renewed, name).serial_number != leaf(outs, name).serial_number
        assert tls.signed_by(leaf(renewed, name), outs["ca_cert"])
        # issued from the real now: the hook shifts only the decision
        assert leaf(renewed, name).not_valid_before_utc <= datetime.datetime.now(datetime.timezone.utc)
    monkeypatch.delenv(CLOCK_OFFSET_ENV)  # the next day's `up`: renewed leaves are out of the window
    assert provider.diff("id", renewed, props()).changes is False


def test_adding_a_node_keeps_the_ca_and_the_other_certificates():
    provider, outs = created()
    nodes = {**NODES, "edge-broker-1": ["edge-b1.example", "localhost"]}
    grown = up(provider, outs, props(nodes))
    assert ca_fingerprint(grown) == ca_fingerprint(outs) and grown["truststore"] == outs["truststore"]
    for name in [*NODES, life.CLIENT]:
        assert grown["leaves"][name] == outs["leaves"][name]  # byte for byte: their nodes do not restart
    assert sorted(tls.host_names(leaf(grown, "edge-broker-1"))) == ["edge-b1.example", "localhost"]
    assert tls.signed_by(leaf(grown, "edge-broker-1"), outs["ca_cert"])
    shrunk = up(provider, grown, props())
    assert set(shrunk["leaves"]) == {*NODES, life.CLIENT} and ca_fingerprint(shrunk) == ca_fingerprint(outs)


def test_ca_rotation_runs_in_three_phases_one_per_up(capfd):
    provider, outs = created()
    old_ca = outs["ca_cert"]
    news = props(ca_generation=2)
    one = up(provider, outs, news)  # trust both, certificates unchanged
    new_ca = one["next_ca_cert"]
    assert tls.certificates_in(one["truststore"]) == tls.certificates_in(old_ca + new_ca)
    assert one["leaves"] == outs["leaves"] and one["ca_cert"] == old_ca
    assert one["certificates"]["rotation_phase"] == life.TRUSTING_NEW_CA
    assert "next `pulumi up`: re-issue every certificate" in capfd.readouterr().err

    assert provider.diff("id", one, news).changes is True  # a plain `up` continues it
    assert "pending: CA rotation phase 2/3" in capfd.readouterr().err
    two = up(provider, one, news)  # every leaf by the new CA, both still trusted
    assert two["ca_cert"] == new_ca and two["truststore"] == one["truststore"]
    for name in [*NODES, life.CLIENT]:
        assert tls.signed_by(leaf(two, name), new_ca) and not tls.signed_by(leaf(two, name), old_ca)
        assert tls.certificates_in(two["leaves"][name])[1] == tls.certificates_in(new_ca)[0]  # the chain's CA

    capfd.readouterr()
    three = up(provider, two, news)  # the old CA dropped
    assert "CA rotation done: only CA generation 2 is trusted" in capfd.readouterr().err
    assert three["truststore"] == new_ca and three["leaves"] == two["leaves"]
    assert three["certificates"]["rotation_phase"] == life.STEADY
    assert three["certificates"]["ca"]["generation"] == 2
    assert ca_fingerprint(three) == tls.fingerprint(tls.certificates_in(new_ca)[0]) != ca_fingerprint(outs)
    assert provider.diff("id", three, news).changes is False


def test_a_node_whose_hosts_changed_gets_a_new_certificate_and_only_it():
    provider, outs = created()
    moved = up(provider, outs, props({**NODES, "edge-broker-0": ["edge-b0.other", "localhost"]}))
    assert sorted(tls.host_names(leaf(moved, "edge-broker-0"))) == ["edge-b0.other", "localhost"]
    assert moved["leaves"]["edge-controller"] == outs["leaves"]["edge-controller"]


def test_a_ca_inside_the_window_asks_for_a_rotation(monkeypatch, capfd):
    provider, outs = created(ca_validity_days=400)
    monkeypatch.setenv(CLOCK_OFFSET_ENV, "380")
    provider.diff("id", outs, props(ca_validity_days=400))
    assert "raise clusters.edge.security.certificates.ca_generation to 2" in capfd.readouterr().err


def test_a_lowered_ca_generation_is_refused():
    provider, outs = created(ca_generation=3)
    with pytest.raises(life.GenerationLowered, match="clusters.edge.security.certificates.ca_generation: 2 is below the deployed CA generation 3"):
        provider.diff("id", outs, props(ca_generation=2))


@pytest.mark.parametrize("certificates, problem", [
    ({"validity_days": 30, "renew_before_days": 30}, "renew_before_days (30) must be less than validity_days (30)"),
    ({"validity_days": 900}, "certificates.validity_days: Input should be less than or equal to 825"),
    ({"validity_days": 400, "ca_validity_days": 365}, "ca_validity_days (365) must exceed validity_days (400)"),
    ({"ca_generation": 0}, "certificates.ca_generation: Input should be greater than or equal to 1"),
])
def test_model_rules_name_the_field_and_the_fix(certificates, problem):
    with pytest.raises(TopologyError) as err:
        load_topology({"platform": "local", "clusters": {
            "a": {"security": {"protocol": "SSL", "certificates": certificates}}, "b": {}},
            "connect": {"c": {"kafka": "b"}}, "flows": [{"source": "a", "target": "b", "connect": "c", "topics": ["x"]}]})
    assert problem in str(err.value) and "fix:" in str(err.value)


def test_model_defaults_are_strimzis():
    c = load_topology({"platform": "local", "clusters": {"a": {"security": {"protocol": "SSL"}}, "b": {}},
                       "connect": {"c": {"kafka": "b"}}, "flows": [{"source": "a", "target": "b", "connect": "c", "topics": ["x"]}]}
                      ).clusters["a"].security.certificates
    assert (c.validity_days, c.renew_before_days, c.ca_generation) == (365, 30, 1)


def test_renewal_alert_fires_once_inside_the_window_and_not_before(tmp_path):
    # promtool's clock starts at 0: a certificate expiring 45 days after the epoch,
    # 30-day window: quiet on day 10, firing on day 20.
    summary = {"ca": {"not_after": "1980-01-01T00:00:00Z"},
               "certificates": {"edge-broker-0": {"not_after": "1970-02-15T00:00:00Z"}}}
    rules = alert_rules_file([certificate_rule("edge", 30)], certificate_expiry_records("edge", summary))
    (tmp_path / "alerts.yml").write_text(rules)
    check = promtool("check", "rules", str(tmp_path / "alerts.yml"))
    assert check.returncode == 0, check.stdout + check.stderr
    firing = {"exp_labels": {"severity": "warning", "cluster": "edge", "certificate": "edge-broker-0"},
              "exp_annotations": {"summary": "Certificate edge-broker-0 of cluster edge expires in 25d 0h 0m 0s: "
                                             "run pulumi up to renew it"}}
    (tmp_path / "test.yml").write_text(yaml.safe_dump({
        "rule_files": ["alerts.yml"], "evaluation_interval": "1m",
        "tests": [{"interval": "1d", "input_series": [], "alert_rule_test": [
            {"eval_time": "10d", "alertname": CERT_RENEWAL_DUE, "exp_alerts": []},
            {"eval_time": "20d", "alertname": CERT_RENEWAL_DUE, "exp_alerts": [firing]}]}]}))
    run = promtool("test", "rules", str(tmp_path / "test.yml"))
    assert run.returncode == 0, run.stdout + run.stderr


def test_monitoring_of_a_secured_stack_records_every_certificate_and_alerts(tmp_path):
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.secure.yaml").read_text())
    topology = load_topology({**document["config"]["mirrorstack:topology"], "monitoring": {}})
    mocks, built = deploy(lambda: LocalPlatform("secure", str(tmp_path)), topology, stack="secure")
    (prometheus,) = [r.inputs for r in mocks.resources if r.inputs and r.inputs.get("name") == "prometheus"]
    rules = yaml.safe_load(prometheus["files"]["alerts.yml"])["groups"][0]["rules"]
    recorded = {(r["labels"]["cluster"], r["labels"]["certificate"]) for r in rules if "record" in r}
    assert recorded == {(alias, name) for alias in ("edge", "central")
                        for name in ("ca", f"{alias}-controller", f"{alias}-broker-0", "client")}
    assert {r["expr"] for r in rules if "record" in r} >= {"vector(1798761600)"}  # 2027-01-01T00:00:00Z
    alerts = [r for r in rules if r.get("alert") == CERT_RENEWAL_DUE]
    assert sorted(r["labels"]["cluster"] for r in alerts) == ["central", "edge"]
    assert built["topology"].monitoring.alert_rules.count(CERT_RENEWAL_DUE) == 1
