"""segpipe's jobs, one package each. A job may use config/, output/, runtime/ and segment_io, never
another job."""
