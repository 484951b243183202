"""A local PySpark session with the spark-sql-kafka jars, and its clean shutdown."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager

from components import toolchain


@contextmanager
def local_spark(app_name: str, cores: int = 2):
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    jars = ",".join(str(j) for j in toolchain.spark_kafka_jars())
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # bind loopback only, from JVM start
    spark = (SparkSession.builder.master(f"local[{cores}]").appName(app_name)
             .config("spark.jars", jars)
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", str(cores))
             .getOrCreate())
    try:
        yield spark
    finally:
        spark.stop()
        gateway = SparkContext._gateway
        if gateway is not None:  # the JVM exits when its stdin closes
            gateway.shutdown()
            proc = getattr(gateway, "proc", None)
            if proc is not None:
                proc.stdin.close()
                proc.wait(timeout=60)
            SparkContext._gateway = None
            SparkContext._jvm = None
