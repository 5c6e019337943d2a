"""Spark data sources (`kafka-segments`)."""
