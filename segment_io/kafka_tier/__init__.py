"""Kafka's own tiered storage (KIP-405), read: the remote log metadata a broker records in
`__remote_log_metadata`, replayed as the broker replays it, and the remote segments its storage
plugin wrote (Aiven's layout, Kafka's `LocalTieredStorage`), presented with the broker's local
segments as one plain log directory (`view.KafkaTierView`) that every reader takes."""
