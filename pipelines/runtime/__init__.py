"""Spark plumbing every job shares (session, worker daemon, class archive, task packing, errors
from workers); it knows no job."""
