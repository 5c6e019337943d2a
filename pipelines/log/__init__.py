"""What every job learns of a log before it changes anything: the scan of batch headers, producer
and transaction state, and Kafka's retention rules. Shared by the jobs; knows none of them."""
