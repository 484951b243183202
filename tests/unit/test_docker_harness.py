"""The docker engine harness's own pieces that need no engine (the harness on
the real engine: tests/integration/test_docker_platform.py)."""
import base64
import io
import tarfile

import pytest

from tests.support.docker_provider import integers, nanoseconds, upload_archive


def test_provider_durations_become_nanoseconds():
    assert nanoseconds("5s") == 5 * 10**9
    assert nanoseconds("120s") == 120 * 10**9
    assert nanoseconds("500ms") == 5 * 10**8
    assert nanoseconds("2m") == 120 * 10**9
    with pytest.raises(ValueError, match="unsupported duration"):
        nanoseconds("5 seconds")


def test_whole_numbers_from_the_wire_become_integers():
    assert integers({"ports": [{"internal": 8083.0, "ip": "127.0.0.1"}], "cpus": 1.5}) == {
        "ports": [{"internal": 8083, "ip": "127.0.0.1"}], "cpus": 1.5}


def test_uploads_keep_their_mode_owner_and_group(tmp_path):
    source = tmp_path / "agent.jar"
    source.write_bytes(b"\x00jar")
    archive = tarfile.open(fileobj=io.BytesIO(upload_archive([
        {"file": "/opt/mirrorstack/b-0/server.properties", "content": "a=1\n"},
        {"file": "/opt/mirrorstack/b-0/secrets/key.pem", "content": "KEY", "owner": "1000", "group": "1000",
         "permissions": "0600"},
        {"file": "/opt/x/run.sh", "contentBase64": base64.b64encode(b"#!/bin/sh\n").decode(), "executable": True},
        {"file": "/opt/mirrorstack/lib/agent.jar", "source": str(source)},
    ])))
    entries = {m.name: (m.mode, m.uid, m.gid, archive.extractfile(m).read()) for m in archive.getmembers()}
    assert entries == {
        "opt/mirrorstack/b-0/server.properties": (0o644, 0, 0, b"a=1\n"),
        "opt/mirrorstack/b-0/secrets/key.pem": (0o600, 1000, 1000, b"KEY"),
        "opt/x/run.sh": (0o755, 0, 0, b"#!/bin/sh\n"),
        "opt/mirrorstack/lib/agent.jar": (0o644, 0, 0, b"\x00jar"),
    }  # files only: existing folders keep their modes and owners
