"""The class-data archives `make class-archives` makes (tools/class_archives.py)
map for real: a JVM that must use them (-Xshare:on fails otherwise) loads the
broker's and Connect's main classes from them, with the environment the local
launcher gives it."""
import subprocess

import pytest

from mirrorstack import toolchain
from mirrorstack.platforms import jvm
from mirrorstack.platforms.local import launcher

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("main, args", [(jvm.BROKER_MAIN, ["--version"]), (jvm.CONNECT_DISTRIBUTED_MAIN, [])])
def test_the_broker_and_connect_jvms_load_their_classes_from_the_archives(main, args):
    archive = toolchain.class_archive(jvm.class_archive_name(main))
    assert archive is not None, "no class archive: run `make class-archives` (part of `make setup`)"
    argv = jvm.java_command(toolchain.java_binary(), main, args, classpath=toolchain.kafka_classpath(), heap="256m")
    env = launcher.with_class_archive(argv, None)
    env = {**env, "JDK_JAVA_OPTIONS": f"{env['JDK_JAVA_OPTIONS']} -Xshare:on -Xlog:class+load=info"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert f"{main} source: shared objects file (top)" in done.stdout, (done.stdout[-2000:], done.stderr[-2000:])
