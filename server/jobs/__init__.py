"""Jobs: the job manager and its supervisor threads (manager.py), the worker that runs one job,
the warm pool, the RQ queue and its workers, follow-ups, and what a worker's
events are trusted with."""
