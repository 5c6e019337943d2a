"""Changing a topic inside Kafka's tiered storage while its cluster serves it: the live cluster
the change talks to (cluster: records to __remote_log_metadata, its admin), the swap of a served
segment for a rewritten one through that topic (swap, its journal in swap_journal), and the layout a
swap writes by plugin (stores). What reads a tier's bytes stays in segment_io.kafka_tier; what
changes a serving cluster lives here, beside the jobs that do it (erase --in-place --kafka-tier)."""
