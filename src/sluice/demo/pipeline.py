"""The demo's Spark Structured Streaming job, in two exactly-once stages.

1. ``clicks`` topic -> parse JSON -> watermark on event time -> per product per
   window: views, purchases, revenue, conversion -> ``metrics`` topic (the
   ``sluice`` sink; key = product, value = JSON).
2. ``metrics`` topic -> Parquet files, with the window bounds as timestamps again
   (the topic's JSON carries them as ISO 8601 strings in UTC).

Each stage is a streaming query with its own checkpoint. Stage 1 runs while the
events arrive (a micro-batch every few seconds; Spark also runs a batch without
data when the watermark moves, which is what closes the last windows). Stage 2
runs with ``trigger(availableNow=True)``: it copies what stage 1 wrote and stops.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

__all__ = ["EVENT_SCHEMA", "METRIC_SCHEMA", "ShopPipeline"]

EVENT_SCHEMA = (
    "event_id BIGINT, user_id STRING, session_id STRING, type STRING, page STRING, "
    "product_id STRING, price_cents BIGINT, event_time_ms BIGINT"
)
METRIC_SCHEMA = (
    "window_start STRING, window_end STRING, product_id STRING, views BIGINT, "
    "purchases BIGINT, revenue_cents BIGINT, conversion DOUBLE"
)

_WINDOW_BOUND_FORMAT = "yyyy-MM-dd'T'HH:mm:ss'Z'"
"""How the topic's JSON writes a window bound: ISO 8601 in UTC (the session's time zone,
``spark.sql.session.timeZone``)."""
_WINDOW_BOUND_PARSE = "yyyy-MM-dd'T'HH:mm:ssX"
"""The same read back: the ``Z`` read as the offset, whatever the session's time zone."""


class ShopPipeline:
    """Builds and runs the two streaming queries against one Sluice cluster."""

    def __init__(
        self, spark: SparkSession, bootstrap: str, clicks: str, metrics: str, out_dir: Path,
        window_s: int, watermark_s: int,
    ) -> None:  # fmt: skip
        self.spark, self.bootstrap = spark, bootstrap
        self.clicks, self.metrics = clicks, metrics
        self.parquet_dir = out_dir / "metrics.parquet"
        self.checkpoints = out_dir / "checkpoints"
        self.window_s, self.watermark_s = window_s, watermark_s

    def _source(self, topic: str) -> DataFrame:
        return (
            self.spark.readStream.format("sluice")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .load()
        )

    def aggregates(self) -> DataFrame:
        """Stage 1's result: one row per product per closed event-time window."""
        events = (
            self._source(self.clicks)
            .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
            .select("e.*")
            .withColumn("event_time", F.timestamp_millis("event_time_ms"))
            .withWatermark("event_time", f"{self.watermark_s} seconds")
        )
        # Every event, the end-of-stream marker too, must move the watermark. Spark
        # pushes filters below the watermark unless they use the event-time column,
        # so this one is a single CASE on it.
        product_event = F.col("product_id").isNotNull() & F.col("type").isin(
            "view", "add_to_cart", "purchase"
        )
        events = events.where(
            F.when(F.col("event_time").isNotNull(), product_event).otherwise(False)
        )
        purchase = F.col("type") == "purchase"
        return (
            events.groupBy(F.window("event_time", f"{self.window_s} seconds"), "product_id")
            .agg(
                F.count(F.when(F.col("type") == "view", 1)).alias("views"),
                F.count(F.when(purchase, 1)).alias("purchases"),
                F.coalesce(F.sum(F.when(purchase, F.col("price_cents"))), F.lit(0)).alias(
                    "revenue_cents"
                ),
            )
            .select(
                F.date_format("window.start", _WINDOW_BOUND_FORMAT).alias("window_start"),
                F.date_format("window.end", _WINDOW_BOUND_FORMAT).alias("window_end"),
                "product_id",
                "views",
                "purchases",
                "revenue_cents",
                F.when(F.col("views") > 0, F.col("purchases") / F.col("views"))
                .otherwise(F.lit(0.0))
                .alias("conversion"),
            )
        )

    def start_aggregation(self, trigger_s: float) -> Any:
        """Start stage 1; it runs until stopped."""
        return (
            self.aggregates()
            .select(
                F.col("product_id").cast("binary").alias("key"),
                F.to_json(F.struct("*")).alias("value"),
            )
            .writeStream.format("sluice")
            .queryName("shop_metrics_to_topic")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("topic", self.metrics)
            .option("checkpointLocation", str(self.checkpoints / "aggregate"))
            .outputMode("append")
            .trigger(processingTime=f"{trigger_s} seconds")
            .start()
        )

    def copy_to_parquet(self, timeout_s: float = 600.0) -> int:
        """Run stage 2 over everything in the metrics topic; returns the rows copied.
        The window bounds are written as TIMESTAMPs (instants, UTC), the rest as read."""
        query = (
            self._source(self.metrics)
            .select(F.from_json(F.col("value").cast("string"), METRIC_SCHEMA).alias("m"))
            .select("m.*")
            .withColumns(
                {
                    bound: F.to_timestamp(bound, _WINDOW_BOUND_PARSE)
                    for bound in ("window_start", "window_end")
                }
            )
            .writeStream.format("parquet")
            .queryName("shop_metrics_to_parquet")
            .option("path", str(self.parquet_dir))
            .option("checkpointLocation", str(self.checkpoints / "parquet"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            if not query.awaitTermination(int(timeout_s)):
                raise TimeoutError(f"query {query.name} did not finish in {timeout_s:.0f} s")
            error = query.exception()
            if error is not None:
                raise RuntimeError(f"query {query.name} failed: {error}")
        finally:
            if query.isActive:
                query.stop()
        return sum(int(p["numInputRows"]) for p in query.recentProgress)

    def read_results(self) -> list[dict[str, Any]]:
        """The metrics topic read back with a batch query, as dicts."""
        df = (
            self.spark.read.format("sluice")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("subscribe", self.metrics)
            .load()
            .select(F.from_json(F.col("value").cast("string"), METRIC_SCHEMA).alias("m"))
            .select("m.*")
        )
        return [row.asDict() for row in df.collect()]
