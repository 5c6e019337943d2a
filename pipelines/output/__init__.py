"""Where a job's output goes: destination checks, staging and publication, the run report."""
