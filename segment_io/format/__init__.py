"""The Kafka log format: constants, batches, records, codecs, checksums (no files, no Spark)."""
