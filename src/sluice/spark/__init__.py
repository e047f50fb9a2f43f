"""``sluice.spark``: a PySpark data source for Sluice topics, registered as ``sluice``.

    from sluice.spark import register
    register(spark)
    df = (spark.read.format("sluice")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())
    df.write.format("sluice").option("kafka.bootstrap.servers", ...).option("topic", "out").save()

Options and columns follow Spark's own Kafka source and sink; Sluice's consumer
and producer do the I/O. See ``docs/spark.md``.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .offsets import DataLossError, source_metrics
from .options import ReaderOptions, SluiceOptionError, WriterOptions
from .reader import SluiceBatchReader, SluiceStreamReader, source_schema
from .writer import SluiceBatchWriter, SluiceStreamWriter, check_sink_schema

__all__ = [
    "DataLossError",
    "SluiceDataSource",
    "SluiceOptionError",
    "local_session",
    "register",
    "source_metrics",
    "source_schema",
]


class SluiceDataSource(DataSource):
    """The ``sluice`` format: batch and streaming reads and writes of Sluice topics."""

    @classmethod
    def name(cls) -> str:
        return "sluice"

    def _include_headers(self) -> bool:
        raw = {str(k).lower(): str(v) for k, v in self.options.items()}.get("includeheaders")
        return (raw or "false").strip().lower() == "true"

    def schema(self) -> StructType:
        return source_schema(self._include_headers())

    def _check_schema(self, schema: StructType) -> None:
        if schema != source_schema(self._include_headers()):
            raise SluiceOptionError(
                "the sluice source has a fixed schema (key, value, topic, partition, offset, "
                "timestamp, timestampType[, headers]); do not pass a schema to the reader"
            )

    def reader(self, schema: StructType) -> DataSourceReader:
        self._check_schema(schema)
        return SluiceBatchReader(ReaderOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        self._check_schema(schema)
        return SluiceStreamReader(ReaderOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = WriterOptions.parse(self.options)
        check_sink_schema(schema, options)
        return SluiceBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = WriterOptions.parse(self.options)
        check_sink_schema(schema, options)
        return SluiceStreamWriter(options)


def register(spark: SparkSession) -> None:
    """Make ``format("sluice")`` available in ``spark``."""
    spark.dataSource.register(SluiceDataSource)


def local_session(app_name: str = "sluice", cores: int = 2, **conf: Any) -> SparkSession:
    """A local Spark session tuned for small machines, with ``sluice`` registered.

    Python workers use this interpreter (so they can import Sluice); the UI is off,
    the driver binds to loopback and shuffles use ``cores`` partitions."""
    from .session import build_local_session

    spark = build_local_session(app_name, cores, conf)
    register(spark)
    return spark
