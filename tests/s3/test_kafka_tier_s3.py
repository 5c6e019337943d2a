"""A Kafka remote tier in S3, as Aiven's plugin writes it with its S3 backend: read through the
bucket named in the broker's settings (the endpoint and region from them, the credentials from
the usual AWS chain), every record exactly as a broker was sent it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_kafka_tier_cli import dumped_records
from tests.kip405 import ENCRYPTED, KIP405, produced

pytestmark = pytest.mark.s3

S3_SETTINGS = """
rsm.config.storage.backend.class=io.aiven.kafka.tieredstorage.storage.s3.S3Storage
rsm.config.storage.s3.bucket.name=tiered-bucket
rsm.config.storage.s3.region=us-east-1
rsm.config.storage.s3.endpoint.url={endpoint}
"""


def test_an_aiven_tier_in_s3_reads_back_every_record(s3_env: dict[str, str], tmp_path: Path) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(client_kwargs={"endpoint_url": s3_env["AWS_ENDPOINT_URL"]})
    fs.mkdir("tiered-bucket")
    fs.put(str(KIP405 / ENCRYPTED / "bucket") + "/", "tiered-bucket/", recursive=True)
    lines = (KIP405 / ENCRYPTED / "broker-tiered-storage.properties").read_text().splitlines()
    kept = [line for line in lines if not line.startswith("rsm.config.storage.")]
    text = "\n".join(kept).replace("${KEYS}", str(KIP405 / ENCRYPTED / "keys"))
    settings = tmp_path / "s3.properties"
    settings.write_text(text + S3_SETTINGS.format(endpoint=s3_env["AWS_ENDPOINT_URL"]))
    got = dumped_records(str(KIP405 / ENCRYPTED / "logdir"), "--kafka-tier", str(settings))
    assert got == produced(ENCRYPTED)
