"""The queue and what runs off it: RQ jobs, the worker, the reconciler, the supervisor, the
embedded Redis, the outbox and mail, the sandbox for blind runs."""
