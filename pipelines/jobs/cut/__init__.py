"""`cut`: a log directory as Kafka's truncation to an offset or a moment leaves it."""
