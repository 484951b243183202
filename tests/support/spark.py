"""A local PySpark session with the spark-sql-kafka jars, and its clean shutdown."""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager

from mirrorstack import toolchain
from mirrorstack.spark.spark_io import C1_ONLY, stop_spark


@contextmanager
def local_spark(app_name: str, cores: int = 2):
    from pyspark.sql import SparkSession

    jars = ",".join(str(j) for j in toolchain.spark_kafka_jars())
    # as the local job's driver for a small validation (every test's is): C1 only, Spark's classes mapped
    options = " ".join(filter(None, [C1_ONLY, toolchain.spark_archive_option()]))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # bind loopback only, from JVM start
    spark = (SparkSession.builder.master(f"local[{cores}]").appName(app_name)
             .config("spark.jars", jars)
             .config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.shuffle.partitions", str(cores))
             .config("spark.driver.extraJavaOptions", options)
             .getOrCreate())
    try:
        yield spark
    finally:
        stop_spark(spark, "jvm")  # the validation job's own shutdown: session, then its JVM
