#!/usr/bin/env python3
"""spark-submit's main file for the validation job (the package mirrorstack.spark,
the folder spark/; cli.py
documents the input, the method and the report, also in `--help`).

    spark-submit --jars <spark-sql-kafka jars> --py-files validation.zip validate_replication.py --config flows.json
    python spark/validate_replication.py --jars <jars> --config flows.json   # mirrorstack installed

The package comes as a zip on `--py-files` (components/validation/package.py
builds it), or from an installed mirrorstack (`make venv` installs the checkout).
"""
import sys

from mirrorstack.spark.cli import main

if __name__ == "__main__":
    sys.exit(main())
